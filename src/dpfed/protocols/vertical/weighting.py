r"""How much the label holder trusts the passive parties: a weight chosen so that the private
model is never worse, on the training rows, than the label holder's model alone.

Under the sound mechanism the passive parties' models carry noise. When that noise is large
(few rows, many rounds, small epsilon), adding their scores to the label holder's can make the
model *worse* than the label holder's local-only model. The label holder cannot see the passive
parties' scores of their final models, but it can ask for three numbers about them.

Let :math:`a_i = \langle d_{0i}, x_{\mathrm{loc}}\rangle` be the scores of the label holder's
exact local-only model (what it learns without federating), :math:`\Delta a_i` the difference
between its federated block's scores and those, and :math:`v_{mi} = \langle d_{mi}, \tilde
x_m\rangle` party ``m``'s scores of its final released model. The label holder picks
:math:`\beta \in [0, 1]` for the predictor

.. math::

    P_\beta = a + \beta\,\delta, \qquad \delta = \Delta a + \textstyle\sum_m v_m,

i.e. its coefficients :math:`(1-\beta) x_{\mathrm{loc}} + \beta x_0` and every passive model
scaled by :math:`\beta`. By Taylor's theorem with a bound :math:`C_3 \ge |\ell'''|`, for every
:math:`\beta`

.. math::

    \frac1N \sum_i \ell(P_{\beta,i}) \le \frac1N \sum_i \ell(a_i)
    + \beta g + \frac{\beta^2}{2} H + \frac{\beta^3}{6} C_3 K,

with :math:`g = \frac1N\sum_i r_i \delta_i`, :math:`H = \frac1N\sum_i c_i \delta_i^2`,
:math:`K = \frac1N\sum_i |\delta_i|^3`, :math:`r_i = \ell'(a_i)` and :math:`c_i = \ell''(a_i)`
(for a loss without a bound on :math:`\ell'''`, :math:`c_i = S`, the smoothness bound, and
:math:`C_3 = 0`). For the logistic loss the remainder is bounded row by row:
:math:`K = \frac1N\sum_i u_i (\delta_i^+)^3 + w_i (\delta_i^-)^3` with :math:`u, w \in [0, 1]`
from :func:`logistic_remainder_coefficients` at :math:`a` for steps of at most
:math:`|\Delta a_i| + PV` (:math:`P` passive parties), sent with :math:`r` and :math:`c`.
The label holder keeps its own block fixed in the last round, so it knows
:math:`\Delta a` before the passive parties' last x-update; it broadcasts :math:`r`,
:math:`c` and, to the first passive party, :math:`\Delta a` clipped to :math:`\pm V` (zeros
to the others). Each passive party returns, for :math:`\delta_m = \Delta a + v_m` (first
party) or :math:`v_m`, its :math:`g_m = \frac1N\sum_i r_i \delta_{mi}`, :math:`H_m =
\frac1N\sum_i c_i \delta_{mi}^2` and :math:`K_m = \frac1N\sum_i |\delta_{mi}|^3` with
Gaussian noise (a release of its rows, accounted like the others: with rows clipped to
:math:`R` and models in the ball :math:`B_x`, :math:`|v| \le V = R B_x`; the party clips
:math:`|r_i| \le L`, :math:`0 \le c_i \le S`, :math:`u_i, w_i \in [0, 1]`,
:math:`|\Delta a_i| \le V`, so one row moves the
three statistics by at most :math:`2LV/N`, :math:`4 S V^2/N` and :math:`8 V^3/N`). The label
holder adds what clipping took off :math:`\Delta a` itself. Minkowski's inequality bounds the
totals by the parts (:math:`\sqrt H \le \sum_m \sqrt{H_m}`, likewise :math:`K^{1/3}`; exact for
one passive party), each part at its upper confidence bound (``confidence`` standard
deviations of its public noise).
:math:`\beta` minimises the resulting upper bound over :math:`[0, 1]`, so the chosen predictor's
training loss is below the local-only model's whenever the bounds hold: by construction, not by
tuning. It is 0 when the passive scores do not explain what the label holder's own model
cannot (:math:`g \ge 0` at its confidence bound), and near 1 when they do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from dpfed._lazy import lazy_module
from dpfed._validation import DpfedInputError
from dpfed.core.local import LocalSolveError
from dpfed.core.losses import Loss
from dpfed.core.rows import Matrix
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.vertical.mechanisms import ledger_event

if TYPE_CHECKING:
    from scipy import optimize
else:  # a fifth of a second to import: on first use (dpfed._lazy)
    optimize = lazy_module("scipy.optimize")

#: Share of one round's Gaussian-DP budget (``mu^2``) the statistics release gets: it is three
#: numbers whose sensitivities shrink as 1/N, so a small share is plenty.
STATISTICS_SHARE = 0.1
#: Standard deviations of the public noise added to each statistic before it is trusted.
CONFIDENCE = 2.0
#: The three statistics, in their release order.
STATISTICS = ("gradient", "curvature", "cubic")
#: Share of the release's budget (Gaussian DP's ``mu^2``) each statistic gets: the gradient
#: decides whether the passive scores help at all, the cubic remainder matters least.
STATISTICS_FRACTIONS = (0.6, 0.3, 0.1)


def third_derivative_bound(loss: Loss) -> float | None:
    r"""A bound :math:`C_3 \ge |\ell'''|` for the losses that have one, else None.

    Logistic: :math:`\sigma(1-\sigma)(1-2\sigma)` peaks at :math:`1/(6\sqrt3)`; squared: 0.
    """
    return {"logistic": LOGISTIC_THIRD_BOUND, "squared": 0.0}.get(loss.name)


#: Where the logistic loss's third derivative :math:`\sigma(1-\sigma)(1-2\sigma)` peaks,
#: :math:`z^* = -\ln(2 + \sqrt3)`, and its value there, :math:`C_3 = 1/(6\sqrt3)`.
LOGISTIC_THIRD_PEAK = -math.log(2.0 + math.sqrt(3.0))
LOGISTIC_THIRD_BOUND = 1.0 / (6.0 * math.sqrt(3.0))


def _logistic_third(z: np.ndarray) -> np.ndarray:
    r""":math:`\ell'''(z) = \sigma(z)(1-\sigma(z))(1-2\sigma(z))`, the same for either label."""
    from scipy.special import expit

    s = expit(z)
    return cast(np.ndarray, s * (1.0 - s) * (1.0 - 2.0 * s))


def _largest_third(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    r"""The largest :math:`\ell'''` of the logistic loss on each ``[low, high]``. It rises to
    its peak at :math:`z^*`, falls to its trough at :math:`-z^*` and rises after, so the
    largest is the peak where the interval holds :math:`z^*` and an end's value elsewhere."""
    ends = np.maximum(_logistic_third(low), _logistic_third(high))
    holds_peak = (low <= LOGISTIC_THIRD_PEAK) & (LOGISTIC_THIRD_PEAK <= high)
    return np.where(holds_peak, LOGISTIC_THIRD_BOUND, ends)


