"""``dpfed budget show|set|close|abandon``: a party's persistent privacy-budget ledger."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dpfed._validation import DpfedInputError
from dpfed.parameters import parse_float
from dpfed.runtime.budget import BudgetLedger, format_summary


def configure_budget(p: argparse.ArgumentParser) -> None:
    """``dpfed budget``: its ``show``, ``set``, ``close`` and ``abandon`` subcommands."""
    bsub = p.add_subparsers(dest="budget_command", required=True)
    s = bsub.add_parser("show", help="budgets, spending and jobs")
    s.add_argument("--ledger", required=True, help="the ledger file (SQLite)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=run_budget_show)
    b = bsub.add_parser("set", help="set the budget of a data set")
    b.add_argument("--ledger", required=True)
    b.add_argument("--dataset", required=True)
    b.add_argument("--party", required=True)
    b.add_argument("--epsilon", type=parse_float, required=True)
    b.add_argument("--delta", type=parse_float, required=True)
    b.set_defaults(func=run_budget_set)
    c = bsub.add_parser(
        "close", help="close an abandoned job: its unspent reservation is returned"
    )
    c.add_argument("--ledger", required=True)
    c.add_argument("--job", required=True)
    c.add_argument("--party", required=True)
    c.set_defaults(func=run_budget_close)
    a = bsub.add_parser(
        "abandon",
        help="abandon a job: withdrawn if it released nothing (its id can run again), "
             "otherwise closed (its spending stays; the unspent rest is returned)",
    )
    a.add_argument("--ledger", required=True)
    a.add_argument("--job", required=True)
    a.add_argument("--party", required=True)
    a.add_argument("--reason", default="abandoned by the operator")
    a.set_defaults(func=run_budget_abandon)


def open_ledger(path: str, *, must_exist: bool = True) -> BudgetLedger:
    """The ledger at ``path`` (refused if missing and ``must_exist``)."""
    if must_exist and not Path(path).is_file():
        raise DpfedInputError(f"ledger {path!r} does not exist. {NO_LEDGER}")
    return BudgetLedger(path)


#: Why a party may have no ledger (said with every "does not exist").
NO_LEDGER = (
    "A party's ledger is created when it first runs a job that releases noisy values computed "
    "from its data (at the job file's `ledger`, default <workdir>/ledger.sqlite). A party that "
    "releases nothing noisy has none: a consensus server or a compute node (no data), a label "
    "holder whose rows are not protected (its data leave it exactly; protect_label_holder "
    "protects them), any party of a job without a mechanism or of a simulation."
)


def run_budget_show(args: argparse.Namespace) -> int:
    with open_ledger(args.ledger) as ledger:
        summary = ledger.summary()
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(format_summary(summary))
    return 0


def run_budget_set(args: argparse.Namespace) -> int:
    with open_ledger(args.ledger, must_exist=False) as ledger:
        ledger.set_budget(args.dataset, args.party, args.epsilon, args.delta)
    print(f"budget of {args.party} on {args.dataset}: epsilon {args.epsilon}, delta {args.delta}")
    return 0


def run_budget_close(args: argparse.Namespace) -> int:
    with open_ledger(args.ledger) as ledger:
        ledger.close_job(args.job, args.party)
    print(f"job {args.job} of {args.party} closed")
    return 0


def run_budget_abandon(args: argparse.Namespace) -> int:
    with open_ledger(args.ledger) as ledger:
        job = next((j for j in ledger.jobs() if j["id"] == args.job
                    and j["party"] == args.party), None)
        if job is None:
            raise DpfedInputError(
                f"--job must name a job of party {args.party!r} in {args.ledger!r}. "
                f"Found {args.job!r}."
            )
        if job["recorded"]:
            ledger.close_job(args.job, args.party)
            print(f"job {args.job} of {args.party} closed: its {job['recorded']} recorded "
                  "release(s) stay spent, the rest of its reservation is returned; the id "
                  "cannot run again")
        else:
            ledger.withdraw_job(args.job, args.party, reason=args.reason)
            print(f"job {args.job} of {args.party} withdrawn: it released nothing, its "
                  "reservation is returned and the id can run again")
    return 0
