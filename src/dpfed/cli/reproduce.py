"""``dpfed reproduce``: the papers' experiments, one subcommand per paper."""

from __future__ import annotations

import argparse

from dpfed.cli.bayes import add_reproduce_bayes_linreg
from dpfed.cli.common import add_task_engine_arguments, executor_from_args, output_path, print_json
from dpfed.cli.dca import add_reproduce_dca_scaling
from dpfed.experiments.consensus import run_consensus_reproduction
from dpfed.experiments.decentralized import run_decentralized_reproduction
from dpfed.experiments.vertical import run_vertical_reproduction


def configure_reproduce(p: argparse.ArgumentParser) -> None:
    """``dpfed reproduce``: one subcommand per paper."""
    psub = p.add_subparsers(dest="reproduce_command", required=True)
    v = psub.add_parser("vertical", help="figures 1-3 of DP ADMM sharing, and the DP frontier")
    v.add_argument("--out", type=output_path("folder"), required=True, help="output folder")
    v.add_argument("--data-dir", help="folder of named data sets (default: $DPFED_DATA)")
    v.add_argument("--quick", action="store_true", help="a small, fast configuration")
    v.add_argument("--quiet", action="store_true")
    add_task_engine_arguments(v, "runs")
    v.set_defaults(func=run_reproduce_vertical)
    d = psub.add_parser(
        "decentralized",
        help="paper 001 (DVP/PVP decentralized ADMM on Adult): figures 3-5 and more",
    )
    c = psub.add_parser(
        "consensus", help="DP consensus ADMM (paper 002) on Adult: accuracy vs epsilon"
    )
    for q, func in ((d, run_reproduce_decentralized), (c, run_reproduce_consensus)):
        q.add_argument("--out", type=output_path("folder"), required=True, help="output folder")
        q.add_argument("--data-dir", help="folder holding adult/ (default: $DPFED_DATA)")
        q.add_argument("--quick", action="store_true", help="a small, fast configuration")
        q.add_argument("--quiet", action="store_true")
        add_task_engine_arguments(q, "runs")
        q.set_defaults(func=func)
    add_reproduce_bayes_linreg(psub)
    add_reproduce_dca_scaling(psub)


def run_reproduce_decentralized(args: argparse.Namespace) -> int:
    summary = run_decentralized_reproduction(
        args.out,
        data_dir=args.data_dir,
        quick=args.quick,
        progress=not args.quiet,
        executor=executor_from_args(args),
    )
    print_json(summary)
    return 0


def run_reproduce_consensus(args: argparse.Namespace) -> int:
    summary = run_consensus_reproduction(
        args.out,
        data_dir=args.data_dir,
        quick=args.quick,
        progress=not args.quiet,
        executor=executor_from_args(args),
    )
    print_json(summary)
    return 0


def run_reproduce_vertical(args: argparse.Namespace) -> int:
    summary = run_vertical_reproduction(
        args.out,
        data_dir=args.data_dir,
        quick=args.quick,
        progress=not args.quiet,
        executor=executor_from_args(args),
    )
    print_json(summary)
    return 0