def logistic_remainder_coefficients(
    scores: np.ndarray, reach: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    r"""Per-row bounds of the logistic loss's cubic Taylor remainder at ``scores`` for steps
    of at most ``reach``, as fractions of :math:`C_3 = 1/(6\sqrt3)`.

    For a step :math:`t` from :math:`a` the remainder of the second-order expansion is
    :math:`\ell'''(\xi)\, t^3 / 6`, :math:`\xi` between :math:`a` and :math:`a + t`, and
    :math:`\ell'''(z) = \sigma(z)(1-\sigma(z))(1-2\sigma(z))` whatever the label. So for
    :math:`0 \le t \le \rho` it is at most :math:`C_3\, u\, t^3 / 6`, and for
    :math:`-\rho \le t \le 0` at most :math:`C_3\, w\, |t|^3 / 6`, with

    .. math::

        u = \max_{[a,\, a + \rho]} (\ell''')^+ / C_3, \qquad
        w = \max_{[a - \rho,\, a]} (-\ell''')^+ / C_3,

    both in :math:`[0, 1]`. Where the constant bound charges every row :math:`C_3 |t|^3`,
    these charge nothing to a step away from 0, where :math:`\ell'''` has the helpful sign
    (:math:`u = 0` for :math:`a \ge 0`, :math:`w = 0` for :math:`a \le 0`), and less to a
    step that stays far from the peak.

    Parameters
    ----------
    scores : ndarray, shape (N,)
        The expansion point :math:`a`.
    reach : float or ndarray, shape (N,)
        :math:`\rho \ge 0`, the largest step a row's score takes (one for every row, or
        each row's).

    Returns
    -------
    rising, falling : ndarray, shape (N,) each
        :math:`u` and :math:`w`.
    """
    steps = np.asarray(reach, dtype=np.float64)
    if not np.all(np.isfinite(steps) & (steps >= 0.0)):
        raise DpfedInputError(f"reach must be finite and >= 0. Found {np.min(steps)}.")
    a = np.asarray(scores, dtype=np.float64)
    rising = np.maximum(_largest_third(a, a + steps), 0.0) / LOGISTIC_THIRD_BOUND
    # the largest -l''' on [a - reach, a] is the largest l''' on [-a, -a + reach]: l''' is odd
    falling = np.maximum(_largest_third(-a, -a + steps), 0.0) / LOGISTIC_THIRD_BOUND
    return np.minimum(rising, 1.0), np.minimum(falling, 1.0)


def supports_weighting(loss: Loss) -> bool:
    """Whether the statistics have bounded sensitivity for ``loss`` (a bounded slope and
    curvature, and a convex loss or a curvature bound used in place of ``l''``)."""
    return (
        loss.lipschitz is not None
        and math.isfinite(loss.lipschitz)
        and math.isfinite(loss.smoothness)
    )


def fit_local_model(
    block: Matrix, labels: np.ndarray, loss: Loss, l2: float, *, tolerance: float | None = None
) -> np.ndarray:
    r"""The label holder's local-only model: :math:`\arg\min_x \sum_i \ell(\langle d_i, x
    \rangle; y_i) + \frac{l_2}{2}\|x\|^2` by L-BFGS (a block of any width, dense or sparse).

    Parameters
    ----------
    block : ndarray or sparse matrix, shape (N, d)
    labels : ndarray, shape (N,)
    loss : Loss
    l2 : float
        Ridge weight of the summed form (> 0).
    tolerance : float or None
        Refuse a solution whose gradient norm exceeds it (None: no check).

    Returns
    -------
    ndarray, shape (d,)

    Raises
    ------
    LocalSolveError
        If ``tolerance`` is given and not reached.
    """
    if not l2 > 0:
        raise DpfedInputError(f"the local-only model needs a ridge weight > 0. Found {l2}.")

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        scores = np.asarray(block @ x).reshape(-1)
        value = float(np.sum(loss.value(scores, labels))) + 0.5 * l2 * float(x @ x)
        gradient = np.asarray(block.T @ loss.derivative(scores, labels)).reshape(-1) + l2 * x
        return value, gradient

    n = block.shape[0]
    found = optimize.minimize(
        objective,
        np.zeros(block.shape[1]),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 5000, "gtol": 1e-9 * max(n, 1), "ftol": 1e-15},
    )
    x = np.asarray(found.x, dtype=float)
    if tolerance is not None:
        for _ in range(50):  # L-BFGS's own test is on the largest entry: polish to the norm
            norm = float(np.linalg.norm(objective(x)[1]))
            if norm <= tolerance:
                return x
            found = optimize.minimize(
                objective,
                x,
                jac=True,
                method="L-BFGS-B",
                options={
                    "maxiter": 5000,
                    "gtol": tolerance / (10 * math.sqrt(x.size)),
                    "ftol": 0.0,
                },
            )
            x = np.asarray(found.x, dtype=float)
        raise LocalSolveError(
            f"the local model did not reach gradient norm {tolerance:.3g} (found {norm:.3g}); "
            "it must not be released."
        )
    return x


