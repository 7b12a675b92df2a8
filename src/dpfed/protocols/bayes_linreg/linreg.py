r"""DP Bayesian linear regression by sufficient-statistics perturbation (Heikkilä et al. 2017).

:func:`fit_dp_linreg` runs the whole method on the training rows, one row per client. By
default (``centre=True``) the rows are first centred by DP column means
(:mod:`dpfed.protocols.bayes_linreg.centring`): every client clips its row to the assumed bounds,
the noisy
column sums of features and target are released (in the same aggregation mode as the other
releases; with projection inside the moments release, without it as a release of its own with
a share ``centre_share`` of the budget), and every client subtracts the means
:math:`m = \tilde L / N` from its clipped row; what follows then works on centred rows and
is clipped again to the assumed bounds, and prediction is
:math:`\hat y = (x - m_x)^\top \mu + m_y`. ``centre=False`` is the paper's algorithm
exactly (no first moments, no intercept):

without projection
    clip every value to the assumed bounds :math:`(-c_x, c_x)`, :math:`(-c_y, c_y)` (the
    paper uses :math:`c = 7.5` on data scaled to a range of length 10); release the noisy sum
    of the :math:`d(d+1)/2 + d` statistics with :math:`\sigma_{std} = z \Delta_2(c_x, c_y)`,
    :math:`\Delta_2^2 = d(2d-1) c_x^4 + 4 d c_x^2 c_y^2`; compute the posterior.
with projection (Algorithm 2, :mod:`dpfed.protocols.bayes_linreg.projection`)
    clip to the assumed bounds; release noisy moments with multiplier :math:`z_1` and estimate
    the marginal standard deviations :math:`\hat\sigma_j` (with centring: around the DP
    means released in the same sum); look up the fractions
    :math:`(p_x, p_y)` found on auxiliary data for this :math:`(N, d)` and noise level;
    clip to :math:`b_j = \min(p_j \hat\sigma_j, c_j)`; release the statistics with
    :math:`z_2` and the sensitivity of the per-feature bounds :math:`b`.

The releases are aggregated by one of :data:`dpfed.protocols.bayes_linreg.aggregation.MODES` and
calibrated by
:func:`dpfed.protocols.bayes_linreg.calibration.calibrate_releases`. The non-private mode sums the
exact
statistics of the unclipped rows (no bounds, no noise), centred by their exact means with
``centre=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.coupling import SAMPLER
from dpfed.privacy.discrete_accounting import distributed_discrete_releases_epsilon
from dpfed.privacy.l2_laplace import as_generator
from dpfed.protocols.bayes_linreg.aggregation import (
    MODES,
    Aggregate,
    RingRelease,
    noisy_sum,
    takes_ring_noise,
)
from dpfed.protocols.bayes_linreg.calibration import (
    CALIBRATIONS,
    ReleaseCalibration,
    calibrate_releases,
)
from dpfed.protocols.bayes_linreg.centring import (
    PrivateMeans,
    centre_rows,
    estimate_means,
    exact_means,
)
from dpfed.protocols.bayes_linreg.posterior import (
    Posterior,
    check_repair,
    posterior_from_statistics,
)
from dpfed.protocols.bayes_linreg.projection import (
    FALLBACK_STD,
    THRESHOLD_GRID,
    MarginalStds,
    ThresholdCache,
    ThresholdChoice,
    estimate_marginal_stds,
    search_thresholds,
)
from dpfed.protocols.bayes_linreg.sufficient_stats import (
    check_xy,
    clip_to_bounds,
    n_statistics,
    row_statistics,
    statistics_sensitivity,
    unpack_statistics,
)

__all__ = ["DEFAULT_BOUND", "LinRegFit", "fit_dp_linreg"]

#: The paper's assumed bound on every (scaled) feature and the target.
DEFAULT_BOUND = 7.5


@dataclass(frozen=True, eq=False)
class LinRegFit:
    """Result of :func:`fit_dp_linreg`.

    Attributes
    ----------
    posterior : Posterior
        The (DP) posterior of the weights; ``posterior.mean`` predicts.
    mode : str
    projection : bool
    n_train, d : int
    bounds : numpy.ndarray, shape (d + 1,) or None
        Clipping bounds of the released statistics (features then target); ``None`` for
        ``nonprivate``.
    sensitivity : float or None
        :math:`\\Delta_2` of the statistics release.
    sigma_std : float or None
        Its Gaussian-mechanism standard deviation.
    calibration : ReleaseCalibration or None
    stds : MarginalStds or None
        The projection's private standard deviations.
    thresholds : ThresholdChoice or None
        The projection's fractions.
    notes : tuple of str
    centring : PrivateMeans or None
        The column means the rows were centred by (DP means, or exact ones for
        ``nonprivate``); ``None`` without centring.
    sampler : str or None
        The noise's sampler when it is not the mode's usual one (the distributed mode's
        exact ring noise).
    """

    posterior: Posterior
    mode: str
    projection: bool
    n_train: int
    d: int
    bounds: np.ndarray | None
    sensitivity: float | None
    sigma_std: float | None
    calibration: ReleaseCalibration | None
    stds: MarginalStds | None = None
    thresholds: ThresholdChoice | None = None
    notes: tuple[str, ...] = field(default=())
    centring: PrivateMeans | None = None
    sampler: str | None = None

    @property
    def coef(self) -> np.ndarray:
        """The posterior mean, shape (d,)."""
        return self.posterior.mean

    @property
    def intercept(self) -> float:
        r""":math:`m_y - m_x^\top \mu` with centring, else 0."""
        if self.centring is None:
            return 0.0
        return float(self.centring.mean_y - self.centring.mean_x @ self.coef)

    def predict(self, X: np.ndarray) -> np.ndarray:
        r"""Predictions, shape (n,): :math:`(x - m_x)^\top \mu + m_y` with centring (the DP
        means :math:`m`), else :math:`x^\top \mu`."""
        if self.centring is None:
            return self.posterior.predict(X)
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.d:
            raise DpfedInputError(f"X must be (n, {self.d}). Found shape {X.shape}.")
        return self.posterior.predict(X - self.centring.mean_x) + self.centring.mean_y

    def privacy(self) -> dict[str, Any]:
        """JSON-ready privacy report: mode, epsilon, delta, calibration, releases, notes."""
        centred = self.centring is not None
        if self.calibration is None:
            return {
                "mode": self.mode,
                "epsilon": 0.0,
                "delta": 0.0,
                "calibration": None,
                "centre": centred,
                "releases": [],
                "notes": list(self.notes),
            }
        cal = self.calibration
        releases = []
        if self.stds is not None:
            entry = {
                "what": "marginal moments (projection step 2)",
                "noise_multiplier": cal.noise_multipliers[0],
                "l2_sensitivity": self.stds.sensitivity,
                "sigma_std": self.stds.sigma_std,
            }
            if self.stds.first_moments:
                entry["what"] = (
                    "marginal moments and column sums (projection step 2; "
                    "the DP means of the centring)"
                    if centred
                    else "marginal moments with first moments (projection step 2)"
                )
                assert self.stds.first_scale is not None  # set with first moments
                assert self.stds.mean_noise_std is not None
                entry["first_moment_scale"] = self.stds.first_scale.tolist()
                entry["mean_noise_std"] = self.stds.mean_noise_std.tolist()
            releases.append(entry)
        elif centred:
            assert self.centring is not None and self.centring.mean_noise_std is not None
            releases.append(
                {
                    "what": "column sums (the DP means of the centring)",
                    "noise_multiplier": cal.noise_multipliers[0],
                    "l2_sensitivity": self.centring.sensitivity,
                    "sigma_std": self.centring.sigma_std,
                    "mean_noise_std": self.centring.mean_noise_std.tolist(),
                }
            )
        releases.append(
            {
                "what": "sufficient statistics",
                "noise_multiplier": cal.noise_multipliers[-1],
                "l2_sensitivity": self.sensitivity,
                "sigma_std": self.sigma_std,
            }
        )
        return {
            "mode": self.mode,
            "epsilon": cal.epsilon,
            "delta": cal.delta,
            "calibration": cal.calibration,
            "centre": centred,
            "composition": cal.composition,
            "first_share": cal.first_share,
            "epsilon_accounted": cal.epsilon_accounted,
            "paper_epsilon": cal.paper_epsilon,
            "release_budgets": cal.to_json()["release_budgets"],
            "sampler": self.sampler
            or (
                SAMPLER
                if self.mode in ("trusted", "input")
                else "floating-point normal per client, summed in fixed point"
            ),
            "releases": releases,
            "notes": list(self.notes),
        }

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (coefficients, bounds, projection details, privacy)."""
        out = {
            "mode": self.mode,
            "projection": self.projection,
            "n_train": self.n_train,
            "d": self.d,
            "coef": self.coef.tolist(),
            "bounds": None if self.bounds is None else self.bounds.tolist(),
            "posterior_repaired": self.posterior.repaired,
            "posterior_min_eigenvalue": self.posterior.min_eigenvalue,
            "privacy": self.privacy(),
        }
        if self.stds is not None:
            out["marginal_stds"] = self.stds.stds.tolist()
            out["marginal_std_fallback"] = self.stds.fallback.tolist()
        if self.thresholds is not None:
            out["thresholds"] = self.thresholds.to_json()
        out["intercept"] = self.intercept
        out["centring"] = None if self.centring is None else self.centring.to_json()
        return out


