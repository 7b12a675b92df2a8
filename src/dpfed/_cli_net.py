"""The networked runtime's commands: ``certs init``, ``party``, ``run`` and ``budget``."""

from __future__ import annotations

import json
import sys

from dpfed._cli_common import print_result
from dpfed._validation import DpfedInputError
from dpfed.runtime.disclosure import result_warnings


def _need_net() -> None:
    try:
        import cryptography  # noqa: F401
        import grpc  # noqa: F401
    except ImportError as exc:
        raise DpfedInputError(
            f"the networked runtime needs the 'net' extra ({exc.name} is missing): "
            "pip install 'dpfed[net]'"
        ) from None


# -- certs ------------------------------------------------------------------------------------
def add_certs(sub) -> None:
    p = sub.add_parser("certs", help="certificates of a job's parties")
    csub = p.add_subparsers(dest="certs_command", required=True)
    i = csub.add_parser(
        "init", help="create a CA and one certificate per party (and one for the leader)"
    )
    i.add_argument("--out", required=True, help="folder to write ca.pem and NAME.pem/.key to")
    i.add_argument("--parties", required=True, help="party names, comma-separated")
    i.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    i.add_argument(
        "--host", action="append", default=[], metavar="NAME=HOST",
        help="another DNS name or IP address of a party's host (repeatable)",
    )
    i.set_defaults(func=_cmd_certs_init)


def _cmd_certs_init(args) -> int:
    _need_net()
    from dpfed.runtime.certs import init_certificates

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


# -- party and run ----------------------------------------------------------------------------
def add_party(sub) -> None:
    p = sub.add_parser("party", help="serve one party of a networked job until the job ends")
    p.add_argument("--config", required=True, help="the job file (TOML)")
    p.add_argument("--name", required=True, help="the party this process serves")
    p.set_defaults(func=_cmd_party)


def _cmd_party(args) -> int:
    _need_net()
    from dpfed.runtime.jobfile import load_job
    from dpfed.runtime.party import run_party

    return run_party(load_job(args.config), args.name)


def add_run(sub) -> None:
    p = sub.add_parser("run", help="start and lead a networked job")
    p.add_argument("--config", required=True, help="the job file (TOML)")
    p.add_argument("--out", required=True, help="result JSON file")
    p.add_argument(
        "--resume", action="store_true", help="continue a stopped job from its checkpoints"
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args) -> int:
    _need_net()
    from dpfed.runtime.jobfile import load_job
    from dpfed.runtime.leader import EXIT_STOPPED, JobStopped, run_job

    spec = load_job(args.config)
    try:
        result = run_job(spec, args.out, resume=args.resume, progress=not args.quiet)
    except JobStopped as exc:
        print(f"dpfed: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    if result["protocol"] == "secure_sum":
        _print_secure_sum(result, args.out)
    else:
        print_result(result, args.out)
    return 0


def _print_secure_sum(result: dict, out: str) -> None:
    shown = ", ".join(f"{v:.6g}" for v in result["sum"][:8])
    more = f", ... ({len(result['sum'])} values)" if len(result["sum"]) > 8 else ""
    print(f"secure sum of {len(result['included'])} of {len(result['clients'])} clients over "
          f"{len(result['compute_nodes'])} compute nodes: [{shown}{more}]")
    for warning in result_warnings(result):
        print(f"WARNING: {warning}")
    privacy = result["privacy"]
    if privacy.get("epsilon") is not None:
        print(f"privacy (distributed Gaussian): epsilon = {privacy['epsilon']:.4g} at delta = "
              f"{privacy['delta']:g}; noise std per client {privacy['client_std']:.4g}")
    elif privacy["mechanism"] != "none":
        print(f"privacy: noise std per client {privacy['client_std']:.4g} (no epsilon: the "
              "job gives noise_std, not a target)")
    for note in privacy.get("notes", []):
        print(f"note: {note}")
    print(f"wrote {out}")


# -- budget -----------------------------------------------------------------------------------
def add_budget(sub) -> None:
    p = sub.add_parser("budget", help="a party's persistent privacy-budget ledger")
    bsub = p.add_subparsers(dest="budget_command", required=True)
    s = bsub.add_parser("show", help="budgets, spending and jobs")
    s.add_argument("--ledger", required=True, help="the ledger file (SQLite)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_cmd_budget_show)
    b = bsub.add_parser("set", help="set the budget of a data set")
    b.add_argument("--ledger", required=True)
    b.add_argument("--dataset", required=True)
    b.add_argument("--party", required=True)
    b.add_argument("--epsilon", type=float, required=True)
    b.add_argument("--delta", type=float, required=True)
    b.set_defaults(func=_cmd_budget_set)
    c = bsub.add_parser(
        "close", help="close an abandoned job: its unspent reservation is returned"
    )
    c.add_argument("--ledger", required=True)
    c.add_argument("--job", required=True)
    c.add_argument("--party", required=True)
    c.set_defaults(func=_cmd_budget_close)


def _ledger(path: str, *, must_exist: bool = True):
    from pathlib import Path

    from dpfed.runtime.budget import BudgetLedger

    if must_exist and not Path(path).is_file():
        raise DpfedInputError(f"ledger {path!r} does not exist.")
    return BudgetLedger(path)


def _cmd_budget_show(args) -> int:
    from dpfed.runtime.budget import format_summary

    with _ledger(args.ledger) as ledger:
        summary = ledger.summary()
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(format_summary(summary))
    return 0


def _cmd_budget_set(args) -> int:
    with _ledger(args.ledger, must_exist=False) as ledger:
        ledger.set_budget(args.dataset, args.party, args.epsilon, args.delta)
    print(f"budget of {args.party} on {args.dataset}: epsilon {args.epsilon}, delta {args.delta}")
    return 0


def _cmd_budget_close(args) -> int:
    with _ledger(args.ledger) as ledger:
        ledger.close_job(args.job, args.party)
    print(f"job {args.job} of {args.party} closed")
    return 0