@dataclass(frozen=True)
class WeightingRequest:
    r"""What the label holder broadcasts before the last x-update, shapes ``(N,)``.

    Attributes
    ----------
    gradient : ndarray, shape (N,)
        :math:`r_i = \ell'(a_i)` at its local-only scores :math:`a`.
    curvature : ndarray, shape (N,)
        :math:`c_i = \ell''(a_i)`, or the smoothness bound :math:`S` everywhere for a loss
        without a third-derivative bound.
    change : ndarray, shape (N,)
        The part of :math:`\Delta a` this party adds to its scores (zeros but for the first
        passive party).
    rising, falling : ndarray, shape (N,), or None
        :func:`logistic_remainder_coefficients` at :math:`a`: the cubic statistic is then
        :math:`K = \frac1N \sum_i u_i (\delta_i^+)^3 + w_i (\delta_i^-)^3` in place of
        :math:`\frac1N \sum_i |\delta_i|^3` (each row's term still in :math:`[0, |\delta_i|^3]`,
        so the sensitivity is the same). None: the constant bound.
    """

    gradient: np.ndarray
    curvature: np.ndarray
    change: np.ndarray
    rising: np.ndarray | None = None
    falling: np.ndarray | None = None

    @classmethod
    def at(
        cls,
        loss: Loss,
        scores: np.ndarray,
        labels: np.ndarray,
        change: np.ndarray,
        reach: np.ndarray | float | None = None,
    ) -> WeightingRequest:
        """The request at the label holder's local-only ``scores``; with a ``reach`` (the
        largest step of each row's score, shape ``(N,)`` or one for all) and the logistic
        loss, with its per-row remainder coefficients (:func:`logistic_remainder_coefficients`).
        """
        gradient = np.asarray(loss.derivative(scores, labels), dtype=float)
        if third_derivative_bound(loss) is None:
            curvature = np.full(scores.shape, float(loss.smoothness))
        else:
            curvature = np.asarray(loss.second_derivative(scores, labels), dtype=float)
        rising = falling = None
        if reach is not None and loss.name == "logistic":
            rising, falling = logistic_remainder_coefficients(scores, reach)
        return cls(gradient, curvature, np.asarray(change, dtype=float), rising, falling)

    def without_change(self) -> WeightingRequest:
        """The same derivatives with no share of the label holder's change."""
        return WeightingRequest(
            self.gradient, self.curvature, np.zeros_like(self.change), self.rising, self.falling
        )

    def cubic(self, steps: np.ndarray) -> float:
        r""":math:`\sum_i u_i (t_i^+)^3 + w_i (t_i^-)^3` of ``steps`` :math:`t` (shape
        ``(N,)``), the coefficients clipped to :math:`[0, 1]`; :math:`\sum_i |t_i|^3` without
        them."""
        if self.rising is None or self.falling is None:
            return float(np.sum(np.abs(steps) ** 3))
        rising = np.clip(self.rising, 0.0, 1.0)
        falling = np.clip(self.falling, 0.0, 1.0)
        return float(rising @ np.maximum(steps, 0.0) ** 3 + falling @ np.maximum(-steps, 0.0) ** 3)


