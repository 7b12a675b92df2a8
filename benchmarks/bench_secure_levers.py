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
4. ``tuned``: the round count tuned on a validation fifth of the training rows, as
   ``bench_diffprivlib.py`` tunes diffprivlib's ``C`` (:func:`tuned`), against diffprivlib.
5. ``shrinkage``: the released blocks scaled by a factor ``k`` towards the intercept, fixed
   (0.25, 0.5, 0.75) and a James-Stein factor per block from public quantities
   (:func:`james_stein`), and steps kept to the noisy Gram's signal subspace
   (:func:`signal_subspace`); not built.
6. ``wide``: the three protections on a set too wide for ``bench_secure_vertical.py``
   (dexter: 200 training rows, 20,000 columns, Gram matrices of 800 MB; one seed, about five
   minutes a run), against the label holder alone and the constant predictor.
7. ``moderation``: predictions :math:`\sigma(s / \sqrt{1 + \pi \tau^2 / 8})` with an oracle
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
#: Seeds per data set (the small sets' test figures need more; dexter's runs are long).
SEEDS = {"breast_cancer": 20, "wine-red": 10, "wine-white": 5, "abalone": 5, "dexter": 1}
#: Column splits of the sets only ``wide`` runs.
WIDE_SPLITS = {"dexter": (10_000, 10_000)}
#: Noise draws of the oracle variance in ``moderation``.
DRAWS = {"breast_cancer": 10, "wine-red": 8}
#: Binarisation threshold of the held-out tasks.
THRESHOLDS = {"wine-red": 6.0, "wine-white": 6.0, "abalone": 10.0}
SECTIONS = {
    "remainder": ("a9a", "adult", "breast_cancer", "madelon"),
    "rounds": ("a9a", "adult", "breast_cancer", "madelon"),
    "momentum": ("a9a", "adult", "breast_cancer", "madelon", "wine-red", "wine-white", "abalone"),
    "moderation": ("a9a", "adult", "breast_cancer", "madelon", "wine-red"),
    "tuned": ("a9a", "adult", "breast_cancer", "madelon"),
    "wide": ("dexter",),
    "shrinkage": ("a9a", "adult", "breast_cancer", "madelon", "wine-red", "wine-white", "abalone"),
}
#: The fixed factors of ``shrinkage``.
FACTORS = (0.25, 0.5, 0.75, 1.0)
#: The round counts ``tuned`` chooses from.
ROUND_GRID = (10, 20, 40)


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

    splits = SPLITS | WIDE_SPLITS
    if name in splits:
        ds = load_dataset(name, data_dir)
        X, y, X_test, y_test, split = ds.X_train, ds.y_train, ds.X_test, ds.y_test, splits[name]
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


def tuned(name, data) -> list[dict]:
    """The round count chosen as ``bench_diffprivlib.py`` chooses diffprivlib's ``C``.

    For each seed: a validation fifth of the training rows (the same split as the
    reference's), each count of :data:`ROUND_GRID` fitted on the other four fifths and scored
    by its validation log loss over :data:`bench_diffprivlib.TUNING_DRAWS` noise draws that
    are not the final fit's, then the chosen count fitted on every training row with the
    seed's own draw and scored on the test rows. Like the reference's, the tuning is not
    accounted; the figures at the default count are in ``rounds``.
    """
    from bench_diffprivlib import _tuning_seeds
    from bench_secure_vertical import validation_fifth
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
    from dpfed.protocols.vertical_secure.setup import DEFAULT_ROUNDS

    blocks, y, test_blocks, y_test, split = data
    seeds, rows = SEEDS.get(name, 3), []
    reference = _diffprivlib_losses(name, seeds)
    for epsilon in EPSILONS:
        chosen, losses, defaults = [], [], []
        for seed in range(seeds):
            val, fit = validation_fifth(len(y), np.random.default_rng(2000 + seed))
            fit_blocks, val_blocks = [b[fit] for b in blocks], [b[val] for b in blocks]
            scores_by_count = []
            for t in ROUND_GRID:
                job = SecureSetup(len(fit), split, epsilon, 1e-5, rounds=t)
                draws = [
                    train_secure_vertical(fit_blocks, y[fit], job, seed=s, backend="plain")
                    for s in _tuning_seeds(seed)
                ]
                scores_by_count.append(
                    np.mean(
                        [
                            _metrics(y[val], r.decision_function(val_blocks))["log_loss"]
                            for r in draws
                        ]
                    )
                )
            t = ROUND_GRID[int(np.argmin(scores_by_count))]
            chosen.append(t)
            test_loss = {}
            for count in dict.fromkeys((DEFAULT_ROUNDS, t)):
                job = SecureSetup(len(y), split, epsilon, 1e-5, rounds=count)
                result = train_secure_vertical(blocks, y, job, seed=seed, backend="plain")
                test_loss[count] = _metrics(y_test, result.decision_function(test_blocks))[
                    "log_loss"
                ]
            defaults.append(test_loss[DEFAULT_ROUNDS])
            losses.append(test_loss[t])
        row = {
            "data": name,
            "epsilon": epsilon,
            "seeds": seeds,
            "default": float(np.mean(defaults)),
            "tuned": float(np.mean(losses)),
            "rounds": chosen,
        }
        if epsilon in reference:
            row["diffprivlib"] = reference[epsilon]
            row["tuned_minus_diffprivlib"] = row["tuned"] - reference[epsilon]
        rows.append(row)
    return rows