def _effective_multiplier(z: float, mode: str, n: int, tolerated: int) -> float:
    """Noise std of the released sum over its sensitivity, per aggregation mode."""
    if mode == "distributed":
        return z * float(np.sqrt(n / (n - tolerated - 1)))
    if mode == "input":
        return z * float(np.sqrt(n))
    return z


@dataclass(frozen=True)
class _Private:
    """The checked settings of a private fit, shared by its steps."""

    mode: str
    projection: bool
    centre: bool
    lam: float
    lam0: float
    repair: str
    compute_nodes: int
    tolerated: int
    first_moments: bool
    fallback_std: float
    threshold_grid: Sequence[float]
    threshold_repeats: int
    threshold_seed: int
    threshold_cache: ThresholdCache | None
    aggregate: Aggregate | None
    generator: np.random.Generator


def _check_model(mode: str, repair: str, lam: float, lam0: float) -> tuple[str, float, float]:
    """Check the mode and the posterior's settings: ``(repair, lam, lam0)``."""
    if mode not in MODES:
        raise DpfedInputError(f"mode must be one of {MODES}. Found {mode!r}.")
    repair = check_repair(repair)
    lam = check_positive("lam", lam)
    lam0 = check_positive("lam0", lam0)
    return repair, lam, lam0


def _fit_nonprivate(
    X: np.ndarray,
    y: np.ndarray,
    *,
    projection: bool,
    centre: bool,
    lam: float,
    lam0: float,
    repair: str,
) -> LinRegFit:
    """The exact statistics of the unclipped rows (centred by their exact means)."""
    n, d = X.shape
    if projection:
        raise DpfedInputError(
            "projection estimates standard deviations privately and needs a private mode. "
            "Found mode='nonprivate' with projection=True."
        )
    exact = exact_means(X, y) if centre else None
    Xn, yn = (X, y) if exact is None else centre_rows(X, y, exact)
    S_xx, S_xy = unpack_statistics(row_statistics(Xn, yn).sum(axis=0), d)
    post = posterior_from_statistics(S_xx, S_xy, lam=lam, lam0=lam0, repair=repair)
    return LinRegFit(post, "nonprivate", False, n, d, None, None, None, None, centring=exact)