@dataclass(frozen=True)
class StatisticsRelease:
    r"""A passive party's release of :math:`(g_m, H_m, K_m)`, statistic :math:`k` divided by
    its sensitivity and multiplied by :math:`\sqrt{f_k}` (:data:`STATISTICS_FRACTIONS`, summing
    to 1), so that one row moves the vector by at most 1 in L2 and statistic :math:`k` gets the
    share :math:`f_k` of the release's Gaussian-DP budget.

    Parameters
    ----------
    n_samples : int
        :math:`N`.
    score_bound : float
        :math:`V = R B_x`, the largest score a row can have.
    lipschitz, smoothness : float
        :math:`L`, :math:`S`: the party clips the broadcast :math:`r` to :math:`[-L, L]` and
        :math:`c` to :math:`[0, S]`, so a dishonest label holder cannot raise the sensitivity.
    noise_multiplier : float
        Of the vector release (its standard deviation: the L2 sensitivity is 1).
    """

    n_samples: int
    score_bound: float
    lipschitz: float
    smoothness: float
    noise_multiplier: float

    @property
    def sensitivities(self) -> np.ndarray:
        """Sensitivity of each statistic, shape ``(3,)``: ``2LV/N, 4SV^2/N, 8V^3/N``."""
        v, n = self.score_bound, self.n_samples
        return np.array([2.0 * self.lipschitz * v, 4.0 * self.smoothness * v * v, 8.0 * v**3]) / n

    @property
    def scales(self) -> np.ndarray:
        """What one released unit is worth in each statistic's units, shape ``(3,)``."""
        return cast(np.ndarray, self.sensitivities / np.sqrt(np.array(STATISTICS_FRACTIONS)))

    @property
    def release(self) -> GaussianRelease:
        return GaussianRelease.from_multiplier("statistics", 1.0, self.noise_multiplier)

    def event(self, party: str, round: int) -> PrivacyEvent:
        """The ledger entry of one release by ``party`` in ``round``."""
        return ledger_event(party, round, self.release, coordinates=len(STATISTICS))

    def statistics(self, scores: np.ndarray, request: WeightingRequest) -> np.ndarray:
        """The exact normalised statistics of ``scores`` (shape ``(N,)``), shape ``(3,)``."""
        if scores.shape != (self.n_samples,):
            raise DpfedInputError(
                f"scores must have shape ({self.n_samples},). Found {scores.shape}."
            )
        for name in ("gradient", "curvature", "change", "rising", "falling"):
            value = getattr(request, name)
            if value is not None and np.shape(value) != (self.n_samples,):
                raise DpfedInputError(
                    f"the request's {name} must have shape ({self.n_samples},). "
                    f"Found {np.shape(value)}."
                )
        bound = self.score_bound
        v = np.clip(scores, -bound, bound) + np.clip(request.change, -bound, bound)
        r = np.clip(request.gradient, -self.lipschitz, self.lipschitz)
        c = np.clip(request.curvature, 0.0, self.smoothness)
        exact = np.array([r @ v, c @ (v * v), request.cubic(v)]) / self.n_samples
        return cast(np.ndarray, exact / self.scales)

    def apply(
        self, scores: np.ndarray, request: WeightingRequest, rng: np.random.Generator
    ) -> np.ndarray:
        """The released (noisy, normalised) statistics, shape ``(3,)``."""
        return self.release.noisy(rng, self.statistics(scores, request))

    def upper(self, released: np.ndarray, confidence: float = CONFIDENCE) -> np.ndarray:
        """Each statistic in its own units at ``confidence`` noise standard deviations above
        the released value (the curvature and cubic terms floored at 0), shape ``(3,)``."""
        values: np.ndarray = np.asarray(released, dtype=float) + confidence * self.release.sigma
        values = values * self.scales
        values[1:] = np.maximum(values[1:], 0.0)
        return values


