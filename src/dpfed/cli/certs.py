"""``dpfed certs init``: a job's certificate authority and one certificate per party."""

from __future__ import annotations

import argparse

from dpfed._validation import DpfedInputError
from dpfed.cli.common import output_path
from dpfed.runtime.certs import init_certificates


def configure_certs(p: argparse.ArgumentParser) -> None:
    """``dpfed certs``: its ``init`` subcommand."""
    csub = p.add_subparsers(dest="certs_command", required=True)
    i = csub.add_parser(
        "init", help="create a CA and one certificate per party (and one for the leader)"
    )
    i.add_argument(
        "--out",
        type=output_path("folder"),
        required=True,
        help="folder to write ca.pem and NAME.pem/.key to",
    )
    i.add_argument("--parties", required=True, help="party names, comma-separated")
    i.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    i.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="NAME=HOST",
        help="another DNS name or IP address of a party's host (repeatable)",
    )
    i.set_defaults(func=run_certs_init)


def run_certs_init(args: argparse.Namespace) -> int:
    hosts: dict[str, list[str]] = {}
    for item in args.host:
        name, sep, host = item.partition("=")
        if not sep or not name or not host:
            raise DpfedInputError(f"--host must be NAME=HOST. Found {item!r}.")
        hosts.setdefault(name, []).append(host)
    parties = [p.strip() for p in args.parties.split(",")]
    made = init_certificates(args.out, parties, days=args.days, hosts=hosts or None)
    print(f"CA: {made.ca_certificate} (keep {made.ca_key} offline)")
    for name, cert in made.certificates.items():
        print(f"{name}: {cert} {made.keys[name]}")
    return 0