def _check_private(
    n: int,
    mode: str,
    epsilon: float | None,
    delta: float | None,
    calibration: str,
    tolerated: int,
    compute_nodes: int,
) -> tuple[float, float, int, int]:
    """Check the privacy settings: ``(epsilon, delta, tolerated, compute_nodes)``."""
    if epsilon is None or delta is None:
        raise DpfedInputError(
            f"mode {mode!r} needs epsilon and delta. Found epsilon={epsilon!r}, delta={delta!r}."
        )
    if calibration not in CALIBRATIONS:
        raise DpfedInputError(f"calibration must be one of {CALIBRATIONS}. Found {calibration!r}.")
    check_positive("epsilon", epsilon)
    check_open_unit("delta", delta)
    tolerated = check_int("tolerated", tolerated, minimum=0)
    compute_nodes = check_int("compute_nodes", compute_nodes, minimum=1)
    if mode == "distributed" and n - tolerated - 1 < 1:
        raise DpfedInputError(
            f"the distributed mode needs N - T - 1 >= 1. Found N = {n} rows and tolerated "
            f"T = {tolerated}."
        )
    return epsilon, delta, tolerated, compute_nodes


def _calibrate(
    opts: _Private,
    d: int,
    epsilon: float,
    delta: float,
    *,
    calibration: str,
    std_share: float,
    centre_share: float,
) -> tuple[ReleaseCalibration, bool]:
    """The releases' calibration, and whether the noise is the secure sum's ring noise."""
    mode = opts.mode
    # the trusted and input modes draw every noisy coordinate exactly (the moments' second
    # and first moments, or the sums, then the statistics): the coupling's coordinates
    grid = n_statistics(d) + 2 * (d + 1) if mode in ("trusted", "input") else 0
    # the distributed mode through the default secure sum adds exact noise in its ring,
    # accounted by Renyi DP (the distributed discrete Gaussian)
    ring = mode == "distributed" and takes_ring_noise(opts.aggregate)
    cal = calibrate_releases(
        epsilon,
        delta,
        projection=opts.projection,
        std_share=std_share,
        calibration=calibration,
        centre=opts.centre,
        centre_share=centre_share,
        coordinates=grid,
        accountant="rdp" if ring else "pld",
    )
    return cal, ring


