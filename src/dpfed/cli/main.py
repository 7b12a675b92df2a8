"""The ``dpfed`` command.

Exit status: 0 on success, 2 on bad input (the message names the value), 1 on other errors.
Outputs are written only after a run succeeded, atomically.

Every top-level command lives in a module of this package and is listed in :data:`COMMANDS`
by name, not imported: a run imports the module of its own command only, so ``dpfed budget``
starts without the machine-learning stack and ``dpfed demo`` runs on an install without the
``net`` extra.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple

from dpfed import __version__
from dpfed._validation import DpfedInputError
from dpfed.runtime.grpc_log import enable_handshake_log
from dpfed.runtime.logs import quiet_grpc


class Command(NamedTuple):
    """A top-level command: its help and ``"module:function"`` configuring its parser."""

    help: str
    configure: str
    extra: str | None = None  # the optional dependencies it needs, if any


#: Every top-level command, in the order ``dpfed --help`` lists them.
COMMANDS: dict[str, Command] = {
    "demo": Command(
        "a 3-party vertical job on scikit-learn's breast cancer data",
        "dpfed.cli.demo:configure_demo",
    ),
    "train": Command("train a model by a protocol", "dpfed.cli.train:configure_train"),
    "privacy": Command(
        "privacy accounting for Gaussian releases", "dpfed.cli.privacy:configure_privacy"
    ),
    "reproduce": Command(
        "reproduce a paper's experiments", "dpfed.cli.reproduce:configure_reproduce"
    ),
    "certs": Command("certificates of a job's parties", "dpfed.cli.certs:configure_certs"),
    "schema": Command(
        "a party's table schema (dpfed schema draft)", "dpfed.cli.schema:configure_schema"
    ),
    "party": Command(
        "serve one party of a networked job until the job ends",
        "dpfed.cli.net:configure_party",
        "net",
    ),
    "run": Command("start and lead a networked job", "dpfed.cli.net:configure_run", "net"),
    "predict": Command(
        "score new rows with a finished networked job's model",
        "dpfed.cli.net:configure_predict",
        "net",
    ),
    "monitor": Command(
        "serve the page of a finished or stopped networked job",
        "dpfed.cli.net:configure_monitor",
        "net",
    ),
    "audit": Command(
        "measure a mechanism's privacy from the outside: an epsilon lower bound",
        "dpfed.cli.audit:configure_audit",
    ),
    "budget": Command(
        "a party's persistent privacy-budget ledger", "dpfed.cli.budget:configure_budget"
    ),
    "dca": Command(
        "secure aggregation by the DCA secret-sharing sum (paper 004)",
        "dpfed.cli.dca:configure_dca",
    ),
}


def _configure(name: str, parser: argparse.ArgumentParser) -> None:
    command = COMMANDS[name]
    module, function = command.configure.split(":")
    try:
        configure = getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as exc:
        if command.extra is None or (exc.name or "").startswith("dpfed"):
            raise
        raise DpfedInputError(
            f"dpfed {name} needs the '{command.extra}' extra ({exc.name} is missing): "
            f"pip install 'dpfed[{command.extra}]'"
        ) from None
    configure(parser)


def _chosen(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``dpfed`` argument parser.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments it will parse: only the command they name is configured (the others
        are listed with their help). None configures every command.
    """
    parser = argparse.ArgumentParser(
        prog="dpfed", description="Differentially private learning across parties."
    )
    parser.add_argument("--version", action="version", version=f"dpfed {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = None if argv is None else _chosen(argv)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        if argv is None or name == chosen:
            _configure(name, p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dpfed`` command on ``argv`` (default: the process's arguments)."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if argv is None and _chosen(args_in) == "party":  # a party process (not a call in one)
        enable_handshake_log()  # it names failed handshakes (asked before gRPC is imported)
    quiet_grpc()  # before anything imports gRPC
    try:
        args = build_parser(args_in).parse_args(args_in)
        return int(args.func(args) or 0)
    except DpfedInputError as exc:
        print(f"dpfed: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpfed: interrupted; no output was written", file=sys.stderr)
        return 130