def block_noise_covariance(gram: np.ndarray, inverse: np.ndarray, setup) -> np.ndarray:
    r"""The covariance of the gradient noise carried by a block after :math:`T` steps, for a
    quadratic loss of curvature :math:`\frac{1}{4N} G` (the majoriser's, ignoring the
    other blocks and the projection), shape (d, d).

    In the eigenbasis of the block's preconditioner ``inverse`` (:math:`H^{-1}`, eigenvalues
    :math:`1/h`; :math:`\mu` the noisy Gram's along the same vectors) the error obeys
    :math:`e_{t+1} = m e_t + \xi_t / (N h)` with :math:`m = 1 - \mu / (4 N h)` and
    :math:`\xi_t \sim N(0, \sigma^2)`, so its variance after :math:`T` steps is
    :math:`\sigma^2 (1 - m^{2T}) / (N^2 h^2 (1 - m^2))`.
    """
    n = setup.n_samples
    values, vectors = np.linalg.eigh(0.5 * (inverse + inverse.T))
    h = 1.0 / values
    mu = np.maximum(np.einsum("ij,ik,kj->j", vectors, gram, vectors), 0.0)
    m = 1.0 - mu / (4.0 * n * h)
    one_step = setup.gradient_sigma**2 / (n**2 * h**2)
    variance = one_step * (1.0 - m ** (2 * setup.rounds)) / np.maximum(1.0 - m**2, 1e-12)
    covariance: np.ndarray = (vectors * variance) @ vectors.T
    return covariance


def james_stein(blocks, released, setup) -> list[dict]:
    r"""Per block, :math:`k_j = \max(0, 1 - \operatorname{tr}(\tilde G_j C_j) / w_j^\top
    \tilde G_j w_j)`: the share of the block's score energy that is not noise, from its noisy
    Gram :math:`\tilde G_j`, its weights and :func:`block_noise_covariance` (post-processing
    of releases), with the two energies it compares."""
    out = []
    for j, w in enumerate(blocks):
        gram, inverse = released[j]
        d = len(w)
        noise = float(np.trace(gram[:d, :d] @ block_noise_covariance(gram, inverse, setup)[:d, :d]))
        signal = float(w @ gram[:d, :d] @ w)
        factor = float(np.clip(1.0 - noise / max(signal, 1e-300), 0.0, 1.0))
        out.append({"factor": factor, "estimated_noise": noise, "noisy_gram_energy": signal})
    return out


def signal_subspace(precondition: Callable) -> Callable:
    r"""``precondition`` (:meth:`SecureParty.preconditioner`) restricted to the noisy Gram's
    eigenvectors whose eigenvalue is above the spectral norm of its noise,
    :math:`2 \sigma_G \sqrt{d_j}`: the gradient lies in the span of the rows, so a step
    outside the directions the Gram tells apart from its noise would be mostly noise (not
    built)."""

    def preconditioner(self, gram: np.ndarray) -> np.ndarray:
        s = self.setup
        values, vectors = np.linalg.eigh(0.5 * (gram + gram.T))
        gram_sigma = s.gram_sigma if self.protected else 0.0
        kept = vectors[:, values > 2.0 * np.sqrt(gram.shape[0]) * gram_sigma]
        projection = kept @ kept.T
        inverse: np.ndarray = projection @ precondition(self, gram) @ projection
        return inverse

    return preconditioner


