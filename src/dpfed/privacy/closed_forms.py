r"""Closed forms of Gaussian privacy: the classical bound and its proven range, basic and
advanced composition, the moments accountant's closed form and the exact (analytic) Gaussian
privacy profile.

These are the formulas the accountants of :mod:`dpfed.privacy.accountants` evaluate; nothing
here imports ``dp_accounting``. Everything is expressed in terms of the *noise multiplier*
:math:`z = \sigma / C`, the ratio of the noise standard deviation to the :math:`\ell_2`
sensitivity of the released quantity.

Notes
-----
Theorem 1 (the classical Gaussian mechanism; Dwork & Roth, Theorem A.1 / 3.22) is proved only
for a per-step :math:`\varepsilon \le 1`, i.e. for a noise multiplier
:math:`z \ge \sqrt{2 \ln(1.25 / \delta_{step})}`; :func:`check_classic` refuses releases
outside that range, naming it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from dpfed._lazy import lazy_module
from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive

if TYPE_CHECKING:
    from scipy import optimize
else:
    optimize = lazy_module("scipy.optimize")

__all__ = [
    "CLASSIC_MAX_EPSILON",
    "advanced_composition",
    "basic_composition",
    "check_classic",
    "check_multipliers",
    "classic_gaussian_epsilon",
    "classic_gaussian_sigma",
    "classic_range_message",
    "classic_step_epsilon",
    "corollary1_epsilon",
    "gaussian_delta",
    "gaussian_dp_epsilon",
    "in_classic_range",
    "moments_accountant_epsilon",
    "moments_epsilon",
]

#: Largest per-release epsilon for which the classical Gaussian bound is proved.
CLASSIC_MAX_EPSILON = 1.0

# Relative slack of the range check, for rounding only: a per-step epsilon of exactly 1 read back
# through z = sqrt(2 ln(1.25/delta)) / 1 may come out a few ulps above 1.
_CLASSIC_RTOL = 1e-9

# What to use instead, in every refusal.
_CLASSIC_ADVICE = "Use accountant 'pld' or 'rdp'."

# Real orders tau >= 1 searched by the moments accountant (the analytic minimiser is added).
_MOMENT_ORDERS = np.concatenate(
    (np.linspace(1.0, 100.0, 9901), np.geomspace(100.0, 1.0e8, 6001)[1:])
)


def _check_delta_step(name: str, value: object) -> float:
    """Per-release delta: a number in [0, 1) (0 is pure DP)."""
    try:
        v = float(value)  # type: ignore[arg-type]  # anything float() refuses is reported
    except (TypeError, ValueError):
        raise DpfedInputError(f"{name} must be a number. Found {value!r}.") from None
    if not (0.0 <= v < 1.0):
        raise DpfedInputError(f"{name} must be in the interval [0, 1). Found {value!r}.")
    return v


def _check_epsilons(name: str, epsilons: Sequence[float]) -> list[float]:
    if isinstance(epsilons, str | bytes):
        raise DpfedInputError(f"{name} must be a sequence of numbers. Found {epsilons!r}.")
    try:
        items = list(epsilons)
    except TypeError:
        raise DpfedInputError(
            f"{name} must be a sequence of numbers. Found {epsilons!r}."
        ) from None
    return [check_positive(f"{name}[{i}]", e, allow_zero=True) for i, e in enumerate(items)]


def check_multipliers(noise_multipliers: Sequence[float]) -> list[float]:
    if isinstance(noise_multipliers, str | bytes):
        raise DpfedInputError(
            f"noise_multipliers must be a sequence of numbers. Found {noise_multipliers!r}."
        )
    try:
        items = list(noise_multipliers)
    except TypeError:
        raise DpfedInputError(
            f"noise_multipliers must be a sequence of numbers. Found {noise_multipliers!r}."
        ) from None
    return [check_positive(f"noise_multipliers[{i}]", z) for i, z in enumerate(items)]


# --------------------------------------------------------------------------------------------
# the classical Gaussian bound's proven range
# --------------------------------------------------------------------------------------------


def classic_step_epsilon(z: float, delta_step: float) -> float:
    r"""The classical per-step epsilon :math:`\sqrt{2 \ln(1.25/\delta_{step})} / z`, unchecked."""
    return math.sqrt(2.0 * math.log(1.25 / delta_step)) / z


def in_classic_range(eps_step: float) -> bool:
    """Whether a classical per-step epsilon is inside the proved range (up to rounding)."""
    return eps_step <= CLASSIC_MAX_EPSILON * (1.0 + _CLASSIC_RTOL)


def _format_epsilon(eps: float) -> str:
    """An epsilon above 1 with enough digits not to read as 1."""
    return f"{eps:.3g}" if eps >= 1.0005 else f"{eps:.10g}"


def classic_range_message(
    subject: str,
    delta_step: float,
    found: str,
    *,
    unit: str = "step",
    advice: str = _CLASSIC_ADVICE,
) -> str:
    """The refusal of a figure or noise outside the classical Gaussian bound's proved range."""
    z_min = math.sqrt(2.0 * math.log(1.25 / delta_step))
    return (
        f"{subject} the classical Gaussian bound, proven only for a per-{unit} epsilon <= "
        f"{CLASSIC_MAX_EPSILON:g}, i.e. noise multiplier >= {z_min:.3g} at per-{unit} delta "
        f"{delta_step:g}; found {found}. {advice}"
    )


