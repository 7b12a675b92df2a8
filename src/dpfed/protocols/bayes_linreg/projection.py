r"""Data projection of Algorithm 2 (Heikkilä et al. 2017): private marginal standard deviations
and projection thresholds chosen on auxiliary synthetic data.

Clipping every value to a tighter bound lowers the sensitivity (and so the noise) of the
sufficient statistics at the price of bias. Algorithm 2 picks the bounds as fractions of each
column's standard deviation:

1. every client clips its row to the public assumed bounds :math:`(-c_j, c_j)`
   (:func:`dpfed.protocols.bayes_linreg.sufficient_stats.clip_to_bounds`);
2. the marginal standard deviations :math:`\sigma^{(1)}, \dots, \sigma^{(d+1)}` (features
   and target) are estimated from one noisy sum with part of the budget
   (:func:`estimate_marginal_stds`);
3. the fractions :math:`p_x` (one for every feature) and :math:`p_y` (the target) are found by
   grid search on auxiliary data (:func:`search_thresholds`), and each client clips to
   :math:`(-p_j \sigma^{(j)}, p_j \sigma^{(j)})` (capped at :math:`c_j`);
4. the sufficient statistics of the projected rows are released with the rest of the budget.

Standard deviations from noisy moments
--------------------------------------
The paper assumes zero-centred data ("non-zero data means can be estimated like the marginal
stds at the cost of some added noise"), and its released code estimates the variance as the
noisy mean of squares. :func:`estimate_marginal_stds` releases :math:`Q_j = \sum_i v_{ij}^2`
(:math:`v_i = (x_i, y_i)`) and uses

.. math:: \hat\sigma_j^2 = \tilde Q_j / N ,

or, with ``first_moments=True``, also releases the sums :math:`L_j = \sum_i v_{ij}` (sent
as :math:`w_j v_{ij}` with public weights, by default :math:`w_j = c_j/\sqrt 2`, and divided
by :math:`w_j` afterwards; :mod:`dpfed.protocols.bayes_linreg.centring`), takes the DP means
:math:`m_j = \tilde L_j / N` and the variance around them,
:math:`\hat\sigma_j^2 = \tilde Q_j / N - m_j^2`. :math:`N` is public. A
variance estimate that is not positive (noise can make it so) gives the standard deviation
0.5, the paper's constant. The sensitivity is the exact one of the squares (and weighted
values) of coordinates bounded by :math:`c_j`, :math:`\Delta^2 = \sum_j c_j^4`, or
:math:`\sum_j G(c_j, w_j)` with first moments (:math:`= \sum_j 2 c_j^4` at the default
weights), see :func:`dpfed.protocols.bayes_linreg.sufficient_stats.moment_sensitivity`. (The
paper's released
code uses :math:`\sqrt{d c_x^2 + c_y^2}`, the sensitivity of the values rather than of their
squares.)

Threshold search on auxiliary data
----------------------------------
For each of ``repeats`` repetitions an auxiliary data set as large as the real one is drawn
from the model itself (:math:`\lambda, \lambda_0` precisions):

.. math::

    x_i \sim \mathcal N(0, I_d), \quad \beta \sim \mathcal N(0, I/\lambda_0), \quad
    y_i \mid x_i \sim \mathcal N(x_i^\top \beta, 1/\lambda),

with an independent auxiliary test set of the same size from the same :math:`\beta`. For every
pair :math:`(p_x, p_y)` of the grid (20 points :math:`0.1, 0.2, \dots, 2.0` in
:math:`[0.1, 2.1]`) the rows are clipped to :math:`p_x \hat s_x` and :math:`p_y \hat s_y`
(the auxiliary columns' standard deviations), the statistics get Gaussian noise of standard
deviation :math:`z_{eff} \Delta_2(\text{bounds})` (the same multiplier as the real release,
one standard-normal draw per repetition shared by all grid points), the posterior mean is
computed and its mean absolute error on the auxiliary test set recorded. The pair with the
smallest mean error over the repetitions wins. The search uses no private data; it is
vectorised over the grid and deterministic given its seed, so :class:`ThresholdCache` can
reuse it for every run with the same :math:`(N, d, z_{eff})`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_positive
from dpfed.protocols.bayes_linreg.aggregation import Aggregate, RingRelease, noisy_sum
from dpfed.protocols.bayes_linreg.centring import first_moment_scale
from dpfed.protocols.bayes_linreg.posterior import check_repair, posterior_means
from dpfed.protocols.bayes_linreg.sufficient_stats import (
    clip_to_bounds,
    first_scales,
    moment_sensitivity,
    n_statistics,
    row_moments,
)

__all__ = [
    "FALLBACK_STD",
    "THRESHOLD_GRID",
    "MarginalStds",
    "ThresholdCache",
    "ThresholdChoice",
    "cache_multiplier",
    "estimate_marginal_stds",
    "search_thresholds",
]

#: The paper's grid of threshold fractions: 20 points 0.1, 0.2, ..., 2.0 in [0.1, 2.1].
THRESHOLD_GRID: tuple[float, ...] = tuple(round(0.1 * (k + 1), 10) for k in range(20))
#: Standard deviation used when a noisy variance estimate is not positive (the paper's 0.5).
FALLBACK_STD = 0.5


@dataclass(frozen=True, eq=False)
class MarginalStds:
    """Private marginal standard deviations of the features and the target.

    Attributes
    ----------
    stds : numpy.ndarray, shape (d + 1,)
        Estimates, features then target; every entry > 0.
    variances : numpy.ndarray, shape (d + 1,)
        The noisy variance estimates before the fallback (may be <= 0).
    fallback : numpy.ndarray of bool, shape (d + 1,)
        Where the variance was not positive and :data:`FALLBACK_STD` was used.
    sensitivity : float
        :math:`\\ell_2` sensitivity of the released moment sums.
    sigma_std : float
        The Gaussian mechanism's standard deviation of that release.
    first_moments : bool
    means : numpy.ndarray or None, shape (d + 1,)
        With first moments: the DP means :math:`m_j = \tilde L_j / N` (features then target).
    mean_noise_std : numpy.ndarray or None, shape (d + 1,)
        With first moments: the standard deviation of the noise in each mean.
    first_scale : numpy.ndarray or None, shape (d + 1,)
        With first moments: the weights :math:`w_j` the sums were released with.
    ring : RingRelease or None
        The release's exact ring noise (``distributed`` through the default secure sum).
    """

    stds: np.ndarray
    variances: np.ndarray
    fallback: np.ndarray
    sensitivity: float
    sigma_std: float
    first_moments: bool
    means: np.ndarray | None = None
    mean_noise_std: np.ndarray | None = None
    first_scale: np.ndarray | None = None
    ring: RingRelease | None = None


def estimate_marginal_stds(
    X: np.ndarray,
    y: np.ndarray,
    *,
    bound_x: float | Sequence[float] | np.ndarray,
    bound_y: float,
    noise_multiplier: float,
    mode: str,
    rng: np.random.Generator,
    first_moments: bool = False,
    first_scale: float | Sequence[float] | np.ndarray | None = None,
    fallback_std: float = FALLBACK_STD,
    compute_nodes: int = 10,
    tolerated: int = 0,
    aggregate: Aggregate | None = None,
) -> MarginalStds:
    r"""Step 2 of Algorithm 2: marginal standard deviations from one noisy sum of moments.

    Parameters
    ----------
    X : numpy.ndarray, shape (N, d)
    y : numpy.ndarray, shape (N,)
        The rows; clipped here to the assumed bounds first (step 1).
    bound_x : float or array of shape (d,)
        Assumed feature bounds :math:`c_j`.
    bound_y : float
        Assumed target bound.
    noise_multiplier : float
        :math:`z_1 = \sigma_{std} / \Delta` of this release
        (:mod:`dpfed.protocols.bayes_linreg.calibration`).
    mode : {"trusted", "distributed", "input"}
        Aggregation setting (:func:`dpfed.protocols.bayes_linreg.aggregation.noisy_sum`).
    rng : numpy.random.Generator
    first_moments : bool, default False
        Also release the sums of values, return the DP means and compute the variance around
        them (see the module docstring); default: zero-centred data as in the paper.
    first_scale : float or array of shape (d + 1,) or None, default None
        Weights :math:`w_j` of the sums in the release (``None``: :math:`c_j / \sqrt 2`,
        :func:`dpfed.protocols.bayes_linreg.centring.first_moment_scale`); first moments only.
    fallback_std : float, default 0.5
        Standard deviation used where the variance estimate is not positive.
    compute_nodes, tolerated : int
        Secure-sum settings (``distributed``).
    aggregate : callable or None
        Secure-sum implementation (``distributed``; default :func:`dpfed.dca.secure_sum`).

    Returns
    -------
    MarginalStds
    """
    if mode == "nonprivate":
        raise DpfedInputError(
            "the projection's standard deviations are a private release; mode 'nonprivate' "
            "has no budget for it. Expected 'trusted', 'distributed' or 'input'."
        )
    z1 = check_positive("noise_multiplier", noise_multiplier)
    fb = check_positive("fallback_std", fallback_std)
    Xc, yc = clip_to_bounds(X, y, bound_x, bound_y)
    n, d = Xc.shape
    w = None
    if first_moments:
        w = (
            first_moment_scale(bound_x, bound_y, d)
            if first_scale is None
            else first_scales(first_scale, d + 1)
        )
    sens = moment_sensitivity(bound_x, bound_y, d, first=first_moments, first_scale=w)
    sigma = z1 * sens
    result = noisy_sum(
        row_moments(Xc, yc, first=first_moments, first_scale=w),
        mode=mode,
        sigma_std=sigma,
        rng=rng,
        compute_nodes=compute_nodes,
        tolerated=tolerated,
        aggregate=aggregate,
        l2_sensitivity=sens,
    )
    released = result.total
    second = released[: d + 1] / n
    means = mean_noise = None
    if first_moments:
        means = released[d + 1 :] / w / n
        mean_noise = result.total_std[d + 1 :] / w / n
        variances = second - means**2
    else:
        variances = second
    fallback = ~(variances > 0)
    stds = np.where(fallback, fb, np.sqrt(np.where(fallback, 1.0, variances)))
    return MarginalStds(
        stds,
        variances,
        fallback,
        sens,
        float(sigma),
        first_moments,
        means,
        mean_noise,
        w,
        result.ring,
    )


@dataclass(frozen=True, eq=False)
class ThresholdChoice:
    """Result of :func:`search_thresholds`.

    Attributes
    ----------
    p_x, p_y : float
        Chosen fractions of the standard deviation for the features and the target.
    grid : numpy.ndarray, shape (G,)
    mean_mae : numpy.ndarray, shape (G, G)
        Mean auxiliary test MAE, rows :math:`p_x`, columns :math:`p_y`.
    n, d : int
    noise_multiplier : float
        :math:`z_{eff}` used.
    repeats : int
    seed : int
    """

    p_x: float
    p_y: float
    grid: np.ndarray
    mean_mae: np.ndarray
    n: int
    d: int
    noise_multiplier: float
    repeats: int
    seed: int

    def to_json(self) -> dict[str, Any]:
        """The chosen pair and the search settings (not the error grid)."""
        return {
            "p_x": self.p_x,
            "p_y": self.p_y,
            "n": self.n,
            "d": self.d,
            "noise_multiplier": self.noise_multiplier,
            "repeats": self.repeats,
            "seed": self.seed,
            "best_mean_mae": float(self.mean_mae.min()),
        }


def _sensitivity_grid(cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
    """Delta_2 for bounds (cx[a] per feature, cy[b]) on a grid; cx (G, d), cy (G,) -> (G, G)."""
    c2 = cx * cx
    s1 = c2.sum(axis=1)
    s2 = (c2 * c2).sum(axis=1)
    xx = s2 + 2.0 * (s1 * s1 - s2)  # sum_j c_j^4 + 4 sum_{j<k} c_j^2 c_k^2
    return np.asarray(np.sqrt(xx[:, None] + 4.0 * s1[:, None] * (cy * cy)[None, :]))


def search_thresholds(
    n: int,
    d: int,
    noise_multiplier: float,
    *,
    lam: float = 1.0,
    lam0: float = 1.0,
    repair: str = "abs",
    grid: Sequence[float] = THRESHOLD_GRID,
    repeats: int = 10,
    seed: int = 0,
    cache: ThresholdCache | None = None,
) -> ThresholdChoice:
    r"""Step 3 of Algorithm 2: threshold fractions by grid search on auxiliary data.

    Parameters
    ----------
    n : int
        Rows of the auxiliary training (and test) set: the real number of clients.
    d : int
        Number of features.
    noise_multiplier : float
        :math:`z_{eff}`: the standard deviation of the noise in the released sum divided by
        its sensitivity (trusted: :math:`z_2`; distributed: :math:`z_2 \sqrt{N/(N-T-1)}`;
        input: :math:`z_2 \sqrt N`).
    lam, lam0 : float, default 1.0
        Model precisions (also used to draw the auxiliary data).
    repair : {"abs", "floor"}, default "abs"
    grid : sequence of float, default :data:`THRESHOLD_GRID`
    repeats : int, default 10
    seed : int, default 0
        Seed of ``numpy.random.default_rng`` for the auxiliary data and noise.
    cache : ThresholdCache or None
        Answers a search it has run before, and stores a new one.

    Returns
    -------
    ThresholdChoice
    """
    n = check_int("n", n, minimum=2)
    d = check_int("d", d, minimum=1)
    z = check_positive("noise_multiplier", noise_multiplier, allow_zero=True)
    lam = check_positive("lam", lam)
    lam0 = check_positive("lam0", lam0)
    repair = check_repair(repair)
    repeats = check_int("repeats", repeats, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    g = np.asarray(grid, dtype=np.float64)
    if g.ndim != 1 or g.size == 0 or np.any(g <= 0) or not np.all(np.isfinite(g)):
        raise DpfedInputError(f"grid must be a non-empty list of numbers > 0. Found {grid!r}.")
    key = (n, d, cache_multiplier(z), lam, lam0, repair, tuple(g.tolist()), repeats, seed)
    if cache is not None:
        found = cache._lookup(key)
        if found is not None:
            return found
    rng = np.random.default_rng(seed)
    m = d * (d + 1) // 2
    rows, cols = np.triu_indices(d)
    total = np.zeros((g.size, g.size))
    for _ in range(repeats):
        beta = rng.normal(0.0, 1.0 / np.sqrt(lam0), d)
        X = rng.normal(size=(n, d))
        y = X @ beta + rng.normal(0.0, 1.0 / np.sqrt(lam), n)
        X_test = rng.normal(size=(n, d))
        y_test = X_test @ beta + rng.normal(0.0, 1.0 / np.sqrt(lam), n)
        u = rng.normal(size=n_statistics(d))  # one noise draw shared by the grid
        cx = g[:, None] * X.std(axis=0)[None, :]  # (G, d)
        cy = g * y.std()  # (G,)
        Xc = np.clip(X[None, :, :], -cx[:, None, :], cx[:, None, :])  # (G, n, d)
        yc = np.clip(y[None, :], -cy[:, None], cy[:, None])  # (G, n)
        S_xx = np.einsum("anj,ank->ajk", Xc, Xc)  # (G, d, d)
        S_xy = np.einsum("anj,bn->abj", Xc, yc)  # (G, G, d)
        sigma = z * _sensitivity_grid(cx, cy)  # (G, G)
        noise_xx = np.zeros((d, d))
        noise_xx[rows, cols] = u[:m]
        noise_xx[cols, rows] = u[:m]
        S_xx_noisy = S_xx[:, None] + sigma[:, :, None, None] * noise_xx  # (G, G, d, d)
        S_xy_noisy = S_xy + sigma[:, :, None] * u[m:]
        means = posterior_means(S_xx_noisy, S_xy_noisy, lam=lam, lam0=lam0, repair=repair)
        pred = np.einsum("nd,abd->abn", X_test, means)
        total += np.mean(np.abs(pred - y_test), axis=-1)
    mean_mae = total / repeats
    a, b = np.unravel_index(int(np.argmin(mean_mae)), mean_mae.shape)
    choice = ThresholdChoice(
        p_x=float(g[a]),
        p_y=float(g[b]),
        grid=g,
        mean_mae=mean_mae,
        n=n,
        d=d,
        noise_multiplier=float(z),
        repeats=repeats,
        seed=seed,
    )
    if cache is not None:
        cache._remember(key, choice)
    return choice


def cache_multiplier(noise_multiplier: float) -> float:
    """The noise multiplier as :class:`ThresholdCache` keys it: rounded to 12 significant
    digits, so that multipliers calibrated along different paths to the same value share a
    search."""
    return float(f"{noise_multiplier:.12g}")


class ThresholdCache:
    """Reuses :func:`search_thresholds` results within a run of many fits.

    The search depends only on public settings, so its result is stored under
    ``(n, d, noise_multiplier, lam, lam0, repair, grid, repeats, seed)`` (the multiplier
    rounded to 12 significant digits) and recomputed only for a new key.

    Attributes
    ----------
    hits, misses : int
        Lookups answered from the cache and searches run.
    """

    def __init__(self) -> None:
        self._store: dict[tuple[Any, ...], ThresholdChoice] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._store)

    def get(self, n: int, d: int, noise_multiplier: float, **options: Any) -> ThresholdChoice:
        """The cached :func:`search_thresholds` result for these arguments (computed once).

        Parameters
        ----------
        n, d, noise_multiplier, **options
            As :func:`search_thresholds` (the keywords ``lam``, ``lam0``, ``repair``,
            ``grid``, ``repeats``, ``seed``).

        Returns
        -------
        ThresholdChoice
        """
        return search_thresholds(n, d, noise_multiplier, cache=self, **options)

    def _lookup(self, key: tuple[Any, ...]) -> ThresholdChoice | None:
        """The stored search of ``key``, counted as a hit, or ``None``, counted as a miss."""
        found = self._store.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def _remember(self, key: tuple[Any, ...], choice: ThresholdChoice) -> None:
        self._store[key] = choice
