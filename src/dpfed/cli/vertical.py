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
from dpfed.core.losses import score_metrics
from dpfed.data import Dataset, load_dataset, parse_split, vertical_split
from dpfed.data.join import join_tables
from dpfed.engines import engine_block
from dpfed.estimators.baselines import fit_centralized, fit_local_only
from dpfed.parameters import add_config_arguments, config_kwargs
from dpfed.protocols.vertical.driver import VerticalConfig, sound_rounds, train_vertical
from dpfed.protocols.vertical.host import rounds_above_rule, vertical_config
from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
from dpfed.protocols.vertical_secure.party import RoundCost, bounded_rows
from dpfed.protocols.vertical_secure.setup import (
    NO_FALLBACK,
    WEIGHTED_BOUND,
    secure_protection,
)
from dpfed.runtime.jobfile import load_job


def add_train_vertical(sub: Any) -> None:
    """Register ``dpfed train vertical`` on the ``train`` subparsers ``sub``."""
    p = sub.add_parser(
        "vertical",
        help="vertically partitioned learning by (DP) ADMM sharing",
        description="Train a linear model on column blocks held by different parties.",
    )
    p.add_argument(
        "--config",
        metavar="JOB",
        help='a job file whose parties hold their own tables ([job].align = "psi": CSVs '
        "keyed by an ID column, read through each party's schema): join them by ID and "
        "train in this process with the job's [params] (instead of --data and --split)",
    )
    p.add_argument("--data", help="data set name (see --list) or LIBSVM file")
    p.add_argument("--test", help="LIBSVM test file (with a file given to --data)")
    p.add_argument("--data-dir", help="folder of named data sets (default: $DPFED_DATA)")
    p.add_argument(
        "--split", help="columns per party, label holder first, e.g. 66,57 (with --data)"
    )
    add_config_arguments(p, VerticalConfig)
    p.add_argument(
        "--rounds-above-rule",
        action="store_true",
        help="run the sound mechanism with more --iterations than its public rule picks "
        "(each round then gets more noise; refused without this flag)",
    )
    p.add_argument(
        "--secure",
        action="store_true",
        help="secure mode: products under CKKS encryption, noise of a central curator's size "
        "on d-vectors only (two parties, logistic loss, needs dpfed[secure]; "
        "--protect-label-holder protects the labels and every party's rows)",
    )
    p.add_argument(
        "--label-holder-keeps-model",
        action="store_true",
        help="with --secure --protect-label-holder: protect the labels and the label holder's "
        "rows from the passive party only; the label holder keeps an exact model of its "
        "own, weighs the passive scores against it and is the only one to receive "
        "predictions",
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


def rounds_line(
    config: VerticalConfig,
    given: bool,
    n_samples: int,
    rounds_above_rule: bool,
    n_features: list[int] | None = None,
) -> str:
    """What the run's rounds are and where they come from; refuses (``DpfedInputError``) a
    sound run with a target epsilon and more rounds than the public rule picks unless
    ``rounds_above_rule``, naming the per-round noise of both."""
    cfg = config.validated()
    if cfg.mechanism != "sound" or cfg.epsilon is None:
        return f"rounds: {cfg.iterations}" + ("" if given else " (default)")
    plan = sound_rounds(cfg, n_samples, n_features)
    cost = (
        f"per-round noise multiplier {plan.noise_multiplier:.3g} at {plan.iterations} "
        f"rounds against {plan.rule_noise_multiplier:.3g} at the rule's "
        f"{plan.rule_iterations}"
    )
    if not given:
        return (
            f"rounds: {plan.iterations}, picked by the sound mechanism's public rule for "
            f"epsilon {cfg.epsilon:g} (--iterations to choose)"
        )
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
    if args.config is not None:
        return run_aligned_job(args)
    missing = [
        flag for flag, value in (("--data", args.data), ("--split", args.split)) if value is None
    ]
    if missing:
        raise DpfedInputError(
            f"dpfed train vertical needs --data and --split (or --config JOB for a job whose "
            f"parties hold their own tables). Missing {missing}."
        )
    kwargs = config_kwargs(VerticalConfig, args)
    if args.secure and kwargs.get("mechanism", "none") == "none":
        kwargs["mechanism"] = "sound"  # the secure mode is a sound mechanism of its own
    config = VerticalConfig(**kwargs).validated()
    if args.label_holder_keeps_model and not (args.secure and config.protect_label_holder):
        raise DpfedInputError(
            "--label-holder-keeps-model goes with --secure --protect-label-holder (without "
            "--protect-label-holder the label holder keeps its own model anyway)."
        )
    dataset, split, blocks, test_blocks = load_blocks(args)
    if args.secure:
        return run_secure(args, config, dataset, split, blocks, test_blocks)
    line = rounds_line(
        config,
        args.iterations is not None,
        blocks[0].shape[0],
        args.rounds_above_rule,
        [b.shape[1] for b in blocks],
    )
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
            blocks,
            dataset.y_train,
            test_blocks,
            dataset.y_test,
            config.lam,
            bool(result.config.fit_intercept),
        )
    write_json_atomic(args.out, payload)
    print_result(payload, args.out)
    return 0


