r"""Choosing the privacy parameter from a fitted accuracy curve (paper 001, Section V).

Zhang & Zhu (Section V, "Numerical Experiment", and contribution (iv) of Section I) measure the
empirical loss :math:`\bar C` of the trained classifier at several :math:`\alpha`, fit

.. math::

    L_{acc}(\alpha) = c_4 e^{-c_5 \alpha} + c_6, \qquad c_4, c_5, c_6 \in \mathbb{R}_+,

(their DVP fit: :math:`c_4 = 0.2, c_5 = 25`; PVP: :math:`c_4 = 20, c_5 = 20`;
:math:`c_6` the smallest measured loss) and model the utility of privacy as

.. math::

    U_{priv}(\alpha) = w_1 \ln \frac{w_2}{w_3 \alpha + w_4 \alpha^2},
    \qquad w = (0.02, 6, 9, 1),

decreasing and convex in :math:`\alpha` (smaller :math:`\alpha`, more privacy). They "select
the optimal privacy parameters by solving an optimization problem" but the text never writes
the problem down. The reading implemented here is the net utility

.. math::

    \alpha^\star = \arg\max_{\alpha \in [\alpha_{lo}, \alpha_{hi}]}
        J(\alpha), \qquad J(\alpha) = U_{priv}(\alpha) - L_{acc}(\alpha),

privacy utility minus accuracy loss, with :math:`w_1` as the trade-off weight. Two facts the
paper leaves implicit:

* :math:`J` has no maximiser on :math:`(0, \infty)`: :math:`U_{priv} \to +\infty` as
  :math:`\alpha \to 0` while :math:`L_{acc} \le c_4 + c_6`, so the answer depends on the
  search range. The default range is the paper's experimental one, :math:`[0.01, 1]` (its
  :math:`\alpha \in \{0.01, 0.1, 0.5, 1\}`; Theorem 4 also assumes :math:`\alpha \le 1`).
  On it, the paper's DVP curve gives an interior optimum at :math:`\alpha \approx 0.142`
  and its PVP curve one at :math:`\alpha \approx 0.453`.
* :math:`c_6` shifts :math:`J` by a constant and does not change :math:`\alpha^\star`.

Assumption 6 of the paper says the privacy utility *increases* with :math:`\alpha`; the model
it then uses decreases (as the text around it says). The model is what is implemented.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from dpfed._validation import DpfedInputError, check_positive

__all__ = [
    "PAPER_WEIGHTS",
    "AlphaChoice",
    "LossCurve",
    "choose_alpha",
    "fit_accuracy_loss",
    "privacy_utility",
]

#: The paper's utility weights (w1, w2, w3, w4).
PAPER_WEIGHTS = (0.02, 6.0, 9.0, 1.0)

#: Default search range for alpha: the paper's experimental range.
DEFAULT_RANGE = (0.01, 1.0)

_C5_MIN = 1e-12


@dataclass(frozen=True)
class LossCurve:
    r""":math:`L_{acc}(\alpha) = c_4 e^{-c_5\alpha} + c_6`.

    Parameters
    ----------
    c4 : float
        Amplitude :math:`c_4 \ge 0`.
    c5 : float
        Rate :math:`c_5 > 0`.
    c6 : float
        Asymptote :math:`c_6` (the paper has :math:`c_6 \ge 0`; any finite value is accepted,
        it does not affect :func:`choose_alpha`).
    rms : float, default nan
        Root-mean-square residual of the fit that produced the curve (``nan`` if none).
    """

    c4: float
    c5: float
    c6: float
    rms: float = math.nan

    def __post_init__(self) -> None:
        check_positive("c4", self.c4, allow_zero=True)
        check_positive("c5", self.c5)
        if not math.isfinite(float(self.c6)):
            raise DpfedInputError(f"c6 must be a finite number. Found {self.c6!r}.")

    def __call__(self, alpha: float | np.ndarray) -> float | np.ndarray:
        """Evaluate the curve at ``alpha`` (scalar or array)."""
        a = np.asarray(alpha, dtype=float)
        out = self.c4 * np.exp(-self.c5 * a) + self.c6
        return float(out) if out.ndim == 0 else out

    def derivative(self, alpha: float | np.ndarray) -> float | np.ndarray:
        r""":math:`L_{acc}'(\alpha) = -c_4 c_5 e^{-c_5\alpha}`."""
        a = np.asarray(alpha, dtype=float)
        out = -self.c4 * self.c5 * np.exp(-self.c5 * a)
        return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class AlphaChoice:
    r"""The chosen :math:`\alpha^\star` and the criterion there.

    Parameters
    ----------
    alpha : float
        :math:`\alpha^\star`.
    loss : float
        :math:`L_{acc}(\alpha^\star)`.
    utility : float
        :math:`U_{priv}(\alpha^\star)`.
    objective : float
        :math:`J(\alpha^\star) = U_{priv}(\alpha^\star) - L_{acc}(\alpha^\star)`.
    at_boundary : bool
        Whether the best grid point was an end of the search range (then :math:`\alpha^\star`
        is determined by the range, not by the trade-off).
    """

    alpha: float
    loss: float
    utility: float
    objective: float
    at_boundary: bool


def _as_vector(name: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    if isinstance(values, str | bytes):
        raise DpfedInputError(f"{name} must be a sequence of numbers. Found {values!r}.")
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise DpfedInputError(f"{name} must be a sequence of numbers. Found {values!r}.") from None
    if arr.ndim != 1:
        raise DpfedInputError(f"{name} must be one-dimensional. Found shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise DpfedInputError(f"{name} must be finite. Found {arr[bad]} at index {bad}.")
    return arr


def _check_weights(w: Sequence[float]) -> tuple[float, float, float, float]:
    try:
        items = [float(v) for v in w]
    except (TypeError, ValueError):
        raise DpfedInputError(f"w must be four numbers (w1, w2, w3, w4). Found {w!r}.") from None
    if len(items) != 4 or not all(math.isfinite(v) for v in items):
        raise DpfedInputError(f"w must be four finite numbers (w1, w2, w3, w4). Found {w!r}.")
    w1, w2, w3, w4 = items
    if w1 <= 0 or w2 <= 0 or w3 < 0 or w4 < 0 or (w3 == 0 and w4 == 0):
        raise DpfedInputError(
            "w must have w1 > 0, w2 > 0, w3 >= 0, w4 >= 0 and w3 + w4 > 0 (a decreasing "
            f"utility). Found {w!r}."
        )
    return w1, w2, w3, w4


def privacy_utility(
    alpha: float | np.ndarray, w: Sequence[float] = PAPER_WEIGHTS
) -> float | np.ndarray:
    r"""The paper's utility of privacy :math:`U_{priv}(\alpha) = w_1\ln\frac{w_2}{w_3\alpha +
    w_4\alpha^2}`.

    Parameters
    ----------
    alpha : float or numpy.ndarray
        :math:`\alpha > 0`.
    w : sequence of four floats, default (0.02, 6, 9, 1)
        :math:`w_1 > 0, w_2 > 0, w_3, w_4 \ge 0` (not both zero).

    Returns
    -------
    float or numpy.ndarray
        :math:`U_{priv}(\alpha)`, with the shape of ``alpha``.
    """
    w1, w2, w3, w4 = _check_weights(w)
    a = np.asarray(alpha, dtype=float)
    if not np.all(np.isfinite(a)) or not np.all(a > 0):
        raise DpfedInputError(f"alpha must be finite and > 0. Found {alpha!r}.")
    out = w1 * (math.log(w2) - np.log(w3 * a + w4 * a * a))
    return float(out) if out.ndim == 0 else out


def _projected_fit(a: np.ndarray, y: np.ndarray, c5: float) -> tuple[float, float, float]:
    """Least squares in (c4, c6) for fixed c5, with c4 >= 0: returns (sse, c4, c6)."""
    basis = np.exp(-c5 * a)
    design = np.column_stack((basis, np.ones_like(a)))
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    c4, c6 = float(coef[0]), float(coef[1])
    if not c4 >= 0.0:
        c4, c6 = 0.0, float(np.mean(y))
    resid = c4 * basis + c6 - y
    return float(resid @ resid), c4, c6


def fit_accuracy_loss(
    alphas: Sequence[float] | np.ndarray, losses: Sequence[float] | np.ndarray
) -> LossCurve:
    r"""Fit :math:`L_{acc}(\alpha) = c_4 e^{-c_5\alpha} + c_6` to measured (alpha, loss) points.

    The paper's model of the accuracy loss (paper 001, Section V: "by curve fitting").

    Least squares with ``scipy.optimize.curve_fit`` under the bounds :math:`c_4 \ge 0`,
    :math:`c_5 > 0` (``c6`` free). The start is found by variable projection: for fixed
    :math:`c_5` the model is linear in :math:`(c_4, c_6)`, so the residual is minimised in
    closed form over a log grid of :math:`c_5` (scaled to the spread of the alphas) and then by a
    bounded scalar search in :math:`\ln c_5`. The better of that and the ``curve_fit`` polish is
    returned.

    Parameters
    ----------
    alphas : sequence of float
        Privacy parameters :math:`\alpha_k > 0`, at least 3 distinct values.
    losses : sequence of float
        Measured losses, one per alpha.

    Returns
    -------
    LossCurve
        The fitted curve (with the RMS residual). Losses that do not decrease with alpha give
        :math:`c_4 = 0` (no trade-off to fit; :math:`c_5` is then meaningless).

    Raises
    ------
    DpfedInputError
        With fewer than 3 points (or distinct alphas), different lengths, non-finite values or
        a non-positive alpha.
    """
    a = _as_vector("alphas", alphas)
    y = _as_vector("losses", losses)
    if a.size != y.size:
        raise DpfedInputError(
            f"alphas and losses must have the same length. Found {a.size} and {y.size}."
        )
    if a.size < 3 or np.unique(a).size < 3:
        raise DpfedInputError(
            "fitting c4, c5, c6 needs at least 3 points with distinct alphas. "
            f"Found {a.size} points with {np.unique(a).size} distinct alphas."
        )
    if not np.all(a > 0):
        bad = int(np.flatnonzero(a <= 0)[0])
        raise DpfedInputError(f"alphas must be > 0. Found {a[bad]} at index {bad}.")

    spread = float(np.max(a) - np.min(a))
    grid = np.geomspace(1e-3 / spread, 1e3 / spread, 601)
    sses = np.array([_projected_fit(a, y, c)[0] for c in grid])
    k = int(np.argmin(sses))
    lo, hi = math.log(grid[max(k - 1, 0)]), math.log(grid[min(k + 1, grid.size - 1)])
    res = optimize.minimize_scalar(
        lambda u: _projected_fit(a, y, math.exp(u))[0],
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-13},
    )
    c5_vp = math.exp(float(res.x)) if res.fun <= sses[k] else float(grid[k])
    sse_vp, c4_vp, c6_vp = _projected_fit(a, y, c5_vp)
    best = (sse_vp, c4_vp, max(c5_vp, _C5_MIN), c6_vp)

    def model(x: np.ndarray, c4: float, c5: float, c6: float) -> np.ndarray:
        return c4 * np.exp(-c5 * x) + c6

    try:
        with warnings.catch_warnings():
            # the covariance is not used; a degenerate fit (flat data) cannot estimate it
            warnings.simplefilter("ignore", optimize.OptimizeWarning)
            popt, _ = optimize.curve_fit(
                model,
                a,
                y,
                p0=[c4_vp, max(c5_vp, 2 * _C5_MIN), c6_vp],
                bounds=([0.0, _C5_MIN, -np.inf], [np.inf, np.inf, np.inf]),
                method="trf",
                ftol=1e-15,
                xtol=1e-15,
                gtol=1e-15,
                maxfev=20000,
            )
    except (RuntimeError, ValueError):  # pragma: no cover - keep the projected fit
        pass
    else:
        resid = model(a, *popt) - y
        sse = float(resid @ resid)
        if sse <= best[0]:
            best = (sse, float(popt[0]), float(popt[1]), float(popt[2]))
    sse, c4, c5, c6 = best
    return LossCurve(c4=c4, c5=c5, c6=c6, rms=math.sqrt(sse / a.size))


def _check_grid(grid: Sequence[float] | np.ndarray | None) -> np.ndarray:
    if grid is None:
        return np.geomspace(DEFAULT_RANGE[0], DEFAULT_RANGE[1], 4001)
    g = _as_vector("grid", grid)
    if g.size < 2:
        raise DpfedInputError(f"grid must hold at least 2 alphas. Found {g.size}.")
    if not np.all(g > 0):
        raise DpfedInputError(f"grid alphas must be > 0. Found {float(np.min(g))}.")
    g = np.unique(g)
    if g.size < 2:
        raise DpfedInputError("grid must hold at least 2 distinct alphas.")
    return g


def choose_alpha(
    curve: LossCurve,
    *,
    w: Sequence[float] = PAPER_WEIGHTS,
    grid: Sequence[float] | np.ndarray | None = None,
) -> AlphaChoice:
    r"""The :math:`\alpha` maximising :math:`J(\alpha) = U_{priv}(\alpha) - L_{acc}(\alpha)`.

    Paper 001, Section V (privacy-accuracy trade-off) and contribution (iv) of Section I: the
    paper defines :math:`L_{acc}` and :math:`U_{priv}` but does not write its optimisation
    problem; the net utility is the reading implemented (module docstring).

    Evaluates :math:`J` on ``grid`` (default: 4001 log-spaced points on the paper's range
    :math:`[0.01, 1]`), then refines the best point by a bounded scalar search between its grid
    neighbours. The grid's ends are the search range: :math:`J \to +\infty` as
    :math:`\alpha \to 0`, so an unbounded search has no answer (module docstring).

    Parameters
    ----------
    curve : LossCurve
        The fitted :math:`L_{acc}` (:func:`fit_accuracy_loss`).
    w : sequence of four floats, default (0.02, 6, 9, 1)
        Utility weights of :func:`privacy_utility`.
    grid : sequence of float or None
        Candidate alphas (> 0); their range is the search range.

    Returns
    -------
    AlphaChoice
        :math:`\alpha^\star`, :math:`L_{acc}`, :math:`U_{priv}` and :math:`J` there, and whether
        the optimum sits at an end of the range.
    """
    if not isinstance(curve, LossCurve):
        raise DpfedInputError(f"curve must be a LossCurve. Found {type(curve).__name__}.")
    weights = _check_weights(w)
    g = _check_grid(grid)

    def objective(alpha: float | np.ndarray) -> float | np.ndarray:
        return privacy_utility(alpha, weights) - curve(alpha)

    values = np.asarray(objective(g), dtype=float)
    k = int(np.argmax(values))
    best_alpha, best_value = float(g[k]), float(values[k])
    lo, hi = float(g[max(k - 1, 0)]), float(g[min(k + 1, g.size - 1)])
    if hi > lo:
        res = optimize.minimize_scalar(
            lambda x: -float(objective(x)),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-12 * hi},
        )
        if -float(res.fun) > best_value:
            best_alpha, best_value = float(res.x), -float(res.fun)
    return AlphaChoice(
        alpha=best_alpha,
        loss=float(curve(best_alpha)),
        utility=float(privacy_utility(best_alpha, weights)),
        objective=best_value,
        at_boundary=k in (0, g.size - 1),
    )