def check_classic(
    z_min: float, steps: int, delta_step: float, accountant: str, *, heterogeneous: bool = False
) -> None:
    """Raise if ``steps`` releases whose smallest multiplier is ``z_min``, read at per-step delta
    ``delta_step`` by accountant ``accountant``, leave the classical bound's proven range."""
    eps_step = classic_step_epsilon(z_min, delta_step)
    if in_classic_range(eps_step):
        return
    which = f", the smallest of the {steps} releases' multipliers" if heterogeneous else ""
    raise DpfedInputError(
        classic_range_message(
            f"accountant {accountant!r} uses",
            delta_step,
            f"noise multiplier {z_min:.6g} (per-step epsilon {_format_epsilon(eps_step)}){which}",
        )
    )


# --------------------------------------------------------------------------------------------
# closed forms
# --------------------------------------------------------------------------------------------


def classic_gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    r"""Per-release epsilon of the classic Gaussian mechanism (the paper's Theorem 1).

    A Gaussian mechanism with standard deviation :math:`\sigma` on a query of
    :math:`\ell_2` sensitivity :math:`C` is :math:`(\varepsilon, \delta)`-DP with

    .. math::

        \varepsilon = \frac{\sqrt{2 \ln(1.25 / \delta)}}{z}, \qquad z = \sigma / C ,

    proved for :math:`\varepsilon \le 1`, i.e. :math:`z \ge \sqrt{2 \ln(1.25/\delta)}`.

    Parameters
    ----------
    noise_multiplier : float
        :math:`z = \sigma / C > 0`.
    delta : float
        Per-release delta in (0, 1).

    Returns
    -------
    float
        The per-release epsilon, at most 1.

    Raises
    ------
    DpfedInputError
        For bad arguments, or if the formula's epsilon exceeds 1 (outside the proved range the
        formula is no guarantee; use the ``"pld"`` or ``"rdp"`` accountant).
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    d = check_open_unit("delta", delta)
    eps = classic_step_epsilon(z, d)
    if not in_classic_range(eps):
        raise DpfedInputError(
            classic_range_message(
                "classic_gaussian_epsilon evaluates",
                d,
                f"noise multiplier {z:.6g} (epsilon {_format_epsilon(eps)})",
                unit="release",
            )
        )
    return eps


def classic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    r"""Noise standard deviation of the classic Gaussian mechanism (inverse of Theorem 1).

    .. math::

        \sigma = \frac{\sqrt{2 \ln(1.25 / \delta)}\, C}{\varepsilon},
        \qquad 0 < \varepsilon \le 1 .

    Parameters
    ----------
    epsilon : float
        Per-release epsilon in (0, 1] (Theorem 1 is proved for :math:`\varepsilon \le 1`).
    delta : float
        Per-release delta in (0, 1).
    l2_sensitivity : float
        :math:`\ell_2` sensitivity :math:`C > 0` of the released quantity.

    Returns
    -------
    float
        The standard deviation :math:`\sigma`.

    Raises
    ------
    DpfedInputError
        For bad arguments, or for ``epsilon > 1`` (calibrate with
        :func:`calibrate_noise_multiplier` and ``"pld"`` or ``"rdp"`` instead).
    """
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    c = check_positive("l2_sensitivity", l2_sensitivity)
    if not in_classic_range(eps):
        raise DpfedInputError(
            classic_range_message(
                "classic_gaussian_sigma uses",
                d,
                f"epsilon {eps:g}",
                unit="release",
            )
        )
    return math.sqrt(2.0 * math.log(1.25 / d)) * c / eps


def basic_composition(epsilons: Sequence[float], deltas: Sequence[float]) -> tuple[float, float]:
    r"""Basic (sequential) composition of :math:`(\varepsilon_t, \delta_t)`-DP releases.

    .. math::

        \Big(\sum_t \varepsilon_t,\ \sum_t \delta_t\Big) .

    Parameters
    ----------
    epsilons : sequence of float
        Per-release epsilons, each >= 0.
    deltas : sequence of float
        Per-release deltas, each in [0, 1); same length as ``epsilons``.

    Returns
    -------
    tuple of float
        ``(epsilon_total, delta_total)``; ``(0.0, 0.0)`` for no releases.
    """
    eps = _check_epsilons("epsilons", epsilons)
    if isinstance(deltas, str | bytes):
        raise DpfedInputError(f"deltas must be a sequence of numbers. Found {deltas!r}.")
    try:
        dlt_items = list(deltas)
    except TypeError:
        raise DpfedInputError(f"deltas must be a sequence of numbers. Found {deltas!r}.") from None
    dlt = [_check_delta_step(f"deltas[{i}]", d) for i, d in enumerate(dlt_items)]
    if len(eps) != len(dlt):
        raise DpfedInputError(
            "epsilons and deltas must have the same length. "
            f"Found {len(eps)} epsilons and {len(dlt)} deltas."
        )
    return math.fsum(eps), math.fsum(dlt)


def advanced_composition(
    epsilons: Sequence[float],
    delta_step: Sequence[float] | float,
    delta_prime: float,
) -> tuple[float, float]:
    r"""Advanced composition of heterogeneous :math:`(\varepsilon_t, \delta_t)`-DP releases.

    For any :math:`\delta' > 0` the composition is :math:`(\varepsilon', \delta_{tot})`-DP with

    .. math::

        \varepsilon' = \sqrt{2 \ln(1/\delta') \sum_t \varepsilon_t^2}
                        + \sum_t \varepsilon_t \big(e^{\varepsilon_t} - 1\big),
        \qquad
        \delta_{tot} = \sum_t \delta_t + \delta' .

    With :math:`T` equal epsilons this is the paper's Corollary 1,
    :math:`\varepsilon' = \sqrt{2 T \ln(1/\delta')}\,\varepsilon
    + T \varepsilon (e^{\varepsilon} - 1)`.

    Parameters
    ----------
    epsilons : sequence of float
        Per-release epsilons, each >= 0.
    delta_step : sequence of float or float
        Per-release deltas in [0, 1); a single number applies to every release.
    delta_prime : float
        The slack :math:`\delta'` in (0, 1).

    Returns
    -------
    tuple of float
        ``(epsilon_prime, delta_total)``.
    """
    eps = _check_epsilons("epsilons", epsilons)
    dp = check_open_unit("delta_prime", delta_prime)
    if isinstance(delta_step, np.ndarray):
        delta_step = delta_step.tolist()
    if isinstance(delta_step, Sequence) and not isinstance(delta_step, str | bytes):
        dlt = [_check_delta_step(f"delta_step[{i}]", d) for i, d in enumerate(delta_step)]
        if len(dlt) != len(eps):
            raise DpfedInputError(
                "delta_step must be a number or have one entry per epsilon. "
                f"Found {len(dlt)} deltas for {len(eps)} epsilons."
            )
    else:
        dlt = [_check_delta_step("delta_step", delta_step)] * len(eps)
    sum_sq = math.fsum(e * e for e in eps)
    eps_prime = math.sqrt(2.0 * math.log(1.0 / dp) * sum_sq) + math.fsum(
        _times_expm1(e) for e in eps
    )
    return eps_prime, math.fsum(dlt) + dp


def _times_expm1(e: float) -> float:
    """:math:`e (e^e - 1)`, ``inf`` where it exceeds the float range (huge per-step epsilon)."""
    return e * math.expm1(e) if e < 700.0 else math.inf


def corollary1_epsilon(eps_step: float, steps: int, delta_prime: float) -> float:
    r"""The paper's Corollary 1 (advanced composition of ``steps`` equal releases).

    .. math::

        \varepsilon' = \sqrt{2 T \ln(1/\delta')}\, \varepsilon
                        + T \varepsilon \big(e^{\varepsilon} - 1\big),

    giving :math:`(\varepsilon', T\delta + \delta')`-DP overall.

    Parameters
    ----------
    eps_step : float
        Per-release epsilon :math:`\varepsilon > 0`.
    steps : int
        Number of releases :math:`T \ge 1`.
    delta_prime : float
        Slack :math:`\delta'` in (0, 1).

    Returns
    -------
    float
        :math:`\varepsilon'`.
    """
    e = check_positive("eps_step", eps_step)
    t = check_int("steps", steps, minimum=1)
    dp = check_open_unit("delta_prime", delta_prime)
    return math.sqrt(2.0 * t * math.log(1.0 / dp)) * e + t * _times_expm1(e)


def moments_epsilon(precision_sum: float, delta: float) -> float:
    """Moments-accountant epsilon for log moments ``tau (tau + 1) S / 2``, S = sum z_t^-2."""
    log_inv_delta = math.log(1.0 / delta)
    # f(tau) = S (tau + 1) / 2 + ln(1/delta) / tau is convex on tau > 0.
    tau_star = max(1.0, math.sqrt(2.0 * log_inv_delta / precision_sum))
    orders = np.append(_MOMENT_ORDERS, tau_star)
    values = 0.5 * precision_sum * (orders + 1.0) + log_inv_delta / orders
    return float(np.min(values))


def moments_accountant_epsilon(noise_multiplier: float, steps: int, delta: float) -> float:
    r"""Moments-accountant epsilon of ``steps`` Gaussian releases (Abadi et al., no sampling).

    The log moment of :math:`T` releases with noise multiplier :math:`z` is

    .. math::

        \alpha(\tau) = \frac{T \tau (\tau + 1)}{2 z^2}
        \qquad \Big(= \frac{T \tau(\tau+1) \varepsilon^2}{4 \ln(1.25/\delta)}
        \text{ for } z = \sqrt{2 \ln(1.25/\delta)} / \varepsilon\Big),

    and the accountant reports

    .. math::

        \varepsilon = \min_{\tau \ge 1} \frac{\alpha(\tau) + \ln(1/\delta)}{\tau},

    minimised over a fine grid of real orders together with the analytic minimiser
    :math:`\tau^* = \max\big(1, z \sqrt{2 \ln(1/\delta) / T}\big)`.

    Parameters
    ----------
    noise_multiplier : float
        :math:`z > 0`.
    steps : int
        :math:`T \ge 1`.
    delta : float
        Total delta in (0, 1).

    Returns
    -------
    float
        The epsilon.
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    t = check_int("steps", steps, minimum=1)
    d = check_open_unit("delta", delta)
    return moments_epsilon(t / (z * z), d)