def run_aligned_job(args: argparse.Namespace) -> int:
    """``dpfed train vertical --config JOB``: the parties' own tables joined by ID, trained in
    this process with the job's ``[params]``; the result records the join (counts and a
    digest, never an ID) and each party's schema."""
    given = [
        flag
        for flag, value in (
            ("--data", args.data),
            ("--split", args.split),
            ("--test", args.test),
            ("--secure", args.secure),
        )
        if value
    ]
    if given:
        raise DpfedInputError(
            f"--config takes the data from the job file's parties; {given} go without it."
        )
    spec = load_job(args.config)
    if not spec.align or spec.protocol != "vertical":
        raise DpfedInputError(
            f"--config runs a vertical job whose parties hold their own tables ([job].align = "
            f'"psi"). Found protocol {spec.protocol!r}, align {spec.align or "not set"!r}; '
            f"lead a networked job with `dpfed run --config {args.config}`."
        )
    config = vertical_config(spec.params)
    joined = join_tables(spec.parties, min_rows=spec.min_rows, align=spec.align)
    n = joined.blocks[0].shape[0]
    print(
        f"aligned {n} rows shared by {', '.join(joined.names)} "
        f"(tables of {', '.join(str(v) for v in joined.record['rows_per_table'].values())} "
        "rows)"
    )
    print(
        rounds_line(
            config,
            "iterations" in spec.params,
            n,
            rounds_above_rule(spec.params),
            [b.shape[1] for b in joined.blocks],
        )
    )
    result = train_vertical(
        joined.blocks,
        joined.labels,
        config,
        names=joined.names,
        test_blocks=joined.test_blocks,
        test_labels=joined.test_labels,
        progress=not args.quiet,
        engine=engine_from_args(args),
    )
    payload = result.to_json()
    payload["data"] = {
        "job": spec.id,
        "alignment": joined.record,
        "n_train": n,
        "n_test": 0 if joined.test_blocks is None else int(joined.test_blocks[0].shape[0]),
    }
    payload["preprocessing"] = joined.record["preprocessing"]
    if args.baselines:
        payload["baselines"] = baselines(
            joined.blocks,
            joined.labels,
            joined.test_blocks,
            joined.test_labels,
            config.lam,
            bool(result.config.fit_intercept),
        )
    write_json_atomic(args.out, payload)
    print_result(payload, args.out)
    return 0


def baselines(
    blocks: list[Any],
    y: Any,
    test_blocks: list[Any] | None,
    y_test: Any,
    lam: float,
    fit_intercept: bool = True,
) -> dict[str, dict[str, Any]]:
    """Local-only and centralised scikit-learn models at ``lam``, with scikit-learn's
    intercept when the job fits one (their figures, no coef)."""
    out = {}
    for name, fit in (("local_only", fit_local_only), ("centralized", fit_centralized)):
        res = fit(
            blocks,
            y,
            lam=lam,
            test_blocks=test_blocks,
            test_labels=y_test,
            fit_intercept=fit_intercept,
        )
        out[name] = {k: v for k, v in res.items() if k not in ("coef", "intercept")}
    return out


def secure_refusals(args: argparse.Namespace, config: VerticalConfig) -> list[str]:
    """The options ``--secure`` does not take, each with why."""
    out = []
    if config.epsilon is None or config.delta is None:
        out.append("--secure needs --epsilon and --delta (it calibrates its own noise to them)")
    if config.mechanism != "sound":
        out.append(
            f"--mechanism {config.mechanism} is another protocol; --secure is its own "
            f"sound mechanism"
        )
    if config.loss != "logistic":
        out.append(
            f"--secure fits the logistic loss (a polynomial of its derivative is what "
            f"is evaluated under encryption); found --loss {config.loss}"
        )
    if config.regularizer != "l2":
        out.append(f"--secure uses an l2 ridge; found --regularizer {config.regularizer}")
    return out


