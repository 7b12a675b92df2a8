"""``dpfed train bayes-linreg`` and ``dpfed reproduce bayes-linreg``: DP Bayesian linear
regression by sufficient-statistics perturbation (Heikkilä et al., NeurIPS 2017)."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.cli.common import add_task_engine_arguments, executor_from_args, output_path, print_json
from dpfed.data.regression import REGRESSION_DATASETS
from dpfed.experiments.bayes_linreg import (
    cross_validate,
    full_plan,
    load_scaled,
    quick_plan,
    run_bayes_linreg_reproduction,
)
from dpfed.experiments.runner import Progress
from dpfed.parameters import parse_float, parse_int

#: ``--data`` choices (the registry names of :mod:`dpfed.data.regression`).
DATA_CHOICES = ("wine-red", "wine-white", "abalone")


def add_train_bayes_linreg(sub: Any) -> None:
    """Register ``dpfed train bayes-linreg`` on the ``train`` subparsers ``sub``."""
    p = sub.add_parser(
        "bayes-linreg",
        help="DP Bayesian linear regression by sufficient-statistics perturbation",
        description=(
            "Each training row is one client. The rows are centred by DP column means "
            "(unless --no-centre), then the sufficient statistics are summed with "
            "Gaussian noise (trusted aggregator, DCA secure sum, or input perturbation), "
            "optionally after the projection of Algorithm 2; reports the test MAE of each "
            "random split and their median."
        ),
    )
    p.add_argument("--data", required=True, choices=DATA_CHOICES)
    p.add_argument("--data-dir", help="folder of named data sets (default: $DPFED_DATA)")
    p.add_argument("--epsilon", type=parse_float, help="total epsilon (not with --mode nonprivate)")
    p.add_argument("--delta", type=parse_float, help="total delta (not with --mode nonprivate)")
    p.add_argument(
        "--projection",
        action="store_true",
        help="Algorithm 2: clip to fractions of private standard deviations",
    )
    p.add_argument(
        "--mode", default="distributed", choices=["distributed", "trusted", "input", "nonprivate"]
    )
    p.add_argument("--runs", type=parse_int, default=25, help="random train/test splits")
    p.add_argument("--seed", type=parse_int, default=0, help="seed of the splits and the noise")
    p.add_argument("--compute-nodes", type=parse_int, default=10, help="M of the secure sum")
    p.add_argument(
        "--tolerated",
        type=parse_int,
        default=0,
        help="T: colluding or dropped clients tolerated (distributed)",
    )
    p.add_argument("--calibration", default="tight", choices=["tight", "paper"])
    p.add_argument(
        "--bound",
        type=parse_float,
        default=7.5,
        help="assumed bound of every scaled feature and the target",
    )
    p.add_argument(
        "--std-share",
        type=parse_float,
        default=0.3,
        help="share of the budget for the projection's standard deviations",
    )
    p.add_argument(
        "--no-centre",
        dest="centre",
        action="store_false",
        help="the paper's algorithm exactly: no centring by DP means, no intercept",
    )
    p.add_argument(
        "--centre-share",
        type=parse_float,
        default=0.3,
        help="share of the budget for the DP means without projection (with "
        "projection they share the standard-deviation release)",
    )
    p.add_argument("--out", type=output_path("file"), required=True, help="result JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_task_engine_arguments(p, "runs")
    p.set_defaults(func=run_train_bayes_linreg)


def _check_mode(args: argparse.Namespace) -> bool:
    """Whether the mode is private; refuse a budget it would not use or miss one it needs."""
    private = args.mode != "nonprivate"
    if private and (args.epsilon is None or args.delta is None):
        raise DpfedInputError(
            f"--mode {args.mode} needs --epsilon and --delta. Found epsilon={args.epsilon!r}, "
            f"delta={args.delta!r}."
        )
    if not private and (args.epsilon is not None or args.delta is not None or args.projection):
        raise DpfedInputError(
            "--mode nonprivate adds no noise: drop --epsilon, --delta and --projection."
        )
    return private


def _print_summary(
    args: argparse.Namespace, res: dict[str, Any], privacy: dict[str, Any], target: str
) -> None:
    """The median error, the privacy spent and the notes, as the command prints them."""
    iqr = res["iqr"]
    print(
        f"median test MAE over {args.runs} runs: {res['median']:.4f} "
        f"(IQR {iqr[0]:.4f}-{iqr[1]:.4f}; {res['median_target_units']:.4f} in "
        f"{target} units)"
    )
    if args.mode != "nonprivate":
        stated = privacy.get("paper_epsilon")
        print(
            f"privacy ({args.mode}, {args.calibration}): epsilon = {privacy['epsilon']:.4g} "
            f"at delta = {args.delta:g} (accounted: {privacy['epsilon_accounted']:.4g}"
            + (f"; the paper's stated budget: {stated:g})" if stated is not None else ")")
        )
    for note in privacy["notes"]:
        print(f"note: {note}")
    print(f"wrote {args.out}")


def run_train_bayes_linreg(args: argparse.Namespace) -> int:
    _check_mode(args)
    started = time.perf_counter()
    data, scaling = load_scaled(args.data, args.data_dir)
    n_test = REGRESSION_DATASETS[args.data].test_size
    bar = Progress(args.runs, not args.quiet, "train bayes-linreg")
    try:
        res = cross_validate(
            data,
            scaling,
            runs=args.runs,
            seed=args.seed,
            n_test=n_test,
            mode=args.mode,
            projection=args.projection,
            epsilon=args.epsilon,
            delta=args.delta,
            calibration=args.calibration,
            bound=args.bound,
            std_share=args.std_share,
            centre=args.centre,
            centre_share=args.centre_share,
            compute_nodes=args.compute_nodes,
            tolerated=args.tolerated,
            on_run=lambda r: bar.step(f"run {r}"),
            executor=executor_from_args(args),
        )
    finally:
        bar.close()
    privacy = res["privacy"]
    privacy["notes"] = [*privacy["notes"], *scaling.notes]
    if args.mode != "nonprivate":
        privacy["notes"].append(
            f"simulation: every client's noise (and the splits) come from seed "
            f"{args.seed}; a deployment draws each client's noise from its own secret, as the "
            "networked secure sum (dpfed run) does."
        )
    payload = {
        "protocol": "bayes-linreg",
        "data": {
            "name": args.data,
            "source": data.source,
            "n_rows": data.n_samples,
            "d": data.n_features,
            "n_train": res["n_train"],
            "n_test": res["n_test"],
            "target": data.target_name,
            "target_scale_factor": scaling.factor_y,
            "scaling": {"length": scaling.length, "center": scaling.center},
        },
        "config": {
            "mode": args.mode,
            "projection": args.projection,
            "epsilon": args.epsilon,
            "delta": args.delta,
            "calibration": args.calibration,
            "runs": args.runs,
            "seed": args.seed,
            "compute_nodes": args.compute_nodes,
            "tolerated": args.tolerated,
            "bound": args.bound,
            "std_share": args.std_share,
            "centre": args.centre,
            "centre_share": args.centre_share,
        },
        "mae": res["mae"],
        "median": res["median"],
        "iqr": res["iqr"],
        "mae_target_units": res["mae_target_units"],
        "median_target_units": res["median_target_units"],
        "privacy": privacy,
        "preprocessing": data.preprocessing,
        "runs": res["runs"],
        "seconds": time.perf_counter() - started,
    }
    write_json_atomic(args.out, payload)
    _print_summary(args, res, privacy, data.target_name)
    return 0


def add_reproduce_bayes_linreg(sub: Any) -> None:
    """Register ``dpfed reproduce bayes-linreg`` on the ``reproduce`` subparsers ``sub``."""
    p = sub.add_parser(
        "bayes-linreg",
        help="DP Bayesian linear regression on UCI data (Heikkilä et al. 2017, figure 2)",
    )
    p.add_argument("--out", type=output_path("folder"), required=True, help="output folder")
    p.add_argument(
        "--data-dir", help="folder holding wine_quality/ and abalone/ (default: $DPFED_DATA)"
    )
    p.add_argument("--quick", action="store_true", help="a small, fast configuration")
    p.add_argument(
        "--no-centre",
        dest="centre",
        action="store_false",
        help="the paper's algorithm exactly: no centring by DP means",
    )
    p.add_argument("--quiet", action="store_true")
    add_task_engine_arguments(p, "cells of the grid")
    p.set_defaults(func=run_reproduce_bayes_linreg)


def run_reproduce_bayes_linreg(args: argparse.Namespace) -> int:
    plan = replace(quick_plan() if args.quick else full_plan(), centre=args.centre)
    summary = run_bayes_linreg_reproduction(
        args.out,
        data_dir=args.data_dir,
        quick=args.quick,
        progress=not args.quiet,
        plan=plan,
        executor=executor_from_args(args),
    )
    print_json(summary)
    return 0