def _first_release(
    Xc: np.ndarray, yc: np.ndarray, cx: np.ndarray, cy: float, z: float, opts: _Private
) -> tuple[MarginalStds | None, PrivateMeans | None]:
    """The projection's marginal standard deviations and the centring's DP means (each
    ``None`` when not used), from the first release of multiplier ``z``."""
    stds = centring = None
    if opts.projection:
        stds = estimate_marginal_stds(
            Xc,
            yc,
            bound_x=cx,
            bound_y=cy,
            noise_multiplier=z,
            mode=opts.mode,
            rng=opts.generator,
            first_moments=opts.first_moments or opts.centre,
            fallback_std=opts.fallback_std,
            compute_nodes=opts.compute_nodes,
            tolerated=opts.tolerated,
            aggregate=opts.aggregate,
        )
        if opts.centre:
            assert stds.means is not None  # released with the first moments
            centring = PrivateMeans(
                stds.means,
                "marginal moments",
                stds.sensitivity,
                stds.sigma_std,
                stds.mean_noise_std,
            )
    elif opts.centre:
        centring = estimate_means(
            Xc,
            yc,
            bound_x=cx,
            bound_y=cy,
            noise_multiplier=z,
            mode=opts.mode,
            rng=opts.generator,
            compute_nodes=opts.compute_nodes,
            tolerated=opts.tolerated,
            aggregate=opts.aggregate,
        )
    return stds, centring


def _statistics_bounds(
    n: int,
    d: int,
    cx: np.ndarray,
    cy: float,
    stds: MarginalStds | None,
    cal: ReleaseCalibration,
    opts: _Private,
    notes: list[str],
) -> tuple[ThresholdChoice | None, np.ndarray]:
    """The projection's thresholds (or ``None``) and the bounds of the statistics release;
    a note in ``notes`` for each fallback standard deviation."""
    if not opts.projection:
        return None, np.append(cx, cy)
    assert stds is not None  # the projection's first release
    z_eff = _effective_multiplier(cal.noise_multipliers[1], opts.mode, n, opts.tolerated)
    thresholds = search_thresholds(
        n,
        d,
        z_eff,
        lam=opts.lam,
        lam0=opts.lam0,
        repair=opts.repair,
        grid=opts.threshold_grid,
        repeats=opts.threshold_repeats,
        seed=opts.threshold_seed,
        cache=opts.threshold_cache,
    )
    p = np.append(np.full(d, thresholds.p_x), thresholds.p_y)
    bounds = np.minimum(p * stds.stds, np.append(cx, cy))
    if stds.fallback.any():
        notes.append(
            f"{int(stds.fallback.sum())} noisy variance estimate(s) were not positive; "
            f"their standard deviation was set to {opts.fallback_std:g}"
        )
    return thresholds, bounds


