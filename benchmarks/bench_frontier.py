"""The sound mechanism's privacy-utility frontier, rounds left to the public rule, against the
label holder alone and the centralised model.

Run ``python benchmarks/bench_frontier.py --help``; see ``benchmarks/README.md``. For each
data set of ``bench_rounds.py`` (same splits, preprocessing and ``lam``) and each target
epsilon, the same run trains the sound mechanism with the defaults (passive weighting on),
without passive weighting, and with the label holder protected too, over several seeds, and
records the test log loss and accuracy against the local-only and centralised models.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench_rounds import (
    PLANS,
    add_set_arguments,
    cross_validated_lam,
    prepare,
    present_sets,
    write_result,
)
from dpfed.estimators.baselines import fit_centralized, fit_local_only
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

HERE = Path(__file__).resolve().parent
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: The configurations compared at every epsilon.
CONFIGS: dict[str, dict] = {
    "default": {},
    "unweighted": {"passive_weighting": False},
    "protected": {"protect_label_holder": True},
}


def _lam(name: str, data: dict) -> tuple[float, str]:
    plan = PLANS[name]
    if plan.lam is not None:
        return plan.lam, plan.lam_choice
    recorded = HERE / "results" / "rounds.json"
    if recorded.is_file():
        entry = json.loads(recorded.read_text())["sets"].get(name)
        if entry is not None:
            return float(entry["lam"]), plan.lam_choice + " (from results/rounds.json)"
    return cross_validated_lam(data["blocks"], data["y"])["lam"], plan.lam_choice


def measure_set(name: str, data_dir: str, *, epsilons, seeds, delta: float) -> dict:
    data = prepare(PLANS[name], data_dir)
    lam, lam_choice = _lam(name, data)
    args = dict(
        lam=lam, test_blocks=data["test_blocks"], test_labels=data["y_test"], fit_intercept=True
    )  # as dpfed's models, which fit one by default
    central = fit_centralized(data["blocks"], data["y"], **args)["test_log_loss"]
    local = fit_local_only(data["blocks"], data["y"], **args)["test_log_loss"]
    out: dict = {
        "split": data["split"],
        "preprocessing": data["preprocessing"],
        "lam": lam,
        "lam_choice": lam_choice,
        "central_test_log_loss": central,
        "local_test_log_loss": local,
        "epsilons": {},
    }
    for epsilon in epsilons:
        row: dict = {}
        for config, extra in CONFIGS.items():
            losses, accuracies, weights, rounds, spent = [], [], [], None, []
            start = time.perf_counter()
            for seed in seeds:
                cfg = VerticalConfig(
                    mechanism="sound", epsilon=epsilon, delta=delta, lam=lam, seed=seed, **extra
                )
                result = train_vertical(
                    data["blocks"],
                    data["y"],
                    cfg,
                    test_blocks=data["test_blocks"],
                    test_labels=data["y_test"],
                )
                losses.append(result.final["test_log_loss"])
                accuracies.append(result.final["test_accuracy"])
                weights.append(None if result.weighting is None else result.weighting["weight"])
                spent.append(result.privacy["epsilon"])
                rounds = result.config.iterations
            row[config] = {
                "rounds": rounds,
                "test_log_loss": losses,
                "mean": float(np.mean(losses)),
                "worst_over_local": float(np.max(losses) - local),
                "mean_over_central": float(np.mean(losses) - central),
                "test_accuracy": accuracies,
                "mean_accuracy": float(np.mean(accuracies)),
                "passive_weight": weights,
                "epsilon_spent": max(spent),
                "seconds": time.perf_counter() - start,
            }
        out["epsilons"][f"{epsilon:g}"] = row
        d = row["default"]
        print(
            f"  epsilon {epsilon:g}: T={d['rounds']} mean {d['mean']:.4f} (worst over local "
            f"{d['worst_over_local']:+.4f}, over central {d['mean_over_central']:+.4f}); "
            f"unweighted mean {row['unweighted']['mean']:.4f} (worst over local "
            f"{row['unweighted']['worst_over_local']:+.4f}); protected accuracy "
            f"{row['protected']['mean_accuracy']:.4f} (min "
            f"{min(row['protected']['test_accuracy']):.4f})",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_arguments(parser)
    parser.add_argument(
        "--epsilons",
        default=",".join(f"{e:g}" for e in EPSILONS),
        help="comma-separated target epsilons",
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds per point (default 3)")
    parser.add_argument("--delta", type=float, default=1e-5, help="target delta (default 1e-5)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "frontier.json")
    parser.add_argument(
        "--constant-remainder",
        action="store_true",
        help="weigh with the constant cubic bound C_3 |delta|^3 instead of the per-row one "
        "(the comparison of benchmarks/README.md; write it to another --out)",
    )
    args = parser.parse_args(argv)
    if args.constant_remainder:
        import dpfed.protocols.vertical.weighting as weighting

        def ones(scores, reach):
            return np.ones(np.shape(scores)), np.ones(np.shape(scores))

        weighting.logistic_remainder_coefficients = ones
    epsilons = [float(e) for e in args.epsilons.split(",")]
    result: dict = {
        "delta": args.delta,
        "seeds": list(range(args.seeds)),
        "configs": CONFIGS,
        "sets": {},
        "skipped": {},
    }
    for name in present_sets(args, result["skipped"]):
        print(f"{name}:", flush=True)
        result["sets"][name] = measure_set(
            name, args.data_dir, epsilons=epsilons, seeds=range(args.seeds), delta=args.delta
        )
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
