"""``dpfed audit``: measure a mechanism's privacy from the outside (an epsilon lower bound)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.audit.auditors import AUDITORS, BROKEN
from dpfed.audit.report import audit_all, audit_tasks, table_markdown
from dpfed.audit.run import run_audit, run_one_run_audit
from dpfed.cli.common import add_task_engine_arguments, executor_from_args, output_path
from dpfed.parameters import parse_float, parse_int
from dpfed.runtime.progress import progress_bar


def configure_audit(p: argparse.ArgumentParser) -> None:
    """``dpfed audit``."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--mechanism", choices=sorted(AUDITORS))
    which.add_argument(
        "--all",
        action="store_true",
        help="every mechanism, honest and broken, in parallel; --out is a folder",
    )
    p.add_argument(
        "--protect-label-holder",
        action="store_true",
        help="with --mechanism vertical-sound: audit the protected label holder's "
        "releases (vertical-sound-label-holder)",
    )
    p.add_argument(
        "--loss",
        default=None,
        help="with --mechanism: the loss of the audited configuration (default: the "
        "mechanism's first; --all audits every loss each mechanism accepts)",
    )
    p.add_argument(
        "--epsilon",
        type=parse_float,
        default=1.0,
        help="the target the mechanism is calibrated to (default 1)",
    )
    p.add_argument("--delta", type=parse_float, default=1e-5, help="(default 1e-5)")
    p.add_argument(
        "--runs",
        type=parse_int,
        default=1000,
        help="runs on each neighbouring data set (default 1000)",
    )
    p.add_argument(
        "--one-run",
        action="store_true",
        help="one run with --canaries canaries (Steinke, Nasr and Jagielski 2023) "
        "instead of --runs runs",
    )
    p.add_argument(
        "--canaries",
        type=parse_int,
        default=1000,
        help="with --one-run: canaries, each included with probability 1/2 (default 1000)",
    )
    p.add_argument(
        "--guesses",
        type=parse_int,
        default=None,
        help="with --one-run: guesses, half 'in' for the highest scores, half 'out' "
        "for the lowest (default: a fifth of the canaries)",
    )
    p.add_argument("--seed", type=parse_int, default=0, help="seed of the runs' noise")
    p.add_argument(
        "--broken",
        choices=BROKEN,
        default=None,
        help="audit a deliberately broken configuration: the attacker knows the "
        "noise, or the noise is calibrated to a sensitivity --factor times "
        "too small",
    )
    p.add_argument(
        "--factor",
        type=parse_float,
        default=100.0,
        help="how much --broken sensitivity understates it (default 100)",
    )
    p.add_argument(
        "--broken-runs",
        type=parse_int,
        default=300,
        help="with --all: runs per neighbour of each broken audit (default 300)",
    )
    p.add_argument(
        "--workers",
        type=parse_int,
        default=None,
        help="with --all: processes (default: every core)",
    )
    add_task_engine_arguments(p, "audits of --all")
    p.add_argument(
        "--out",
        type=output_path("file or folder"),
        required=True,
        help="audit JSON file (with --all: a folder)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_audit_command)


def run_audit_command(args: argparse.Namespace) -> int:
    if args.all and args.loss is not None:
        raise DpfedInputError(
            "--all audits every loss each mechanism accepts; --loss goes with --mechanism."
        )
    if args.all:
        return run_audit_all(args)
    if args.engine != "inprocess" or args.ray_address:
        raise DpfedInputError(
            "--engine ray runs the audits of --all as Ray tasks; one audit runs in this "
            "process. Add --all, or leave --engine out."
        )
    if args.protect_label_holder:
        if args.mechanism != "vertical-sound":
            raise DpfedInputError(
                "--protect-label-holder goes with --mechanism vertical-sound. Found "
                f"{args.mechanism!r}."
            )
        args.mechanism = "vertical-sound-label-holder"
    if args.one_run:
        result = run_one_run_audit(
            args.mechanism,
            epsilon=args.epsilon,
            delta=args.delta,
            canaries=args.canaries,
            guesses=args.guesses,
            seed=args.seed,
            broken=args.broken,
            factor=args.factor,
            loss=args.loss,
        )
        write_json_atomic(args.out, result)
        loss = f" ({result['loss']} loss)" if result["loss"] else ""
        print(
            f"{result['mechanism']}{loss}"
            f"{' (broken: ' + args.broken + ')' if args.broken else ''}, "
            f"one run: claimed epsilon {result['claimed_epsilon']:.4g} at delta "
            f"{result['delta']:g}; audited lower bound {result['epsilon_lower_bound']:.4g} "
            f"({result['confidence']:.0%} confidence; {result['correct']} of "
            f"{result['guesses']} guesses right on {result['canaries']} canaries)"
        )
        if result["epsilon_lower_bound"] > result["claimed_epsilon"]:
            print("VIOLATION: the audited lower bound exceeds the claimed epsilon")
        print(f"wrote {args.out}")
        return 0
    bar = progress_bar(args.runs, not args.quiet, desc=f"audit {args.mechanism}")
    try:
        result = run_audit(
            args.mechanism,
            epsilon=args.epsilon,
            delta=args.delta,
            runs=args.runs,
            seed=args.seed,
            broken=args.broken,
            factor=args.factor,
            loss=args.loss,
            progress=None if bar is None else (lambda done: bar.update(1)),
        )
    finally:
        if bar is not None:
            bar.close()
    write_json_atomic(args.out, result)
    realised = result["realised_epsilon"]
    loss = f" ({result['loss']} loss)" if result["loss"] else ""
    print(
        f"{result['mechanism']}{loss}"
        f"{' (broken: ' + args.broken + ')' if args.broken else ''}: "
        f"claimed epsilon {result['claimed_epsilon']:.4g} at delta {result['delta']:g}; "
        f"audited lower bound {result['epsilon_lower_bound']:.4g} "
        f"({result['confidence']:.0%} confidence, {result['runs']} runs per neighbour, "
        f"TPR {result['tpr']:.3f} at FPR {result['fpr']:.3f})"
        + (
            f"; analytic epsilon at the realised sensitivity {realised:.4g}"
            if realised is not None
            else ""
        )
    )
    if result["epsilon_lower_bound"] > result["claimed_epsilon"]:
        print("VIOLATION: the audited lower bound exceeds the claimed epsilon")
    print(f"wrote {args.out}")
    return 0


def run_audit_all(args: argparse.Namespace) -> int:
    """``dpfed audit --all``: the table of every audit."""
    tasks = audit_tasks(args.runs, args.broken_runs)
    bar = progress_bar(len(tasks), not args.quiet, desc="audits")

    def done(record: dict[str, Any]) -> None:
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(record["mechanism"])

    try:
        records = audit_all(
            args.out,
            epsilon=args.epsilon,
            delta=args.delta,
            runs=args.runs,
            broken_runs=args.broken_runs,
            seed=args.seed,
            workers=args.workers,
            progress=done,
            executor=executor_from_args(args),
        )
    finally:
        if bar is not None:
            bar.close()
    print(table_markdown(records), end="")
    print(
        f"wrote {args.out}/ (audit.json, table.md, one JSON per audit"
        + (", roc.png)" if (Path(args.out) / "roc.png").exists() else ")")
    )
    return 0