def shrinkage(name, data) -> list[dict]:
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
    from dpfed.protocols.vertical_secure.party import SecureParty

    blocks, y, test_blocks, y_test, split = data
    released: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    precondition = SecureParty.preconditioner

    def recorded(self, gram):
        inverse = precondition(self, gram)
        released[self.index] = (gram, inverse)
        return inverse

    seeds, rows = SEEDS.get(name, 3), []
    for epsilon in EPSILONS:
        job = SecureSetup(len(y), split, epsilon, 1e-5)
        losses: dict[str, list[float]] = {
            **{str(k): [] for k in FACTORS},
            "james_stein": [],
            "signal_subspace": [],
        }
        estimates, weights = [], []
        for seed in range(seeds):
            with patched(SecureParty, "preconditioner", recorded):
                result = train_secure_vertical(blocks, y, job, seed=seed, backend="plain")
            own = result.blocks
            estimates.append(james_stein(own, released, job))
            weights.append(own)
            ks = [e["factor"] for e in estimates[-1]]
            for key, scale in [*((str(k), [k] * len(own)) for k in FACTORS), ("james_stein", ks)]:
                result.blocks = [k * w for k, w in zip(scale, own, strict=True)]
                s = result.decision_function(test_blocks)
                losses[key].append(_metrics(y_test, s)["log_loss"])
            result.blocks = own
            with patched(SecureParty, "preconditioner", signal_subspace(precondition)):
                cut = train_secure_vertical(blocks, y, job, seed=seed, backend="plain")
            losses["signal_subspace"].append(
                _metrics(y_test, cut.decision_function(test_blocks))["log_loss"]
            )
        rows.append(
            {
                "data": name,
                "epsilon": epsilon,
                "constant": constant_loss(y, y_test),
                **{key: float(np.mean(v)) for key, v in losses.items()},
                "james_stein_factors": [
                    float(np.mean([e[j]["factor"] for e in estimates])) for j in range(len(blocks))
                ],
                "noise_energy": noise_energy(blocks, weights, estimates, job),
            }
        )
    return rows


def noise_energy(blocks, weights, estimates, setup) -> list[dict]:
    """Per block, what :func:`james_stein` estimates (the score energy ``w^T G w`` with the
    noisy Gram, the noise ``tr(G C)``) against what the draws show: the score energy with the
    exact Gram of the rows as bounded, and the noise measured as the mean over draws of
    ``(w - w_mean)^T G (w - w_mean)``."""
    from dpfed.protocols.vertical_secure.party import bounded_rows

    out = []
    for j in range(len(blocks)):
        rows = bounded_rows(blocks[j], setup.row_scaling)
        exact = np.asarray((rows.T @ rows).todense() if hasattr(rows, "todense") else rows.T @ rows)
        w = np.array([own[j] for own in weights])
        spread = w - w.mean(axis=0)
        out.append(
            {
                "noisy_gram_energy": float(np.mean([e[j]["noisy_gram_energy"] for e in estimates])),
                "exact_gram_energy": float(np.mean(np.einsum("si,ij,sj->s", w, exact, w))),
                "estimated_noise": float(np.mean([e[j]["estimated_noise"] for e in estimates])),
                "measured_noise": float(np.mean(np.einsum("si,ij,sj->s", spread, exact, spread))),
            }
        )
    return out


def _diffprivlib_losses(name: str, seeds: int) -> dict[float, float]:
    """diffprivlib's mean test log loss per epsilon over ``seeds`` seeds, from its saved runs
    (``bench_diffprivlib.py``), if they hold that many seeds."""
    out = {}
    for path in sorted((HERE / "results").glob("central_dp*.json")):
        for row in json.loads(path.read_text())["rows"]:
            if row["data"] == name and row["seeds"] == seeds:
                out[float(row["epsilon"])] = float(row["diffprivlib"]["log_loss_mean"])
    return out


def wide(name, data) -> list[dict]:
    """Every protection at every epsilon (accuracy, log loss and the passive weight), the
    references first."""
    from bench_secure_vertical import references
    from dpfed.protocols.vertical_secure.setup import PROTECTIONS

    blocks, y, test_blocks, y_test, _ = data
    rows: list[dict] = [{"data": name, "references": references(blocks, y, test_blocks, y_test)}]
    for epsilon in EPSILONS:
        for protect in PROTECTIONS:
            runs = []
            for seed in range(SEEDS.get(name, 3)):
                s, weight = scores(name, data, epsilon, seed, protect=protect)
                runs.append({**_metrics(y_test, s), "weight": weight})
            rows.append(
                {
                    "data": name,
                    "epsilon": epsilon,
                    "protect": protect,
                    "log_loss": float(np.mean([r["log_loss"] for r in runs])),
                    "accuracy": float(np.mean([r["accuracy"] for r in runs])),
                    "weights": [r["weight"] for r in runs],
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("section", choices=sorted(SECTIONS))
    p.add_argument("--data-dir", default=os.environ.get("DPFED_DATA"))
    p.add_argument("--data", nargs="+", help="data sets (default: the section's)")
    p.add_argument("--out", help="JSON (default: results/secure_levers_SECTION.json)")
    p.add_argument("--epsilons", type=float, nargs="+", help=f"(default: {EPSILONS})")
    args = p.parse_args(argv)
    if args.epsilons:
        globals()["EPSILONS"] = tuple(args.epsilons)
    measure = {
        "remainder": remainder,
        "rounds": rounds,
        "momentum": momentum,
        "tuned": tuned,
        "shrinkage": shrinkage,
        "wide": wide,
    }.get(args.section, moderation)
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