def _gaussian_log_delta(mu: float, eps: float) -> float:
    r""":math:`\ln \delta(\varepsilon)` of the analytic Gaussian mechanism at :math:`\mu = 1/z`."""
    x = float(special.log_ndtr(mu / 2.0 - eps / mu))
    y = eps + float(special.log_ndtr(-mu / 2.0 - eps / mu))
    return x + math.log1p(-math.exp(y - x)) if y < x else -math.inf


def gaussian_delta(noise_multiplier: float, epsilon: float) -> float:
    r"""The exact :math:`\delta(\varepsilon)` of one Gaussian release of multiplier :math:`z`.

    The analytic Gaussian privacy profile (Balle and Wang 2018, eq. 6) at
    :math:`\mu = 1/z`,

    .. math::

        \delta(\varepsilon) = \Phi\left(\frac{\mu}{2} - \frac{\varepsilon}{\mu}\right)
        - e^{\varepsilon} \Phi\left(-\frac{\mu}{2} - \frac{\varepsilon}{\mu}\right),

    computed in log space (accurate down to the smallest positive double).

    Parameters
    ----------
    noise_multiplier : float
        :math:`z > 0`.
    epsilon : float
        :math:`\varepsilon \ge 0`.

    Returns
    -------
    float
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    eps = check_positive("epsilon", epsilon, allow_zero=True)
    return math.exp(_gaussian_log_delta(1.0 / z, eps))


def gaussian_dp_epsilon(precision_sum: float, delta: float) -> float:
    r"""Exact epsilon of Gaussian releases whose multipliers have
    :math:`\sum_t z_t^{-2} = ` ``precision_sum``.

    Gaussian mechanisms compose exactly to one Gaussian mechanism (Gaussian DP:
    :math:`\mu^2 = \sum_t \mu_t^2`, :math:`\mu_t = 1/z_t`, Dong, Roth and Su 2019), whose
    privacy profile is the analytic Gaussian one (Balle and Wang 2018, eq. 6),

    .. math::

        \delta(\varepsilon) = \Phi\left(\frac{\mu}{2} - \frac{\varepsilon}{\mu}\right)
        - e^{\varepsilon} \Phi\left(-\frac{\mu}{2} - \frac{\varepsilon}{\mu}\right),

    solved for :math:`\varepsilon` in log space by Brent's method to :math:`10^{-12}` (the
    computation of ``dp_accounting.get_epsilon_gaussian``, without its per-call overhead).
    This is the figure a privacy loss distribution of the same releases approaches as its
    discretisation goes to zero, with no discretisation error.
    """
    mu = math.sqrt(precision_sum)
    log_delta = math.log(delta)
    if _gaussian_log_delta(mu, 0.0) <= log_delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while _gaussian_log_delta(mu, hi) > log_delta:
        lo, hi = hi, hi * 10.0
    return float(
        optimize.brentq(lambda e: _gaussian_log_delta(mu, e) - log_delta, lo, hi, xtol=1e-12)
    )