def _fit_private(
    X: np.ndarray,
    y: np.ndarray,
    opts: _Private,
    cal: ReleaseCalibration,
    ring: bool,
    bound_x: float | Sequence[float] | np.ndarray,
    bound_y: float,
) -> LinRegFit:
    """Clip, centre, (project,) release the statistics and compute the posterior."""
    n, d = X.shape
    Xc, yc = clip_to_bounds(X, y, bound_x, bound_y)
    cx = np.broadcast_to(np.asarray(bound_x, dtype=np.float64), (d,)).copy()
    cy = float(bound_y)
    notes = list(cal.notes)
    stds, centring = _first_release(Xc, yc, cx, cy, cal.noise_multipliers[0], opts)
    if centring is not None:
        Xc, yc = centre_rows(Xc, yc, centring)
    thresholds, bounds = _statistics_bounds(n, d, cx, cy, stds, cal, opts, notes)
    Xc, yc = clip_to_bounds(Xc, yc, bounds[:-1], bounds[-1])
    sens = statistics_sensitivity(bounds[:-1], bounds[-1])
    sigma = cal.noise_multipliers[-1] * sens
    released = noisy_sum(
        row_statistics(Xc, yc),
        mode=opts.mode,
        sigma_std=sigma,
        rng=opts.generator,
        compute_nodes=opts.compute_nodes,
        tolerated=opts.tolerated,
        aggregate=opts.aggregate,
        l2_sensitivity=sens,
    )
    S_xx, S_xy = unpack_statistics(released.total, d)
    post = posterior_from_statistics(S_xx, S_xy, lam=opts.lam, lam0=opts.lam0, repair=opts.repair)
    if post.repaired:
        notes.append(
            f"the noisy Gram matrix had a negative eigenvalue ({post.min_eigenvalue:.4g}); it "
            f"was repaired ({opts.repair}) so the posterior precision is positive definite"
        )
    sampler = None
    if ring:
        first = stds if stds is not None else centring
        releases = [r for r in (getattr(first, "ring", None), released.ring) if r is not None]
        cal, ring_notes = _ring_accounting(cal, releases)
        notes.extend(ring_notes)
        sampler = RING_SAMPLER
    return LinRegFit(
        posterior=post,
        mode=opts.mode,
        projection=opts.projection,
        n_train=n,
        d=d,
        bounds=bounds,
        sensitivity=sens,
        sigma_std=float(sigma),
        calibration=cal,
        stds=stds,
        thresholds=thresholds,
        notes=tuple(notes),
        centring=centring,
        sampler=sampler,
    )


