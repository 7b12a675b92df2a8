r"""Levers of the secure vertical mode, measured before deciding whether to build them.

Run ``python benchmarks/bench_secure_levers.py SECTION``; see ``benchmarks/README.md``. Every
run trains :func:`dpfed.protocols.vertical_secure.train_secure_vertical` with the plaintext
backend (the protocol's noise draws, products in the clear) and records the mean test log loss
over seeds; docs/design.md ("The per-row remainder", "What was weighed and set aside") has the
tables. The sections:

1. ``remainder``: the passive weighting's cubic term with the per-row remainder coefficients
   (built) against the constant bound (every coefficient 1), the same noise draws, under
   ``protect="passive"`` and ``"parties"``.
2. ``rounds``: 10, 20 and 40 rounds with everything protected.
3. ``momentum``: heavy-ball momentum on the block steps, :math:`w \leftarrow \Pi(w - H^{-1}
   \hat g + m (w - w_{prev}))`, for ``m`` in 0, 0.3, 0.5 (a patched step: not built).
4. ``moderation``: predictions :math:`\sigma(s / \sqrt{1 + \pi \tau^2 / 8})` with an oracle
   :math:`\tau^2`, each test row's score variance over the seeds' noise draws (not built).

Besides the benchmark's sets, ``momentum`` and ``moderation`` run on held-out binary tasks made
from the regression sets (:func:`held_out`: red and white wine, quality >= 6; abalone, rings >=
10; standardised, a 70/30 split, the columns halved between two parties).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bench_secure_vertical import SPLITS, _metrics

HERE = Path(__file__).resolve().parent
EPSILONS = (0.5, 1.0, 2.0, 8.0)
#: Seeds per data set (the small sets' test figures need more).
SEEDS = {"breast_cancer": 20, "wine-red": 10, "wine-white": 5, "abalone": 5}
#: Noise draws of the oracle variance in ``moderation``.
DRAWS = {"breast_cancer": 10, "wine-red": 8}
#: Binarisation threshold of the held-out tasks.
THRESHOLDS = {"wine-red": 6.0, "wine-white": 6.0, "abalone": 10.0}
SECTIONS = {
    "remainder": ("a9a", "adult", "breast_cancer", "madelon"),
    "rounds": ("a9a", "adult", "breast_cancer", "madelon"),
    "momentum": ("a9a", "adult", "breast_cancer", "madelon", "wine-red", "wine-white", "abalone"),
    "moderation": ("a9a", "adult", "breast_cancer", "madelon", "wine-red"),
}


def held_out(name: str, data_dir: str | None) -> tuple:
    """A binary task from a regression set: labels ``y >= THRESHOLDS[name]``, columns
    standardised, rows split 70/30 (seed 0), the columns halved."""
    from dpfed.data import load_dataset

    ds = load_dataset(name, data_dir)
    X = np.asarray(ds.X_train, dtype=np.float64)
    y = np.where(np.asarray(ds.y_train) >= THRESHOLDS[name], 1.0, -1.0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    order = np.random.default_rng(0).permutation(len(y))
    cut = int(0.7 * len(y))
    train, test = order[:cut], order[cut:]
    d = X.shape[1]
    return X[train], y[train], X[test], y[test], (d - d // 2, d // 2)


def load(name: str, data_dir: str | None) -> tuple:
    """Blocks, labels and test blocks of a benchmark set or a held-out task."""
    from dpfed.data import load_dataset, vertical_split

    if name in SPLITS:
        ds = load_dataset(name, data_dir)
        X, y, X_test, y_test, split = ds.X_train, ds.y_train, ds.X_test, ds.y_test, SPLITS[name]
    else:
        X, y, X_test, y_test, split = held_out(name, data_dir)
    blocks = vertical_split(X, list(split))
    return blocks, y, vertical_split(X_test, list(split)), y_test, tuple(split)


def constant_loss(y: np.ndarray, y_test: np.ndarray) -> float:
    """Test log loss of the training base rate."""
    base = float(np.mean(y > 0))
    return float(-np.mean(np.where(y_test > 0, np.log(base), np.log(1.0 - base))))


def scores(name, data, epsilon, seed, **setup) -> tuple[np.ndarray, float | None]:
    """Test scores of one run and its passive weight (None without one)."""
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical

    blocks, y, test_blocks, _, split = data
    job = SecureSetup(blocks[0].shape[0], split, epsilon, 1e-5, **setup)
    result = train_secure_vertical(blocks, y, job, seed=seed, backend="plain")
    weight = None if result.weighting is None else result.weighting.beta
    return result.decision_function(test_blocks), weight


def mean_loss(name, data, epsilon, seeds, **setup) -> dict:
    losses, weights = [], []
    for seed in range(seeds):
        s, w = scores(name, data, epsilon, seed, **setup)
        losses.append(_metrics(data[3], s)["log_loss"])
        weights.append(w)
    out = {"log_loss": float(np.mean(losses))}
    if weights[0] is not None:
        out["weight"] = float(np.mean(weights))
    return out


@contextmanager
def patched(module, name: str, value) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def constant_coefficients(scores: np.ndarray, reach) -> tuple[np.ndarray, np.ndarray]:
    """Every coefficient 1: the constant bound :math:`C_3 |t|^3`."""
    ones = np.ones(np.shape(scores))
    return ones, ones


def momentum_step(m: float) -> Callable:
    """:meth:`SecureParty.step` with heavy-ball momentum ``m``."""

    def step(self, gradient, inverse) -> None:
        s = self.setup
        direction = gradient / s.n_samples + s.ridge_strength * self.ridge_mask() * self.w
        previous = getattr(self, "_previous", self.w)
        w = self.w - inverse @ direction + m * (self.w - previous)
        self._previous = self.w.copy()
        radius = s.block_radii[self.index]
        norm = float(np.linalg.norm(w))
        self.w = w * (radius / norm) if norm > radius else w

    return step


def remainder(name, data) -> list[dict]:
    import dpfed.protocols.vertical.weighting as weighting

    rows = []
    for protect in ("passive", "parties"):
        for epsilon in EPSILONS:
            row = {"data": name, "protect": protect, "epsilon": epsilon}
            with patched(weighting, "logistic_remainder_coefficients", constant_coefficients):
                row["constant"] = mean_loss(name, data, epsilon, 3, protect=protect)
            row["per_row"] = mean_loss(name, data, epsilon, 3, protect=protect)
            rows.append(row)
    return rows


def rounds(name, data) -> list[dict]:
    seeds = SEEDS.get(name, 3)
    return [
        {
            "data": name,
            "epsilon": epsilon,
            **{str(t): mean_loss(name, data, epsilon, seeds, rounds=t) for t in (10, 20, 40)},
        }
        for epsilon in EPSILONS
    ]


def momentum(name, data) -> list[dict]:
    from dpfed.protocols.vertical_secure.party import SecureParty

    seeds, rows = SEEDS.get(name, 3), []
    for epsilon in EPSILONS:
        row = {"data": name, "epsilon": epsilon, "constant": constant_loss(data[1], data[3])}
        for m in (0.0, 0.3, 0.5):
            with patched(SecureParty, "step", momentum_step(m)):
                row[str(m)] = mean_loss(name, data, epsilon, seeds)
        rows.append(row)
    return rows


def moderation(name, data) -> list[dict]:
    draws, rows = DRAWS.get(name, 6), []
    y_test = data[3]
    for epsilon in (0.5, 1.0, 8.0):
        runs = np.array([scores(name, data, epsilon, seed)[0] for seed in range(draws)])
        tau2 = runs.var(axis=0)
        kappa = np.sqrt(1.0 + np.pi * tau2 / 8.0)
        plain = [_metrics(y_test, s)["log_loss"] for s in runs]
        moderated = [_metrics(y_test, s / kappa)["log_loss"] for s in runs]
        rows.append(
            {
                "data": name,
                "epsilon": epsilon,
                "constant": constant_loss(data[1], y_test),
                "plain": float(np.mean(plain)),
                "moderated": float(np.mean(moderated)),
                "tau_rms": float(np.sqrt(tau2.mean())),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("section", choices=sorted(SECTIONS))
    p.add_argument("--data-dir", default=os.environ.get("DPFED_DATA"))
    p.add_argument("--data", nargs="+", help="data sets (default: the section's)")
    p.add_argument("--out", help="JSON (default: results/secure_levers_SECTION.json)")
    args = p.parse_args(argv)
    measure = {"remainder": remainder, "rounds": rounds, "momentum": momentum}.get(
        args.section, moderation
    )
    rows = []
    for name in args.data or SECTIONS[args.section]:
        for row in measure(name, load(name, args.data_dir)):
            print(json.dumps(row), flush=True)
            rows.append(row)
    out = Path(args.out or HERE / "results" / f"secure_levers_{args.section}.json")
    out.write_text(json.dumps({"section": args.section, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