def run_secure(
    args: argparse.Namespace,
    config: VerticalConfig,
    dataset: Dataset,
    split: list[int],
    blocks: list[Any],
    test_blocks: list[Any] | None,
) -> int:
    """``dpfed train vertical --secure``: :func:`train_secure_vertical` and its result."""
    refusals = secure_refusals(args, config)
    if refusals:
        raise DpfedInputError("; ".join(refusals) + ".")
    assert config.epsilon is not None and config.delta is not None
    rounds = {} if args.iterations is None else {"rounds": args.iterations}
    protect = secure_protection(config.protect_label_holder, args.label_holder_keeps_model)
    setup = SecureSetup(
        int(blocks[0].shape[0]),
        tuple(split),
        config.epsilon,
        config.delta,
        protect=protect,
        **rounds,
    )
    whom = {
        "all": "every party and the labels",
        "parties": "every party and the labels from the other parties (the label "
        "holder keeps its own model)",
        "passive": "the passive rows",
    }[protect]
    print(
        f"secure mode: {setup.rounds} rounds, protecting {whom}, noise multiplier "
        f"{setup.noise_multiplier:.3g}"
    )

    def report(t: int, cost: RoundCost | None) -> None:
        if args.quiet:
            return
        if cost is None:  # on an engine: the round is over; costs come per party at the end
            print(f"  round {t + 1}/{setup.rounds} done")
        else:
            print(
                f"  round {t + 1}/{setup.rounds} block {cost.block}: "
                f"{cost.seconds:.1f} s, {cost.bytes_sent / 1e6:.1f} MB"
            )

    on_engine = getattr(args, "engine", "inprocess") != "inprocess"
    result = train_secure_vertical(
        blocks,
        dataset.y_train,
        setup,
        seed=config.seed,
        progress=report,
        engine=engine_from_args(args) if on_engine else None,
    )
    final: dict[str, Any] = {"iteration": setup.rounds}
    if test_blocks is not None and dataset.y_test is not None:
        final.update(score_metrics(result.decision_function(test_blocks), dataset.y_test))
    payload: dict[str, Any] = {
        "protocol": "vertical-secure",
        "model": {
            "blocks": [w.tolist() for w in result.blocks],
            "intercept": result.intercept,
            **(
                {"guarantee": NO_FALLBACK}
                if result.weighting is None
                else {
                    "passive_weight": result.weighting.beta,
                    "passive_score_clip": result.weighting.score_bound,
                    "guarantee": WEIGHTED_BOUND,
                }
            ),
        },
        "final": final,
        "privacy": result.privacy(),
        "costs": result.cost_summary(),
        "data": {
            "name": dataset.name,
            "source": dataset.source,
            "split": split,
            "n_train": int(blocks[0].shape[0]),
            "n_test": int(test_blocks[0].shape[0]) if test_blocks else 0,
        },
        "preprocessing": dataset.preprocessing,
    } | engine_block(result.engine)
    if args.baselines:
        payload["baselines"] = intercept_baselines(
            blocks, dataset.y_train, test_blocks, dataset.y_test, setup.row_scaling
        )
    write_json_atomic(args.out, payload)
    _print_secure_costs(payload, result, len(split))
    print_result(payload, args.out)
    return 0


def _print_secure_costs(payload: dict[str, Any], result: Any, n_parties: int) -> None:
    """The secure products' cost per round; with a weighting, the passive weight, and without
    one, what the model is not bounded by."""
    costs = payload["costs"]
    print(
        f"secure products: {costs['seconds_per_round']:.1f} s and "
        f"{costs['bytes_per_round'] / 1e6:.1f} MB per round, "
        f"{costs['setup_bytes'] / 1e6:.1f} MB of keys and labels once"
    )
    if result.weighting is not None:
        whose = "passive party's" if n_parties == 2 else "passive parties'"
        print(
            f"the label holder's own model plus {result.weighting.beta:.3g} x the {whose} "
            f"scores (each clipped to +-{result.weighting.score_bound:g}): the weight its "
            f"noisy statistics support, so the model is not worse than the label holder's "
            f"own on the training rows at their confidence bounds"
        )
    else:
        print(NO_FALLBACK)


def intercept_baselines(
    blocks: list[Any], y: Any, test_blocks: list[Any] | None, y_test: Any, row_scaling: str
) -> dict[str, dict[str, Any]]:
    """scikit-learn's ``LogisticRegression`` (C = 1, with an intercept) on the blocks bounded
    as the secure mode bounds them: the label holder's alone and all of them (a central
    curator, non-private)."""
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    train = [bounded_rows(b, row_scaling) for b in blocks]
    test = [bounded_rows(b, row_scaling) for b in test_blocks] if test_blocks is not None else None
    out = {}
    for name, used in (("label_holder_alone", 1), ("central_non_private", len(blocks))):
        features = sp.hstack([sp.csr_matrix(b) for b in train[:used]]).tocsr()
        model = LogisticRegression(C=1.0, max_iter=2000).fit(features, y)
        res: dict[str, Any] = {}
        if test is not None and y_test is not None:
            rows = sp.hstack([sp.csr_matrix(b) for b in test[:used]]).tocsr()
            res = score_metrics(model.decision_function(rows), y_test)
        out[name] = res
    return out