def fit_dp_linreg(
    X: np.ndarray,
    y: np.ndarray,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    mode: str = "trusted",
    projection: bool = False,
    bound_x: float | Sequence[float] | np.ndarray = DEFAULT_BOUND,
    bound_y: float = DEFAULT_BOUND,
    calibration: str = "tight",
    std_share: float = 0.3,
    centre: bool = True,
    centre_share: float = 0.3,
    lam: float = 1.0,
    lam0: float = 1.0,
    repair: str = "abs",
    compute_nodes: int = 10,
    tolerated: int = 0,
    first_moments: bool = False,
    fallback_std: float = FALLBACK_STD,
    threshold_grid: Sequence[float] = THRESHOLD_GRID,
    threshold_repeats: int = 10,
    threshold_seed: int = 0,
    threshold_cache: ThresholdCache | None = None,
    rng: np.random.Generator | int | None = None,
    aggregate: Aggregate | None = None,
) -> LinRegFit:
    r"""Fit DP Bayesian linear regression on rows held one per client.

    Parameters
    ----------
    X : numpy.ndarray, shape (N, d)
        Training features (scaled; see :func:`dpfed.data.regression.scale_to_range`).
    y : numpy.ndarray, shape (N,)
        Training targets.
    epsilon : float or None
        Total epsilon > 0 (required unless ``mode="nonprivate"``).
    delta : float or None
        Total delta in (0, 1) (required unless ``mode="nonprivate"``).
    mode : {"trusted", "distributed", "input", "nonprivate"}, default "trusted"
        Aggregation setting, see :mod:`dpfed.protocols.bayes_linreg.aggregation`.
    projection : bool, default False
        Use Algorithm 2 (not with ``nonprivate``).
    bound_x : float or array of shape (d,), default 7.5
        Assumed feature bounds :math:`c_x`.
    bound_y : float, default 7.5
        Assumed target bound :math:`c_y`.
    calibration : {"tight", "paper"}, default "tight"
        See :mod:`dpfed.protocols.bayes_linreg.calibration`.
    std_share : float, default 0.3
        Share of the budget for the projection's standard deviations (and, with centring, the
        column sums released with them).
    centre : bool, default True
        Centre the rows by DP column means (:mod:`dpfed.protocols.bayes_linreg.centring`) and
        predict
        :math:`(x - m_x)^\top \mu + m_y`. ``False``: the paper's algorithm exactly, which
        assumes zero-centred data and fits no intercept. ``nonprivate`` centres by the exact
        means.
    centre_share : float, default 0.3
        Share of the budget for the column sums when centring without projection (with
        projection they share the moments release and ``std_share``).
    lam, lam0 : float, default 1.0
        Likelihood and prior precisions.
    repair : {"abs", "floor"}, default "abs"
        Positive-definiteness repair of the noisy Gram matrix
        (:mod:`dpfed.protocols.bayes_linreg.posterior`).
    compute_nodes : int, default 10
        :math:`M` of the secure sum (``distributed``).
    tolerated : int, default 0
        :math:`T`, colluding or dropped clients tolerated (``distributed``).
    first_moments : bool, default False
        Projection: also release first moments (see
        :mod:`dpfed.protocols.bayes_linreg.projection`); implied
        by ``centre=True``.
    fallback_std : float, default 0.5
        Projection: standard deviation used for a non-positive variance estimate.
    threshold_grid : sequence of float, default THRESHOLD_GRID
        :data:`dpfed.protocols.bayes_linreg.projection.THRESHOLD_GRID` by default.
    threshold_repeats : int, default 10
    threshold_seed : int, default 0
        Projection: the auxiliary-data search
        (:func:`dpfed.protocols.bayes_linreg.projection.search_thresholds`).
    threshold_cache : ThresholdCache or None
        Reuse searches across fits (same :math:`N, d` and noise level).
    rng : numpy.random.Generator or int or None
        Source of all DP noise (an integer seeds ``numpy.random.default_rng``).
    aggregate : callable or None
        Secure sum for ``distributed`` (default :func:`dpfed.dca.secure_sum`).

    Returns
    -------
    LinRegFit

    Raises
    ------
    DpfedInputError
        On bad arguments (the message names the value).
    """
    X, y = check_xy(X, y)
    repair, lam, lam0 = _check_model(mode, repair, lam, lam0)
    if mode == "nonprivate":
        return _fit_nonprivate(
            X, y, projection=projection, centre=centre, lam=lam, lam0=lam0, repair=repair
        )
    eps, dlt, tolerated, compute_nodes = _check_private(
        X.shape[0], mode, epsilon, delta, calibration, tolerated, compute_nodes
    )
    opts = _Private(
        mode,
        projection,
        centre,
        lam,
        lam0,
        repair,
        compute_nodes,
        tolerated,
        first_moments,
        fallback_std,
        threshold_grid,
        threshold_repeats,
        threshold_seed,
        threshold_cache,
        aggregate,
        as_generator(rng),
    )
    cal, ring = _calibrate(
        opts,
        X.shape[1],
        eps,
        dlt,
        calibration=calibration,
        std_share=std_share,
        centre_share=centre_share,
    )
    return _fit_private(X, y, opts, cal, ring, bound_x, bound_y)


#: The distributed mode's sampler through the default secure sum.
RING_SAMPLER = (
    "exact discrete Gaussian per client in the secure sum's ring (block-envelope "
    "sampler), accounted as the distributed discrete Gaussian (Renyi DP)"
)


def _ring_accounting(
    cal: ReleaseCalibration, releases: Sequence[RingRelease]
) -> tuple[ReleaseCalibration, list[str]]:
    """The calibration with ``epsilon_accounted`` of the ring noise actually added; the stated
    epsilon becomes the accounted one if that is larger (never printed below the truth)."""
    expected = 1 + (cal.first_share is not None)
    if len(releases) != expected:
        raise AssertionError(  # pragma: no cover - every release of the mode is a ring one
            f"expected {expected} ring releases, found {len(releases)}"
        )
    accounted = distributed_discrete_releases_epsilon([r.as_tuple() for r in releases], cal.delta)
    notes = []
    # the stated budget (the paper's, or the calibrated target), raised to the accounted figure
    epsilon = cal.paper_epsilon if cal.paper_epsilon is not None else cal.epsilon
    if cal.paper_epsilon is not None and accounted > epsilon:
        epsilon = accounted  # the calibration's note already says so
    elif accounted > epsilon * (1 + 1e-9):
        notes.append(
            f"the exact noise in the secure sum's ring is accounted at epsilon "
            f"{accounted:.4g} (Renyi DP of the distributed discrete Gaussian), more than "
            f"{epsilon:g}: privacy.epsilon is {accounted:.4g}"
        )
        epsilon = accounted
    return replace(cal, epsilon_accounted=float(accounted), epsilon=float(epsilon)), notes