@dataclass(frozen=True)
class PassiveWeight:
    """The label holder's choice and the bounds behind it (for the result)."""

    weight: float
    gradient: float
    curvature: float
    cubic: float
    predicted_change: float

    def as_dict(self) -> dict[str, float]:
        return {
            "weight": self.weight,
            "gradient_bound": self.gradient,
            "curvature_bound": self.curvature,
            "cubic_bound": self.cubic,
            "predicted_change_bound": self.predicted_change,
        }


def choose_passive_weight(
    *,
    own_change: np.ndarray,
    request: WeightingRequest,
    upper_bounds: Sequence[np.ndarray],
    c3: float,
) -> PassiveWeight:
    r"""The :math:`\beta \in [0, 1]` minimising the upper bound of the module docstring.

    Parameters
    ----------
    own_change : ndarray, shape (N,)
        The part of :math:`\Delta a` (its federated scores minus its local-only scores) the
        first passive party's statistics do not hold: what clipping took off.
    request : WeightingRequest
        The :math:`r, c` it broadcast.
    upper_bounds : sequence of ndarray, shape (3,) each
        Per passive party, :meth:`StatisticsRelease.upper` of its released statistics.
    c3 : float
        :math:`C_3` (0 for a loss without a third-derivative bound, whose ``c`` is then the
        smoothness bound).

    Returns
    -------
    PassiveWeight
    """
    n = own_change.shape[0]
    g = float(request.gradient @ own_change) / n + sum(float(u[0]) for u in upper_bounds)
    root_h = math.sqrt(max(float(request.curvature @ own_change**2) / n, 0.0))
    root_h += sum(math.sqrt(float(u[1])) for u in upper_bounds)
    cube_root_k = max(request.cubic(own_change) / n, 0.0) ** (1.0 / 3.0)
    cube_root_k += sum(float(u[2]) ** (1.0 / 3.0) for u in upper_bounds)
    h, k = root_h * root_h, cube_root_k**3
    cubic = c3 * k
    if g >= 0.0:
        beta = 0.0
    elif cubic > 0.0:
        # the positive root of g + beta h + beta^2 cubic / 2 = 0
        beta = (-h + math.sqrt(h * h - 2.0 * cubic * g)) / cubic
    elif h > 0.0:
        beta = -g / h
    else:
        beta = 1.0
    beta = min(max(beta, 0.0), 1.0)
    change = beta * g + 0.5 * beta * beta * h + beta**3 * cubic / 6.0
    return PassiveWeight(beta, g, h, k, change)
