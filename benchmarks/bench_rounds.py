"""Rounds of vertical ADMM sharing (no noise) to reach the centralised model's test log loss.

Run ``python benchmarks/bench_rounds.py --help``; see ``benchmarks/README.md``. For each data
set (two parties, label holder first) the same run trains with the plain protocol (the
reference, ``acceleration="none"``: the behaviour before acceleration) and with the current
defaults, and records the first round whose test log loss is within ``--margin`` of the
centralised model's, and the largest excess over the label holder's local-only model.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.model_selection import StratifiedKFold

from dpfed.data import load_dataset, vertical_split
from dpfed.data.partition import even_split
from dpfed.data.preprocessing import normalize_rows, standardize_apply, standardize_fit
from dpfed.estimators.baselines import fit_centralized, fit_local_only
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

HERE = Path(__file__).resolve().parent

#: The configurations compared: the plain protocol, the defaults, and Anderson without the
#: warm start (for information).
CONFIGS: dict[str, dict] = {
    "reference": {"acceleration": "none"},
    "default": {},
    "anderson_no_warm_start": {"acceleration": "anderson", "warm_start_rounds": 0},
}
CV_GRID = (1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)


@dataclass(frozen=True)
class SetPlan:
    """Split, preprocessing and ``lam`` of one data set (``lam`` None: 5-fold CV)."""

    name: str
    split: tuple[int, ...] | None  # None: even split in two
    lam: float | None
    lam_choice: str
    standardize: bool
    unit_rows: bool


PLANS = {
    "a9a": SetPlan("a9a", (66, 57), 1e-4, "the paper's value", False, False),
    "adult": SetPlan("adult", None, 1e-4, "as a9a (the same census rows)", False, False),
    "dexter": SetPlan(
        "dexter",
        None,
        None,
        "best mean 5-fold CV test log loss of the "
        "centralised model on the training rows over " + ", ".join(f"{v:g}" for v in CV_GRID),
        False,
        True,
    ),
    "arcene": SetPlan("arcene", None, 1e-3, "dpfed reproduce vertical's (5-fold CV)", True, True),
    "madelon": SetPlan("madelon", None, 3e-3, "dpfed reproduce vertical's (5-fold CV)", True, True),
}


def prepare(plan: SetPlan, data_dir: str | None) -> dict:
    """Load, (standardise,) split and (row-normalise) one data set."""
    ds = load_dataset(plan.name, data_dir)
    x, xt = ds.X_train, ds.X_test
    steps = []
    if plan.standardize:
        x = x.toarray() if sp.issparse(x) else x
        xt = xt.toarray() if sp.issparse(xt) else xt
        mean, scale = standardize_fit(x)
        x, xt = standardize_apply(x, mean, scale), standardize_apply(xt, mean, scale)
        steps.append("columns standardised with training mean and standard deviation")
    split = plan.split or tuple(even_split(x.shape[1], 2))
    blocks, test_blocks = vertical_split(x, list(split)), vertical_split(xt, list(split))
    if plan.unit_rows:
        blocks = [normalize_rows(b) for b in blocks]
        test_blocks = [normalize_rows(b) for b in test_blocks]
        steps.append("each party's rows scaled to unit l2 norm")
    if not steps:
        steps.append("features as published")
    return {
        "blocks": blocks,
        "y": np.asarray(ds.y_train, float),
        "test_blocks": test_blocks,
        "y_test": np.asarray(ds.y_test, float),
        "split": list(split),
        "preprocessing": "; ".join(steps),
        "shape": [int(x.shape[0]), int(x.shape[1])],
        "test_rows": int(xt.shape[0]),
    }


def cross_validated_lam(blocks: list, y: np.ndarray, grid=CV_GRID, seed: int = 0) -> dict:
    """``lam`` of the best mean 5-fold CV log loss of the centralised model (stratified folds)."""
    x = sp.hstack(blocks).tocsr() if any(sp.issparse(b) for b in blocks) else np.hstack(blocks)
    folds = list(StratifiedKFold(5, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))
    scores = {}
    for lam in grid:
        losses = [
            fit_centralized([x[tr]], y[tr], lam=lam, test_blocks=[x[va]], test_labels=y[va])[
                "test_log_loss"
            ]
            for tr, va in folds
        ]
        scores[lam] = float(np.mean(losses))
    best = min(scores, key=lambda k: scores[k])
    return {"lam": best, "cv_log_loss": {f"{k:g}": v for k, v in scores.items()}}


def rounds_to(history: list[dict], target: float) -> int | None:
    """First round (1-based) with test log loss at most ``target``."""
    return next((i + 1 for i, h in enumerate(history) if h["test_log_loss"] <= target), None)


def measure_set(plan: SetPlan, data_dir: str | None, *, rounds: int, margin: float) -> dict:
    data = prepare(plan, data_dir)
    out: dict = {key: data[key] for key in ("split", "preprocessing", "shape", "test_rows")}
    lam = plan.lam
    if lam is None:
        cv = cross_validated_lam(data["blocks"], data["y"])
        lam = cv["lam"]
        out["cv_log_loss"] = cv["cv_log_loss"]
    out["lam"], out["lam_choice"] = lam, plan.lam_choice
    args = dict(lam=lam, test_blocks=data["test_blocks"], test_labels=data["y_test"])
    central = fit_centralized(data["blocks"], data["y"], **args)
    local = fit_local_only(data["blocks"], data["y"], **args)
    out["central_test_log_loss"] = central["test_log_loss"]
    out["central_train_objective"] = central["train_objective"]
    out["local_test_log_loss"] = local["test_log_loss"]
    target = central["test_log_loss"] + margin
    out["target"] = target
    out["runs"] = {}
    for name, extra in CONFIGS.items():
        cfg = VerticalConfig(lam=lam, iterations=rounds, fit_intercept=False, **extra)
        start = time.perf_counter()
        result = train_vertical(
            data["blocks"],
            data["y"],
            cfg,
            test_blocks=data["test_blocks"],
            test_labels=data["y_test"],
        )
        losses = [h["test_log_loss"] for h in result.history]
        out["runs"][name] = {
            "acceleration": result.config.acceleration,
            "warm_start_rounds": result.config.warm_start_rounds,
            "rounds_to_target": rounds_to(result.history, target),
            "worst_over_local": max(losses) - local["test_log_loss"],
            "test_log_loss": losses,
            "final_train_objective": result.history[-1]["train_objective"],
            "seconds": time.perf_counter() - start,
        }
    return out


def add_set_arguments(parser: argparse.ArgumentParser) -> None:
    """``--data-dir`` and ``--sets`` (the keys of :data:`PLANS`)."""
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("DPFED_DATA"),
        help="folder holding a9a/, adult/, dexter/, arcene/, madelon/ (default: $DPFED_DATA)",
    )
    parser.add_argument(
        "--sets",
        default=",".join(PLANS),
        help=f"comma-separated data sets (default {','.join(PLANS)})",
    )


def present_sets(args: argparse.Namespace, skipped: dict) -> list[str]:
    """The sets of ``--sets`` whose folder is under ``--data-dir``; the others are noted in
    ``skipped`` and said."""
    present = []
    for name in args.sets.split(","):
        if args.data_dir is None or not (Path(args.data_dir) / name).is_dir():
            skipped[name] = f"no folder {name}/ under the data directory"
            print(f"{name}: skipped (no folder {name}/ under {args.data_dir})")
            continue
        present.append(name)
    return present


def write_result(out: Path, result: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_arguments(parser)
    parser.add_argument("--rounds", type=int, default=60, help="rounds of every run (default 60)")
    parser.add_argument(
        "--margin",
        type=float,
        default=0.005,
        help="target: central test log loss + margin (default 0.005)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "rounds.json")
    args = parser.parse_args(argv)
    result: dict = {
        "rounds": args.rounds,
        "margin": args.margin,
        "parties": 2,
        "configs": CONFIGS,
        "sets": {},
        "skipped": {},
    }
    for name in present_sets(args, result["skipped"]):
        entry = measure_set(PLANS[name], args.data_dir, rounds=args.rounds, margin=args.margin)
        result["sets"][name] = entry
        runs = entry["runs"]
        print(
            f"{name}: split {entry['split']}, lam {entry['lam']:g}, central "
            f"{entry['central_test_log_loss']:.4f}, local {entry['local_test_log_loss']:.4f}; "
            "rounds to target "
            + ", ".join(f"{k} {v['rounds_to_target']}" for k, v in runs.items()),
            flush=True,
        )
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
