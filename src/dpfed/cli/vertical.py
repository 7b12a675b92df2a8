"""``dpfed train vertical``: column blocks held by different parties, DP ADMM sharing.

The protocol's options are generated from
:class:`~dpfed.protocols.vertical.driver.VerticalConfig` (one per field); the data options
are the command's.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.cli.common import add_engine_arguments, engine_from_args, output_path, print_result
from dpfed.data import Dataset, load_dataset, parse_split, vertical_split
from dpfed.estimators.baselines import fit_centralized, fit_local_only
from dpfed.parameters import add_config_arguments, config_kwargs
from dpfed.protocols.vertical.driver import VerticalConfig, sound_rounds, train_vertical


def add_train_vertical(sub: Any) -> None:
    """Register ``dpfed train vertical`` on the ``train`` subparsers ``sub``."""
    p = sub.add_parser(
        "vertical",
        help="vertically partitioned learning by (DP) ADMM sharing",
        description="Train a linear model on column blocks held by different parties.",
    )
    p.add_argument("--data", required=True, help="data set name (see --list) or LIBSVM file")
    p.add_argument("--test", help="LIBSVM test file (with a file given to --data)")
    p.add_argument("--data-dir", help="folder of named data sets (default: $DPFED_DATA)")
    p.add_argument(
        "--split", required=True, help="columns per party, label holder first, e.g. 66,57"
    )
    add_config_arguments(p, VerticalConfig)
    p.add_argument(
        "--rounds-above-rule",
        action="store_true",
        help="run the sound mechanism with more --iterations than its public rule picks "
             "(each round then gets more noise; refused without this flag)",
    )
    p.add_argument(
        "--baselines",
        action="store_true",
        help="also fit local-only and centralised scikit-learn models",
    )
    p.add_argument("--out", type=output_path("file"), required=True, help="result JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_engine_arguments(p)
    p.set_defaults(func=run_train_vertical)


def load_blocks(
    args: argparse.Namespace,
) -> tuple[Dataset, list[int], list[Any], list[Any] | None]:
    """The data set of ``--data``/``--test``, its split and its column blocks."""
    if args.test and not os.path.isfile(args.data):
        raise DpfedInputError(
            f"--test goes with a LIBSVM file given to --data. Found --data {args.data!r}."
        )
    dataset = load_dataset(args.data, args.data_dir, test=args.test)
    split = parse_split(args.split)
    blocks = vertical_split(dataset.X_train, split)
    test_blocks = vertical_split(dataset.X_test, split) if dataset.X_test is not None else None
    return dataset, split, blocks, test_blocks


def rounds_line(config: VerticalConfig, given: bool, n_samples: int,
                rounds_above_rule: bool, n_features: list[int] | None = None) -> str:
    """What the run's rounds are and where they come from; refuses (``DpfedInputError``) a
    sound run with a target epsilon and more rounds than the public rule picks unless
    ``rounds_above_rule``, naming the per-round noise of both."""
    cfg = config.validated()
    if cfg.mechanism != "sound" or cfg.epsilon is None:
        return f"rounds: {cfg.iterations}" + ("" if given else " (default)")
    plan = sound_rounds(cfg, n_samples, n_features)
    cost = (f"per-round noise multiplier {plan.noise_multiplier:.3g} at {plan.iterations} "
            f"rounds against {plan.rule_noise_multiplier:.3g} at the rule's "
            f"{plan.rule_iterations}")
    if not given:
        return (f"rounds: {plan.iterations}, picked by the sound mechanism's public rule for "
                f"epsilon {cfg.epsilon:g} (--iterations to choose)")
    if plan.above_rule and not rounds_above_rule:
        raise DpfedInputError(
            f"--iterations {plan.iterations} is above the {plan.rule_iterations} rounds the "
            f"sound mechanism's public rule picks for epsilon {cfg.epsilon:g}: {cost}, so "
            "every release is noisier and the model ends further from the centralised one "
            "(or, weighted down, at the label holder's alone). Leave --iterations out to use "
            "the rule, or add --rounds-above-rule to run anyway."
        )
    return f"rounds: {plan.iterations} (given; {cost})"


def run_train_vertical(args: argparse.Namespace) -> int:
    config = VerticalConfig(**config_kwargs(VerticalConfig, args)).validated()
    dataset, split, blocks, test_blocks = load_blocks(args)
    line = rounds_line(config, args.iterations is not None, blocks[0].shape[0],
                       args.rounds_above_rule, [b.shape[1] for b in blocks])
    print(line)
    result = train_vertical(
        blocks,
        dataset.y_train,
        config,
        test_blocks=test_blocks,
        test_labels=dataset.y_test,
        progress=not args.quiet,
        engine=engine_from_args(args),
    )
    payload = result.to_json()
    payload["data"] = {
        "name": dataset.name,
        "source": dataset.source,
        "split": split,
        "n_train": int(blocks[0].shape[0]),
        "n_test": int(test_blocks[0].shape[0]) if test_blocks else 0,
    }
    payload["preprocessing"] = dataset.preprocessing
    if args.baselines:
        payload["baselines"] = baselines(
            blocks, dataset.y_train, test_blocks, dataset.y_test, config.lam
        )
    write_json_atomic(args.out, payload)
    print_result(payload, args.out)
    return 0


def baselines(
    blocks: list[Any], y: Any, test_blocks: list[Any] | None, y_test: Any, lam: float
) -> dict[str, dict[str, Any]]:
    """Local-only and centralised scikit-learn models at ``lam`` (their figures, no coef)."""
    out = {}
    for name, fit in (("local_only", fit_local_only), ("centralized", fit_centralized)):
        res = fit(blocks, y, lam=lam, test_blocks=test_blocks, test_labels=y_test)
        out[name] = {k: v for k, v in res.items() if k != "coef"}
    return out
