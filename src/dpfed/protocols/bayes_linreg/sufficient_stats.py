r"""Sufficient statistics of Bayesian linear regression, their clipping and their sensitivity.

For rows :math:`(x_i, y_i)`, :math:`x_i \in \mathbb{R}^d`, the posterior of the model of
:mod:`dpfed.protocols.bayes_linreg.posterior` depends on the data only through

.. math::

    S_{xx} = \sum_i x_i x_i^\top \in \mathbb{R}^{d \times d}, \qquad
    S_{xy} = \sum_i x_i y_i \in \mathbb{R}^d .

:math:`S_{xx}` is symmetric, so each row contributes the vector

.. math::

    z_i = \big( (x_{ij} x_{ik})_{1 \le j \le k \le d},\ (x_{ij} y_i)_{1 \le j \le d} \big)
    \in \mathbb{R}^{D}, \qquad D = d(d+1)/2 + d,

(the upper triangle of :math:`x_i x_i^\top` row by row, in the order of
``numpy.triu_indices(d)``, then :math:`x_i y_i`), and :math:`\sum_i z_i` is what a DP sum
releases (:func:`row_statistics`, :func:`unpack_statistics`).

Sensitivity (Heikkilä et al. 2017, supplement eqs. 15-18)
---------------------------------------------------------
Two adjacent data sets differ in one row, :math:`(x, y)` replaced by :math:`(x', y')`, each
coordinate bounded: :math:`|x_j| \le c_j`, :math:`|y| \le c_y` (enforced by clipping every
value to its bound, :func:`clip_to_bounds`). Coordinate by coordinate,

* diagonal :math:`x_j^2 - x_j'^2 \in [-c_j^2, c_j^2]` (both squares lie in
  :math:`[0, c_j^2]`): at most :math:`c_j^4` squared;
* off-diagonal :math:`x_j x_k - x_j' x_k' \in [-2 c_j c_k, 2 c_j c_k]`: at most
  :math:`4 c_j^2 c_k^2`;
* target terms :math:`x_j y - x_j' y'`: at most :math:`4 c_j^2 c_y^2`.

Summing the coordinate maxima bounds the squared :math:`\ell_2` sensitivity,

.. math::

    \Delta_2^2 \le \sum_j c_j^4 + \sum_{j<k} 4 c_j^2 c_k^2 + \sum_j 4 c_j^2 c_y^2
    \;\overset{c_j = c_x}{=}\; d(2d-1)\, c_x^4 + 4 d\, c_x^2 c_y^2 ,

the paper's formula (:func:`statistics_sensitivity`). Each coordinate's maximum is attained,
but not all at once (a diagonal term is maximal only when one of :math:`x_j, x_j'` is 0, which
makes every off-diagonal term of that coordinate 0), so the bound is valid but not tight: the
true sensitivity is smaller. The tests check both facts by brute force.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_positive

__all__ = [
    "clip_to_bounds",
    "moment_pair_sensitivity_squared",
    "moment_sensitivity",
    "n_statistics",
    "pack_statistics",
    "row_moments",
    "row_statistics",
    "statistics_sensitivity",
    "statistics_sensitivity_squared",
    "unpack_statistics",
]


def n_statistics(d: int) -> int:
    r"""Length :math:`D = d(d+1)/2 + d` of a row's statistics vector.

    Parameters
    ----------
    d : int
        Number of features, >= 1.

    Returns
    -------
    int
    """
    d = check_int("d", d, minimum=1)
    return d * (d + 1) // 2 + d


def _bounds(name: str, value: float | Sequence[float] | np.ndarray, d: int) -> np.ndarray:
    """A bound per column, shape (d,), each finite and > 0."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    if arr.shape != (d,):
        raise DpfedInputError(
            f"{name} must be a number or one bound per feature ({d}). Found shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        bad = arr[~(np.isfinite(arr) & (arr > 0))][0]
        raise DpfedInputError(f"{name} must hold finite numbers > 0. Found {bad!r}.")
    return arr


def feature_bounds(bound_x: float | Sequence[float] | np.ndarray, d: int | None) -> np.ndarray:
    """The feature bounds of a sensitivity, shape (d,): ``d`` is needed (and checked) when
    ``bound_x`` is a single number, and otherwise is the length of ``bound_x``."""
    if np.ndim(bound_x) == 0:
        if d is None:
            raise DpfedInputError("d must be given when bound_x is a single number.")
        d = check_int("d", d, minimum=1)
    else:
        d = int(np.shape(bound_x)[0])
    return _bounds("bound_x", bound_x, d)


def check_xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (n_samples, n_features) and ``y`` (n_samples,) as finite float64 arrays of
    matching length, or a ``DpfedInputError`` naming what is wrong."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] == 0:
        raise DpfedInputError(f"X must be 2-D (n_samples, n_features). Found shape {X.shape}.")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise DpfedInputError(
            f"y must be 1-D with one value per row of X ({X.shape[0]}). Found shape {y.shape}."
        )
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise DpfedInputError("X and y must hold finite values only. Found NaN or infinity.")
    return X, y


def clip_to_bounds(
    X: np.ndarray,
    y: np.ndarray,
    bound_x: float | Sequence[float] | np.ndarray,
    bound_y: float,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Clip every value to its bound: :math:`x_{ij} \mapsto \max(-c_j, \min(x_{ij}, c_j))`.

    This is the projection of eq. (14) of the paper's supplement; it is what makes the
    sensitivity bounds of this module hold for any input.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    y : numpy.ndarray, shape (n,)
    bound_x : float or array of shape (d,)
        :math:`c_j > 0`, one for all features or one per feature.
    bound_y : float
        :math:`c_y > 0`.

    Returns
    -------
    X_clipped : numpy.ndarray, shape (n, d)
    y_clipped : numpy.ndarray, shape (n,)
        New arrays; the inputs are not modified.
    """
    X, y = check_xy(X, y)
    cx = _bounds("bound_x", bound_x, X.shape[1])
    cy = check_positive("bound_y", bound_y)
    return np.clip(X, -cx, cx), np.clip(y, -cy, cy)


def row_statistics(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Each row's sufficient-statistics vector :math:`z_i` (see the module docstring).

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    y : numpy.ndarray, shape (n,)

    Returns
    -------
    numpy.ndarray, shape (n, d(d+1)/2 + d)
        Row :math:`i` holds :math:`x_{ij} x_{ik}` for ``(j, k)`` in
        ``zip(*numpy.triu_indices(d))``, then :math:`x_{ij} y_i` for :math:`j = 1..d`.
    """
    X, y = check_xy(X, y)
    rows, cols = np.triu_indices(X.shape[1])
    return np.concatenate([X[:, rows] * X[:, cols], X * y[:, None]], axis=1)


def pack_statistics(S_xx: np.ndarray, S_xy: np.ndarray) -> np.ndarray:
    """The vector of unique entries of ``(S_xx, S_xy)``, the inverse of :func:`unpack_statistics`.

    Parameters
    ----------
    S_xx : numpy.ndarray, shape (d, d)
        Symmetric; only its upper triangle is read.
    S_xy : numpy.ndarray, shape (d,)

    Returns
    -------
    numpy.ndarray, shape (d(d+1)/2 + d,)
    """
    S_xx = np.asarray(S_xx, dtype=np.float64)
    S_xy = np.asarray(S_xy, dtype=np.float64)
    d = S_xy.shape[0]
    if S_xx.shape != (d, d) or S_xy.ndim != 1:
        raise DpfedInputError(
            f"S_xx must be (d, d) and S_xy (d,). Found {S_xx.shape} and {S_xy.shape}."
        )
    return np.concatenate([S_xx[np.triu_indices(d)], S_xy])


def unpack_statistics(vector: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric matrix and vector of a (summed, possibly noisy) statistics vector.

    Parameters
    ----------
    vector : numpy.ndarray, shape (..., d(d+1)/2 + d)
        One vector or a stack of them.
    d : int
        Number of features.

    Returns
    -------
    S_xx : numpy.ndarray, shape (..., d, d)
        Symmetric: entry ``(j, k)`` and ``(k, j)`` both hold the one released value.
    S_xy : numpy.ndarray, shape (..., d)
    """
    d = check_int("d", d, minimum=1)
    v = np.asarray(vector, dtype=np.float64)
    m = d * (d + 1) // 2
    if v.ndim == 0 or v.shape[-1] != m + d:
        raise DpfedInputError(
            f"vector must have d(d+1)/2 + d = {m + d} entries in its last axis for d = {d}. "
            f"Found shape {v.shape}."
        )
    rows, cols = np.triu_indices(d)
    S_xx = np.zeros((*v.shape[:-1], d, d))
    S_xx[..., rows, cols] = v[..., :m]
    S_xx[..., cols, rows] = v[..., :m]
    return S_xx, v[..., m:].copy()


def statistics_sensitivity_squared(
    bound_x: float | Sequence[float] | np.ndarray, bound_y: float, d: int | None = None
) -> float:
    r"""Squared :math:`\ell_2` sensitivity of :math:`\sum_i z_i` (supplement eq. 18).

    .. math::

        \Delta_2^2 = \sum_j c_j^4 + \sum_{j<k} 4 c_j^2 c_k^2 + \sum_j 4 c_j^2 c_y^2
        = d(2d-1) c_x^4 + 4 d c_x^2 c_y^2 \quad (c_j = c_x).

    Parameters
    ----------
    bound_x : float or array of shape (d,)
        Feature bounds :math:`c_j > 0`.
    bound_y : float
        Target bound :math:`c_y > 0`.
    d : int or None
        Number of features; needed when ``bound_x`` is a single number.

    Returns
    -------
    float
        :math:`\Delta_2^2` (an upper bound: see the module docstring).
    """
    c = feature_bounds(bound_x, d)
    cy = check_positive("bound_y", bound_y)
    c2 = c * c
    off_diagonal = (c2.sum() ** 2 - (c2 * c2).sum()) / 2.0  # sum_{j<k} c_j^2 c_k^2
    return float((c2 * c2).sum() + 4.0 * off_diagonal + 4.0 * c2.sum() * cy * cy)


def statistics_sensitivity(
    bound_x: float | Sequence[float] | np.ndarray, bound_y: float, d: int | None = None
) -> float:
    r""":math:`\Delta_2`, the square root of :func:`statistics_sensitivity_squared`."""
    return float(np.sqrt(statistics_sensitivity_squared(bound_x, bound_y, d)))


def first_scales(first_scale: float | Sequence[float] | np.ndarray | None, k: int) -> np.ndarray:
    """The weights of the first moments, shape (k,): 1 for ``None``, else finite and > 0."""
    if first_scale is None:
        return np.ones(k)
    return _bounds("first_scale", first_scale, k)


def row_moments(
    X: np.ndarray,
    y: np.ndarray,
    *,
    first: bool = False,
    first_scale: float | Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:
    r"""Each row's contribution to the marginal-moment release of the projection.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    y : numpy.ndarray, shape (n,)
    first : bool, default False
        Also release (weighted) first moments.
    first_scale : float or array of shape (d + 1,) or None, default None
        Public weights :math:`w_j > 0` of the first moments (``None``: 1). The released sum
        of :math:`w_j v_{ij}` is divided by :math:`w_j` afterwards; the weights only move
        noise between the two halves of the release (see :func:`moment_sensitivity`).

    Returns
    -------
    numpy.ndarray, shape (n, d + 1) or (n, 2(d + 1))
        :math:`(x_{i1}^2, \dots, x_{id}^2, y_i^2)`, followed with ``first=True`` by
        :math:`(w_1 x_{i1}, \dots, w_d x_{id}, w_{d+1} y_i)`.
    """
    X, y = check_xy(X, y)
    full = np.column_stack([X, y])
    if not first:
        return np.asarray(full * full)
    w = first_scales(first_scale, full.shape[1])
    return np.concatenate([full * full, full * w], axis=1)


def moment_pair_sensitivity_squared(
    bound: float | np.ndarray, weight: float | np.ndarray = 1.0
) -> np.ndarray:
    r"""Exact largest squared change of one coordinate's pair :math:`(v^2, w v)`.

    For :math:`v, v' \in [-c, c]`,

    .. math::

        G(c, w) = \max_{v, v'} \big[(v^2 - v'^2)^2 + w^2 (v - v')^2\big]
        = \begin{cases}
            4 w^2 c^2 & c^2 \le 2 w^2, \\
            \max\big(4 w^2 c^2,\ s_*^2 (t_*^2 + w^2)\big) & c^2 > 2 w^2,
          \end{cases}

    with :math:`t_* = (c + \sqrt{c^2 - 2 w^2})/2` and :math:`s_* = 2c - t_*`. Proof: with
    :math:`a = v - v'` and :math:`b = v + v'` the objective is :math:`a^2 (b^2 + w^2)` and the
    box is :math:`|a| + |b| \le 2c`; the objective grows with :math:`|a|` and :math:`|b|`, so
    the maximum lies on :math:`|a| = s`, :math:`|b| = t = 2c - s`, where
    :math:`f(s) = s^2 (t^2 + w^2)` has :math:`f'(s) = 2 s (2 t^2 - 2 c t + w^2)`. For
    :math:`c^2 \le 2 w^2` the bracket is never negative and the maximum is the end
    :math:`s = 2c` (:math:`v = c, v' = -c`); otherwise :math:`f` has one interior local
    maximum at :math:`t = t_*` and the larger of it and the end is the answer. Both are
    attained, so :math:`G` is the exact maximum, not a bound. (The sum of the separate maxima,
    :math:`c^4 + 4 w^2 c^2`, is not attained: the square's change is largest at
    :math:`v' = 0`, the value's at :math:`v' = -v`.)

    Parameters
    ----------
    bound : float or numpy.ndarray
        :math:`c > 0`.
    weight : float or numpy.ndarray, default 1.0
        :math:`w > 0`.

    Returns
    -------
    numpy.ndarray
        :math:`G(c, w)`, broadcast over the inputs.
    """
    c = np.asarray(bound, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    end = 4.0 * w * w * c * c
    disc = c * c - 2.0 * w * w
    t = 0.5 * (c + np.sqrt(np.maximum(disc, 0.0)))
    s = 2.0 * c - t
    interior = np.where(disc > 0, s * s * (t * t + w * w), 0.0)
    return np.maximum(end, interior)


def moment_sensitivity(
    bound_x: float | Sequence[float] | np.ndarray,
    bound_y: float,
    d: int | None = None,
    *,
    first: bool = False,
    first_scale: float | Sequence[float] | np.ndarray | None = None,
) -> float:
    r"""Exact :math:`\ell_2` sensitivity of :math:`\sum_i` :func:`row_moments`.

    With every coordinate bounded by :math:`c_j` (:math:`j = 1..d+1`, the last one the target),
    :math:`v^2 - v'^2 \in [-c_j^2, c_j^2]`, so the squares alone have
    :math:`\Delta_2^2 = \sum_{j} c_j^4`. With the weighted first moments :math:`w_j v`, the
    row's coordinates enter separately (coordinate :math:`j` changes only the pair
    :math:`(v_j^2, w_j v_j)`, and every coordinate can take its worst pair at once), so

    .. math::

        \Delta_2^2 = \sum_{j=1}^{d+1} G(c_j, w_j)

    with :math:`G` the exact largest change of one pair
    (:func:`moment_pair_sensitivity_squared`). For :math:`w_j \ge c_j / \sqrt 2` this is
    :math:`\sum_j 4 w_j^2 c_j^2`, the sensitivity of the weighted sums alone: the squares ride
    along at no cost. At :math:`w_j = 1` and :math:`c_j = 7.5` it is :math:`G = 3220` per
    coordinate, below the sum of the separate maxima :math:`c^4 + 4c^2 = 3389`.

    Parameters
    ----------
    bound_x : float or array of shape (d,)
    bound_y : float
    d : int or None
        Needed when ``bound_x`` is a single number.
    first : bool, default False
    first_scale : float or array of shape (d + 1,) or None, default None
        The weights :math:`w_j` of :func:`row_moments` (``None``: 1).

    Returns
    -------
    float
    """
    c = np.append(feature_bounds(bound_x, d), check_positive("bound_y", bound_y))
    if not first:
        return float(np.sqrt((c**4).sum()))
    w = first_scales(first_scale, c.size)
    return float(np.sqrt(moment_pair_sensitivity_squared(c, w).sum()))
