"""``dpfed budget show|set|close|abandon|check``: a party's persistent privacy-budget ledger."""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.parameters import parse_float
from dpfed.privacy.accounting import releases_epsilon
from dpfed.runtime.budget import BudgetLedger, format_summary
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.jobspec import JobSpec
from dpfed.runtime.registry import get_protocol


def configure_budget(p: argparse.ArgumentParser) -> None:
    """``dpfed budget``: its ``show``, ``set``, ``close``, ``abandon`` and ``check``
    subcommands."""
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
    c = bsub.add_parser("close", help="close an abandoned job: its unspent reservation is returned")
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
    k = bsub.add_parser(
        "check",
        help="whether a job file's job fits each party's budget now, and the largest "
        "epsilon a job of its shape could have (reserves nothing)",
    )
    k.add_argument("--config", required=True, help="the job file")
    k.add_argument("--name", help="check only this party (each organisation checks its own)")
    k.add_argument("--json", action="store_true")
    k.set_defaults(func=run_budget_check)


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
        job = next(
            (j for j in ledger.jobs() if j["id"] == args.job and j["party"] == args.party), None
        )
        if job is None:
            raise DpfedInputError(
                f"--job must name a job of party {args.party!r} in {args.ledger!r}. "
                f"Found {args.job!r}."
            )
        if job["recorded"]:
            ledger.close_job(args.job, args.party)
            print(
                f"job {args.job} of {args.party} closed: its {job['recorded']} recorded "
                "release(s) stay spent, the rest of its reservation is returned; the id "
                "cannot run again"
            )
        else:
            ledger.withdraw_job(args.job, args.party, reason=args.reason)
            print(
                f"job {args.job} of {args.party} withdrawn: it released nothing, its "
                "reservation is returned and the id can run again"
            )
    return 0


#: Halvings of the largest-epsilon search (a relative precision of 2^-12 of the budget).
_CHECK_STEPS = 12


def _plan_of(spec: JobSpec, name: str, epsilon: float | None = None) -> list[Any]:
    """Party ``name``'s budget plan for ``spec`` (with ``[params].epsilon`` replaced), computed
    as the party computes it, with its work folder in a temporary folder (a check writes
    nothing of the party's: no noise secret, no journal)."""
    params = spec.params if epsilon is None else {**spec.params, "epsilon": epsilon}
    with tempfile.TemporaryDirectory(prefix="dpfed-check-") as scratch:
        parties = tuple(replace(p, workdir=Path(scratch) / p.name) for p in spec.parties)
        host = get_protocol(spec.protocol).host(replace(spec, params=params, parties=parties), name)
        return list(host.plan) if host.holds_data else []


def check_party(spec: JobSpec, name: str) -> dict[str, Any]:
    """Whether ``spec``'s job fits party ``name``'s budget now, and the largest epsilon a job
    of the same shape (the same file with another ``[params].epsilon``) could have.

    Reads the party's ledger if it exists here (nothing is written), else the job file's
    budget; the party's data must be readable here, as the party computes its plan from it.
    """
    party = spec.party(name)
    out: dict[str, Any] = {"party": name, "dataset": party.dataset}
    try:
        plan = _plan_of(spec, name)
    except (DpfedInputError, OSError) as err:
        return out | {"status": "not checked", "reason": str(err)}
    if not plan:
        return out | {
            "status": "nothing to account",
            "reason": "the job releases nothing noisy from this party's data",
        }
    if not party.ledger.is_file() and party.budget is None:
        return out | {
            "status": "no budget",
            "reason": f"no ledger at {str(party.ledger)!r} and no budget in the job "
            "file: the party would refuse the job",
        }

    def check(p: list[Any]) -> dict[str, Any]:
        if party.ledger.is_file():
            with BudgetLedger(party.ledger) as ledger:
                return ledger.check_plan(party.dataset, name, p)
        assert party.budget is not None
        total = releases_epsilon(p, party.budget.delta)
        return {
            "budget_epsilon": party.budget.epsilon,
            "delta": party.budget.delta,
            "spent": 0.0,
            "committed": 0.0,
            "total": total,
            "fits": total <= party.budget.epsilon,
        }

    now = check(plan)
    source = str(party.ledger) if party.ledger.is_file() else "the job file (no ledger yet)"
    out |= now | {"budget_from": source, "status": "fits" if now["fits"] else "exceeds"}
    epsilon = spec.params.get("epsilon")
    if now["budget_epsilon"] is not None and isinstance(epsilon, int | float):
        out["largest_epsilon"] = _largest(
            spec, name, lambda p: bool(check(p)["fits"]), float(now["budget_epsilon"])
        )
    return out


def _largest(spec: JobSpec, name: str, fits: Any, ceiling: float) -> float | None:
    """The largest ``[params].epsilon`` whose plan fits (a job's own epsilon is at most what it
    adds to the total, so at most the budget), by bisection; None if nothing fits."""

    def ok(epsilon: float) -> bool:
        try:
            return bool(fits(_plan_of(spec, name, epsilon)))
        except DpfedInputError:  # a job of this shape at this epsilon would be refused
            return False

    lo, hi = 0.0, ceiling
    if ok(hi):
        return hi
    found = False
    for _ in range(_CHECK_STEPS):
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo, found = mid, True
        else:
            hi = mid
    return lo if found else None


def run_budget_check(args: argparse.Namespace) -> int:
    spec = load_job(args.config)
    names = [args.name] if args.name else list(spec.names)
    if args.name is not None:
        spec.party(args.name)  # a clear error for an unknown name
    results = [check_party(spec, name) for name in names]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        head = f"{r['party']} on {r['dataset']}: "
        if r["status"] in ("not checked", "nothing to account", "no budget"):
            print(head + f"{r['status']} ({r['reason']})")
            continue
        verdict = "fits" if r["fits"] else "does NOT fit"
        print(
            head + f"the job {verdict}: epsilon {r['total']:.4g} committed with it, budget "
            f"{r['budget_epsilon']:.4g} (delta {r['delta']:g}); spent {r['spent']:.4g}, "
            f"committed now {r['committed']:.4g} (budget from {r['budget_from']})"
        )
        if "largest_epsilon" in r:
            largest = r["largest_epsilon"]
            print(
                "  largest [params].epsilon of a job of this shape that fits now: "
                + ("none" if largest is None else f"{largest:.4g}")
            )
    return 0 if all(r.get("fits", True) for r in results) else 1
