r"""Centring the rows by differentially private column means.

The model of :mod:`dpfed.protocols.bayes_linreg.posterior` has no intercept, and the projection of
Algorithm 2
(:mod:`dpfed.protocols.bayes_linreg.projection`) and its threshold search on auxiliary
:math:`\mathcal N(0, I)`
data assume zero-centred columns. The paper centres the data by the whole data set's means,
constants the differentially private algorithm does not protect; it notes that "non-zero data
means can be estimated like the marginal stds at the cost of some added noise". This module
does that:

1. every client clips its row :math:`v_i = (x_i, y_i) \in \mathbb R^{d+1}` to the public
   assumed bounds :math:`|v_{ij}| \le c_j`
   (:func:`dpfed.protocols.bayes_linreg.sufficient_stats.clip_to_bounds`);
2. the column sums :math:`L = \sum_i v_i` are released with Gaussian noise in one of the
   aggregation modes (:func:`dpfed.protocols.bayes_linreg.aggregation.noisy_sum`: trusted
   aggregator, the DCA
   secure sum, or input perturbation), with a share of the budget
   (:mod:`dpfed.protocols.bayes_linreg.calibration`);
3. the means :math:`m = \tilde L / N` (:math:`N` is public) are post-processing of that
   release;
4. every client subtracts :math:`m` from its clipped row before the projection or clipping
   and the sufficient statistics; the posterior is then that of centred data, and a new row
   is predicted by

   .. math:: \hat y = (x - m_x)^\top \mu + m_y ,

   i.e. the weights :math:`\mu` and the intercept :math:`m_y - m_x^\top \mu`.

Sensitivity
-----------
Under replace-one adjacency coordinate :math:`j` of the sums changes by
:math:`v_j - v'_j \in [-2 c_j, 2 c_j]`, and every coordinate can change by its maximum at once
(:math:`v = c`, :math:`v' = -c`), so the :math:`\ell_2` sensitivity is exactly

.. math:: \Delta_2 = 2 \sqrt{\textstyle\sum_{j=1}^{d+1} c_j^2}

(:func:`sum_sensitivity`). Each mean then carries Gaussian noise of standard deviation
:math:`z \Delta_2 / N` (times :math:`\sqrt{N/(N-T-1)}` in the distributed mode and
:math:`\sqrt N` with input perturbation).

With the projection
-------------------
The projection already releases the sums of squares :math:`Q_j = \sum_i v_{ij}^2` for the
marginal standard deviations; the sums ride in the same release. Each client sends
:math:`(v_{ij}^2)_j` followed by :math:`(w_j v_{ij})_j` with the public weights
:math:`w_j = c_j / \sqrt 2` (:func:`first_moment_scale`), and the exact sensitivity of this
concatenation is :math:`\Delta_2^2 = \sum_j G(c_j, w_j) = \sum_j 2 c_j^4`
(:func:`dpfed.protocols.bayes_linreg.sufficient_stats.moment_sensitivity`). :math:`w_j = c_j/\sqrt
2` is the
smallest weight at which the sums are as accurate as in a release of their own with the same
noise multiplier (noise :math:`z \cdot 2\sqrt{\sum_j c_j^2}` on :math:`L`); the squares then
cost a factor :math:`\sqrt 2` in noise against a release of the squares alone. With unit
weights the means would be about :math:`3.8` times noisier at :math:`c_j = 7.5`. The
variances are computed around the DP means, :math:`\hat\sigma_j^2 = \tilde Q_j/N - m_j^2`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError, check_positive
from dpfed.protocols.bayes_linreg.aggregation import Aggregate, RingRelease, noisy_sum
from dpfed.protocols.bayes_linreg.sufficient_stats import check_xy, clip_to_bounds, feature_bounds

__all__ = [
    "PrivateMeans",
    "centre_rows",
    "estimate_means",
    "exact_means",
    "first_moment_scale",
    "sum_sensitivity",
]


@dataclass(frozen=True, eq=False)
class PrivateMeans:
    r"""Column means used to centre the rows (features, then the target).

    Attributes
    ----------
    means : numpy.ndarray, shape (d + 1,)
        :math:`m = \tilde L / N`: the DP means (post-processing of a noisy sum), or the exact
        means in the non-private mode.
    release : str
        Which release they come from: ``"column sums"`` (a release of their own),
        ``"marginal moments"`` (the projection's standard-deviation release) or ``"exact"``
        (non-private, no release).
    sensitivity : float or None
        :math:`\ell_2` sensitivity of that release (``None`` for ``"exact"``).
    sigma_std : float or None
        Its Gaussian-mechanism standard deviation :math:`z \Delta_2`.
    mean_noise_std : numpy.ndarray or None, shape (d + 1,)
        Standard deviation of the noise in each mean: the noise in the released sum over
        :math:`N` (the mode's total noise, e.g. :math:`z \Delta_2 \sqrt{N/(N-T-1)} / N`
        distributed).
    ring : RingRelease or None
        The release's exact ring noise (``distributed`` through the default secure sum).
    """

    means: np.ndarray
    release: str
    sensitivity: float | None = None
    sigma_std: float | None = None
    mean_noise_std: np.ndarray | None = None
    ring: RingRelease | None = None

    @property
    def mean_x(self) -> np.ndarray:
        """The feature means, shape (d,)."""
        return self.means[:-1]

    @property
    def mean_y(self) -> float:
        """The target mean."""
        return float(self.means[-1])

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the means, where they come from and their noise."""
        return {
            "mean_x": self.mean_x.tolist(),
            "mean_y": self.mean_y,
            "release": self.release,
            "sensitivity": self.sensitivity,
            "sigma_std": self.sigma_std,
            "mean_noise_std": None if self.mean_noise_std is None else self.mean_noise_std.tolist(),
        }


def _all_bounds(
    bound_x: float | Sequence[float] | np.ndarray, bound_y: float, d: int | None
) -> np.ndarray:
    return np.append(feature_bounds(bound_x, d), check_positive("bound_y", bound_y))


def sum_sensitivity(
    bound_x: float | Sequence[float] | np.ndarray, bound_y: float, d: int | None = None
) -> float:
    r"""Exact :math:`\ell_2` sensitivity of the column sums :math:`\sum_i (x_i, y_i)`.

    .. math:: \Delta_2 = 2 \sqrt{\textstyle\sum_{j=1}^{d} c_j^2 + c_y^2}

    (attained by :math:`v = c`, :math:`v' = -c`; see the module docstring).

    Parameters
    ----------
    bound_x : float or array of shape (d,)
        Feature bounds :math:`c_j > 0`.
    bound_y : float
        Target bound :math:`c_y > 0`.
    d : int or None
        Needed when ``bound_x`` is a single number.

    Returns
    -------
    float
    """
    c = _all_bounds(bound_x, bound_y, d)
    return float(2.0 * np.sqrt((c * c).sum()))


def first_moment_scale(
    bound_x: float | Sequence[float] | np.ndarray, bound_y: float, d: int | None = None
) -> np.ndarray:
    r"""The weights :math:`w_j = c_j / \sqrt 2` of the sums in the projection's moment release.

    The smallest weights at which the sums, released beside the squares, are as accurate as
    in a release of their own (see the module docstring).

    Parameters
    ----------
    bound_x : float or array of shape (d,)
    bound_y : float
    d : int or None
        Needed when ``bound_x`` is a single number.

    Returns
    -------
    numpy.ndarray, shape (d + 1,)
    """
    return np.asarray(_all_bounds(bound_x, bound_y, d) / np.sqrt(2.0))


def estimate_means(
    X: np.ndarray,
    y: np.ndarray,
    *,
    bound_x: float | Sequence[float] | np.ndarray,
    bound_y: float,
    noise_multiplier: float,
    mode: str,
    rng: np.random.Generator,
    compute_nodes: int = 10,
    tolerated: int = 0,
    aggregate: Aggregate | None = None,
) -> PrivateMeans:
    r"""DP column means from one noisy sum of the clipped rows (steps 1-3 of the module).

    Parameters
    ----------
    X : numpy.ndarray, shape (N, d)
    y : numpy.ndarray, shape (N,)
        The rows; clipped here to the assumed bounds first.
    bound_x : float or array of shape (d,)
        Assumed feature bounds :math:`c_j`.
    bound_y : float
        Assumed target bound :math:`c_y`.
    noise_multiplier : float
        :math:`z = \sigma_{std} / \Delta_2` of this release
        (:mod:`dpfed.protocols.bayes_linreg.calibration`).
    mode : {"trusted", "distributed", "input"}
        Aggregation setting (:func:`dpfed.protocols.bayes_linreg.aggregation.noisy_sum`);
        ``distributed`` goes
        through the secure sum like the other releases.
    rng : numpy.random.Generator
        Source of the noise.
    compute_nodes, tolerated : int
        Secure-sum settings (``distributed``).
    aggregate : callable or None
        Secure-sum implementation (``distributed``; default :func:`dpfed.dca.secure_sum`).

    Returns
    -------
    PrivateMeans
        ``release="column sums"``.

    Raises
    ------
    DpfedInputError
        For ``mode="nonprivate"`` (use :func:`exact_means`) or bad arguments.
    """
    if mode == "nonprivate":
        raise DpfedInputError(
            "the DP means are a private release; mode 'nonprivate' has no budget for it. "
            "Expected 'trusted', 'distributed' or 'input' (or exact_means without privacy)."
        )
    z = check_positive("noise_multiplier", noise_multiplier)
    Xc, yc = clip_to_bounds(X, y, bound_x, bound_y)
    n, d = Xc.shape
    sens = sum_sensitivity(bound_x, bound_y, d)
    sigma = z * sens
    released = noisy_sum(
        np.column_stack([Xc, yc]),
        mode=mode,
        sigma_std=sigma,
        rng=rng,
        compute_nodes=compute_nodes,
        tolerated=tolerated,
        aggregate=aggregate,
        l2_sensitivity=sens,
    )
    return PrivateMeans(
        released.total / n, "column sums", sens, float(sigma), released.total_std / n, released.ring
    )


def exact_means(X: np.ndarray, y: np.ndarray) -> PrivateMeans:
    """The exact column means (the non-private mode; no release, no privacy).

    Parameters
    ----------
    X : numpy.ndarray, shape (N, d)
    y : numpy.ndarray, shape (N,)

    Returns
    -------
    PrivateMeans
        ``release="exact"``.
    """
    X, y = check_xy(X, y)
    return PrivateMeans(np.append(X.mean(axis=0), y.mean()), "exact")


def centre_rows(X: np.ndarray, y: np.ndarray, means: PrivateMeans) -> tuple[np.ndarray, np.ndarray]:
    """Subtract the means from every row: ``(X - mean_x, y - mean_y)`` (new arrays).

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    y : numpy.ndarray, shape (n,)
    means : PrivateMeans
        With ``d + 1`` means.

    Returns
    -------
    X_centred : numpy.ndarray, shape (n, d)
    y_centred : numpy.ndarray, shape (n,)
    """
    X, y = check_xy(X, y)
    if means.means.shape != (X.shape[1] + 1,):
        raise DpfedInputError(
            f"means must hold d + 1 = {X.shape[1] + 1} values (features, then the target). "
            f"Found shape {means.means.shape}."
        )
    return X - means.mean_x, y - means.mean_y
