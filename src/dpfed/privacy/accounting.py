r"""Privacy accounting for repeated Gaussian releases.

Two families of accountants are offered:

* numerical accountants from ``dp_accounting``: ``"pld"`` (privacy loss distributions, tight up
  to a pessimistic discretisation) and ``"rdp"`` (Rényi DP);
* the closed forms used by the paper being implemented (Hu et al., AAAI 2020, "Learning
  privately over distributed features: an ADMM sharing approach"): ``"advanced"`` (Theorem 1
  per step, Corollary 1 over the steps), ``"basic"`` (Theorem 1 per step, basic composition) and
  ``"moments"`` (the moments accountant of Abadi et al. in closed form for the Gaussian).

Everything is expressed in terms of the *noise multiplier* :math:`z = \sigma / C`, the ratio of
the noise standard deviation to the :math:`\ell_2` sensitivity of the released quantity.

Notes
-----
Theorem 1 (the classical Gaussian mechanism; Dwork & Roth, Theorem A.1 / 3.22) is proved only
for a per-step :math:`\varepsilon \le 1`, i.e. for a noise multiplier

.. math::

    z \ge z_{min}(\delta_{step}) = \sqrt{2 \ln(1.25 / \delta_{step})}

(Dwork & Roth state :math:`\varepsilon < 1`; the boundary follows by continuity of the Gaussian
mechanism's privacy profile in :math:`\sigma` and :math:`\varepsilon`). Outside that range the
formula is not a guarantee, and it is false for small noise: at :math:`\delta = 10^{-5}` it
under-states the exact Gaussian epsilon once the per-step epsilon exceeds about 8.4 (noise
multiplier below about 0.57); calibrating ``"basic"`` to epsilon 20 for one step would give
noise whose exact epsilon is 25.4. Hence every function here that rests on the classical bound
(:func:`classic_gaussian_epsilon`, :func:`classic_gaussian_sigma`, the ``"advanced"`` and
``"basic"`` accountants of :func:`gaussian_epsilon`, :func:`gaussian_epsilon_heterogeneous`,
:func:`gaussian_releases_epsilon` and :func:`calibrate_noise_multiplier`) raises
:class:`~dpfed._validation.DpfedInputError` when a release's per-step epsilon would exceed 1,
naming the range; the numerical accountants ``"pld"`` and ``"rdp"`` hold for every noise
multiplier. :func:`check_classic_range` performs the check for a planned sequence of releases.
Inside the range the figures are those of the formulas below, unchanged.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from scipy import special

from dpfed._lazy import lazy_module
from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.coupling import epsilon_with_coupling

if TYPE_CHECKING:
    import dp_accounting
    from dp_accounting import dp_event
    from dp_accounting.dp_event import DpEvent as DpEvent  # re-exported for type hints
    from dp_accounting.pld import common as pld_common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
    from scipy import optimize
else:  # about a second to import: on first use only (dpfed._lazy)
    dp_accounting = lazy_module("dp_accounting")
    dp_event = lazy_module("dp_accounting.dp_event")
    pld_lib = lazy_module("dp_accounting.pld.privacy_loss_distribution")
    pld_common = lazy_module("dp_accounting.pld.common")
    rdp_lib = lazy_module("dp_accounting.rdp.rdp_privacy_accountant")
    optimize = lazy_module("scipy.optimize")

__all__ = [
    "ACCOUNTANTS",
    "CLASSIC_ACCOUNTANTS",
    "CLASSIC_MAX_EPSILON",
    "COUPLED_ACCOUNTANTS",
    "MECHANISMS",
    "NUMERICAL_ACCOUNTANTS",
    "PURE_MECHANISMS",
    "RDP_MECHANISMS",
    "Release",
    "advanced_composition",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_multiplier",
    "as_release",
    "basic_composition",
    "calibrate_noise_multiplier",
    "check_accountant",
    "check_classic_range",
    "classic_gaussian_epsilon",
    "classic_gaussian_sigma",
    "corollary1_epsilon",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_epsilon_heterogeneous",
    "gaussian_releases_epsilon",
    "moments_accountant_epsilon",
    "pure_epsilon",
    "rdp_epsilon",
    "rdp_orders",
    "release_event",
    "releases_epsilon",
    "releases_event",
]

ACCOUNTANTS = ("pld", "rdp", "advanced", "basic", "moments")

#: The accountants built on the classical Gaussian bound (Theorem 1 per step).
CLASSIC_ACCOUNTANTS = ("advanced", "basic")

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

# Relative tolerance (in noise-multiplier space) of calibrate_noise_multiplier.
_CALIBRATION_RTOL = 1e-4


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------


def check_accountant(accountant: str) -> str:
    """Return ``accountant`` if it is one of :data:`ACCOUNTANTS`, else raise.

    Raises
    ------
    DpfedInputError
        If ``accountant`` is not a known accountant name.
    """
    if not isinstance(accountant, str) or accountant not in ACCOUNTANTS:
        raise DpfedInputError(f"accountant must be one of {ACCOUNTANTS}. Found {accountant!r}.")
    return accountant


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


def _check_multipliers(noise_multipliers: Sequence[float]) -> list[float]:
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


def _classic_step_epsilon(z: float, delta_step: float) -> float:
    r"""The classical per-step epsilon :math:`\sqrt{2 \ln(1.25/\delta_{step})} / z`, unchecked."""
    return math.sqrt(2.0 * math.log(1.25 / delta_step)) / z


def in_classic_range(eps_step: float) -> bool:
    """Whether a classical per-step epsilon is inside the proved range (up to rounding)."""
    return eps_step <= CLASSIC_MAX_EPSILON * (1.0 + _CLASSIC_RTOL)


def _classic_delta_step(accountant: str, steps: int, delta: float) -> float:
    r"""Per-step delta of a classical accountant: :math:`\delta/T` (basic), :math:`\delta/(2T)`
    (advanced)."""
    return delta / (2.0 * steps) if accountant == "advanced" else delta / steps


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


def _check_classic(
    z_min: float, steps: int, delta: float, accountant: str, *, heterogeneous: bool = False
) -> None:
    """Raise if ``steps`` releases whose smallest multiplier is ``z_min`` leave the range."""
    if accountant not in CLASSIC_ACCOUNTANTS:
        return
    d_step = _classic_delta_step(accountant, steps, delta)
    eps_step = _classic_step_epsilon(z_min, d_step)
    if in_classic_range(eps_step):
        return
    which = f", the smallest of the {steps} releases' multipliers" if heterogeneous else ""
    raise DpfedInputError(
        classic_range_message(
            f"accountant {accountant!r} uses",
            d_step,
            f"noise multiplier {z_min:.6g} (per-step epsilon {_format_epsilon(eps_step)}){which}",
        )
    )


def check_classic_range(
    noise_multipliers: Sequence[float], delta: float, *, accountant: str
) -> None:
    r"""Refuse Gaussian releases that a classical accountant cannot account for.

    The ``"basic"`` and ``"advanced"`` accountants read each of the :math:`T` releases through
    the classical Gaussian bound at :math:`\delta_{step} = \delta/T` (basic) or
    :math:`\delta/(2T)` (advanced), which is proved only for

    .. math::

        \varepsilon_t = \frac{\sqrt{2 \ln(1.25/\delta_{step})}}{z_t} \le 1
        \quad\Longleftrightarrow\quad
        \min_t z_t \ge \sqrt{2 \ln(1.25/\delta_{step})} .

    Every other accountant (and an empty sequence) passes.

    Parameters
    ----------
    noise_multipliers : sequence of float
        One multiplier :math:`z_t > 0` per release.
    delta : float
        Total delta in (0, 1).
    accountant : str
        One of :data:`ACCOUNTANTS`.

    Raises
    ------
    DpfedInputError
        For bad arguments, or if a release's classical per-step epsilon exceeds 1 (the message
        names the range and the release found outside it).
    """
    zs = _check_multipliers(noise_multipliers)
    d = check_open_unit("delta", delta)
    acc = check_accountant(accountant)
    if zs:
        _check_classic(min(zs), len(zs), d, acc, heterogeneous=len(set(zs)) > 1)


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
    eps = _classic_step_epsilon(z, d)
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


def _moments_epsilon(precision_sum: float, delta: float) -> float:
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
    return _moments_epsilon(t / (z * z), d)


# --------------------------------------------------------------------------------------------
# accountant front ends
# --------------------------------------------------------------------------------------------


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


def _gaussian_dp_epsilon(precision_sum: float, delta: float) -> float:
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


def analytic_gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """Epsilon at ``delta`` of one Gaussian release of multiplier ``noise_multiplier``: the
    analytic Gaussian mechanism's (Balle and Wang 2018; ``dp_accounting.get_epsilon_gaussian``).
    """
    return float(dp_accounting.get_epsilon_gaussian(noise_multiplier, delta))


def analytic_gaussian_multiplier(epsilon: float, delta: float) -> float:
    """The smallest multiplier of one Gaussian release that is (``epsilon``, ``delta``)-DP
    (the analytic Gaussian mechanism; ``dp_accounting.get_sigma_gaussian``)."""
    return float(dp_accounting.get_sigma_gaussian(epsilon, delta))


def rdp_orders() -> np.ndarray:
    """dp-accounting's default Rényi orders, shape ``(n_orders,)``."""
    return np.asarray(rdp_lib.DEFAULT_RDP_ORDERS, dtype=np.float64)


def rdp_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: float) -> float:
    """Epsilon at ``delta`` of a Rényi DP curve ``rdp`` at ``orders`` (both shape
    ``(n_orders,)``), by dp-accounting's conversion (``compute_epsilon``)."""
    eps, _ = rdp_lib.compute_epsilon(orders, rdp, delta)
    return float(eps)


def _make_dpa_accountant(accountant: str) -> dp_accounting.PrivacyAccountant:
    if accountant == "pld":
        return dp_accounting.pld.PLDAccountant()
    return dp_accounting.rdp.RdpAccountant()


def _homogeneous_event(noise_multiplier: float, steps: int) -> dp_event.DpEvent:
    return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_multiplier), steps)


def _gaussian_epsilon(z: float, t: int, d: float, accountant: str) -> float:
    """gaussian_epsilon without validation; ``inf`` (no guarantee) outside the classical range.

    ``inf`` is what a bisection over the noise multiplier needs: the classical accountants
    certify nothing below :math:`z_{min}`, so the map stays decreasing and never reaches a
    finite target there.
    """
    if accountant == "pld":
        return _gaussian_dp_epsilon(t / (z * z), d)
    if accountant == "rdp":
        acc = _make_dpa_accountant(accountant)
        acc.compose(_homogeneous_event(z, t))
        return float(acc.get_epsilon(d))
    if accountant in CLASSIC_ACCOUNTANTS:
        eps_step = _classic_step_epsilon(z, _classic_delta_step(accountant, t, d))
        if not in_classic_range(eps_step):
            return math.inf
        if accountant == "advanced":
            return corollary1_epsilon(eps_step, t, d / 2.0)
        return t * eps_step
    return _moments_epsilon(t / (z * z), d)


def gaussian_epsilon(
    noise_multiplier: float, steps: int, delta: float, *, accountant: str = "pld"
) -> float:
    r"""Epsilon of ``steps`` compositions of a Gaussian mechanism at total delta ``delta``.

    Accountants:

    ``"pld"``
        Optimal accounting: ``steps`` Gaussian releases compose exactly to one with
        multiplier :math:`z / \sqrt{T}`, whose epsilon is the analytic Gaussian one
        (:func:`_gaussian_dp_epsilon`; the limit of dp-accounting's ``PLDAccountant`` as its
        discretisation goes to zero, and never above it).
    ``"rdp"``
        ``dp_accounting.rdp.RdpAccountant`` with its default orders, likewise.
    ``"advanced"``
        Theorem 1 per step with :math:`\delta_{step} = \delta / (2T)`, then Corollary 1 with
        :math:`\delta' = \delta / 2`:

        .. math::

            \varepsilon_{step} = \frac{\sqrt{2 \ln(2.5 T / \delta)}}{z}, \qquad
            \varepsilon = \sqrt{2 T \ln(2/\delta)}\, \varepsilon_{step}
            + T \varepsilon_{step} (e^{\varepsilon_{step}} - 1).

    ``"basic"``
        Theorem 1 per step with :math:`\delta_{step} = \delta / T`, then
        :math:`\varepsilon = T \varepsilon_{step}`.
    ``"moments"``
        :func:`moments_accountant_epsilon`.

    ``"advanced"`` and ``"basic"`` need :math:`\varepsilon_{step} \le 1`, i.e.
    :math:`z \ge \sqrt{2 \ln(1.25/\delta_{step})}` (:func:`check_classic_range`).

    Parameters
    ----------
    noise_multiplier : float
        :math:`z = \sigma / C > 0`.
    steps : int
        Number of releases :math:`T \ge 1`.
    delta : float
        Total delta in (0, 1).
    accountant : str, default "pld"
        One of :data:`ACCOUNTANTS`.

    Returns
    -------
    float
        The epsilon.

    Raises
    ------
    DpfedInputError
        For bad arguments, or with ``"advanced"``/``"basic"`` when the classical per-step
        epsilon exceeds 1.
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    t = check_int("steps", steps, minimum=1)
    d = check_open_unit("delta", delta)
    acc = check_accountant(accountant)
    _check_classic(z, t, d, acc)
    return _gaussian_epsilon(z, t, d, acc)


def _bisect_decreasing(
    func: Callable[[float], float], target: float, *, rtol: float = 1e-12
) -> float:
    """Smallest x > 0 (to ``rtol``) with func(x) <= target, func decreasing in x."""
    lo = hi = 1.0
    while func(hi) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e300:
            raise DpfedInputError(f"epsilon {target!r} cannot be reached by any noise multiplier.")
    while func(lo) <= target:
        hi, lo = lo, lo / 2.0
        if lo < 1e-300:
            return hi
    # invariant: func(lo) > target >= func(hi)
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if func(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _check_classic_target(eps: float, d: float, t: int, acc: str) -> None:
    """Refuse a target above what a classical accountant certifies over ``t`` steps."""
    if acc not in CLASSIC_ACCOUNTANTS:
        return
    limit = (
        corollary1_epsilon(CLASSIC_MAX_EPSILON, t, d / 2.0)
        if acc == "advanced"
        else t * CLASSIC_MAX_EPSILON
    )
    if eps > limit * (1.0 + _CLASSIC_RTOL):
        raise DpfedInputError(
            classic_range_message(
                f"accountant {acc!r} uses",
                _classic_delta_step(acc, t, d),
                f"target epsilon {eps:g}, above the {limit:.4g} it certifies there over "
                f"{t} step{'s' if t > 1 else ''} at delta {d:g}",
            )
        )


def _calibrate_rdp(eps: float, d: float, t: int, z_exact: float) -> float | None:
    """The RDP accountant's multiplier by ``dp_accounting.calibrate_dp_mechanism`` (see
    :func:`calibrate_noise_multiplier`), ``None`` if no bracket was found."""
    z_moments = _bisect_decreasing(lambda z: _moments_epsilon(t / (z * z), d), eps, rtol=1e-6)
    lo = 0.9 * z_exact
    hi = 1.25 * max(z_moments, z_exact)
    tol = _CALIBRATION_RTOL * z_exact
    for _ in range(60):
        try:
            z = dp_accounting.calibrate_dp_mechanism(
                lambda: _make_dpa_accountant("rdp"),
                lambda z: _homogeneous_event(z, t),
                eps,
                d,
                bracket_interval=dp_accounting.ExplicitBracketInterval(lo, hi),
                tol=tol,
            )
        except ValueError:  # the bracket did not contain the solution: widen it
            lo, hi = lo / 2.0, hi * 2.0
            continue
        return float(z)
    return None  # pragma: no cover - only for pathological inputs


def calibrate_noise_multiplier(
    epsilon: float, delta: float, steps: int, *, accountant: str = "pld"
) -> float:
    r"""Smallest noise multiplier whose ``gaussian_epsilon`` is at most ``epsilon``.

    Solves

    .. math::

        z^\star = \min \{ z > 0 : \varepsilon_{acc}(z, T, \delta) \le \varepsilon \}.

    For ``"pld"`` it is exact: :math:`z^\star = \sqrt{T}\, \sigma^\star(\varepsilon, \delta)`,
    the analytic-Gaussian multiplier of one release (``dp_accounting.get_sigma_gaussian``).
    For ``"rdp"`` it uses ``dp_accounting.calibrate_dp_mechanism`` on the bracket
    :math:`[0.9\, z_{exact},\ 1.25 \max(z_{moments}, z_{exact})]`, where :math:`z_{exact}` is
    the exact analytic-Gaussian multiplier for :math:`T` releases (a lower bound for both
    accountants) and :math:`z_{moments}` the moments-accountant one (usually an upper bound);
    the bracket is widened if needed. The tolerance is :math:`10^{-4} z_{exact}`. For the closed
    forms it bisects the monotone map :math:`z \mapsto \varepsilon` to relative precision
    :math:`10^{-12}`.

    The classical accountants certify at most their figure at the edge of the proved range,
    per-step epsilon 1 (:func:`check_classic_range`):

    .. math::

        \varepsilon_{max} = T \ (\texttt{"basic"}), \qquad
        \varepsilon_{max} = \sqrt{2 T \ln(2/\delta)} + T (e - 1) \ (\texttt{"advanced"},
        \text{Corollary 1 at } \varepsilon_{step} = 1);

    a larger target is refused, and the bisection treats multipliers below the range as
    certifying nothing (epsilon :math:`+\infty`).

    Parameters
    ----------
    epsilon : float
        Target epsilon > 0.
    delta : float
        Total delta in (0, 1).
    steps : int
        Number of releases :math:`T \ge 1`.
    accountant : str, default "pld"
        One of :data:`ACCOUNTANTS`.

    Returns
    -------
    float
        A noise multiplier :math:`z` with ``gaussian_epsilon(z, steps, delta,
        accountant=accountant) <= epsilon``.

    Raises
    ------
    DpfedInputError
        For bad arguments, or with ``"advanced"``/``"basic"`` for a target above
        :math:`\varepsilon_{max}` (it would need a per-step epsilon above 1).
    """
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    t = check_int("steps", steps, minimum=1)
    acc = check_accountant(accountant)

    _check_classic_target(eps, d, t, acc)
    if acc not in ("pld", "rdp"):
        return _bisect_decreasing(lambda z: _gaussian_epsilon(z, t, d, acc), eps)

    # T Gaussian releases with multiplier z are one Gaussian release with multiplier z/sqrt(T).
    z_exact = float(dp_accounting.get_sigma_gaussian(eps, d)) * math.sqrt(t)
    if acc == "pld":
        # exact: nudge past the root finder's tolerance so the figure certifies the target
        while _gaussian_epsilon(z_exact, t, d, acc) > eps:
            z_exact *= 1.0 + 1e-12
        return z_exact
    z = _calibrate_rdp(eps, d, t, z_exact)
    if z is not None:
        return z
    raise DpfedInputError(  # pragma: no cover - only for pathological inputs
        f"could not calibrate a noise multiplier for epsilon={epsilon!r}, delta={delta!r}, "
        f"steps={steps!r} with accountant {accountant!r}."
    )


def gaussian_epsilon_heterogeneous(
    noise_multipliers: Sequence[float], delta: float, *, accountant: str = "pld"
) -> float:
    r"""Epsilon of a sequence of Gaussian releases with different noise multipliers.

    ``"pld"``: exact, :math:`\varepsilon` of one Gaussian with
    :math:`z^{-2} = \sum_t z_t^{-2}` (:func:`_gaussian_dp_epsilon`). ``"rdp"``: equal
    multipliers are grouped into ``SelfComposedDpEvent``s and all groups are composed into one
    ``RdpAccountant``. ``"advanced"``: with :math:`T` releases,
    :math:`\varepsilon_t = \sqrt{2 \ln(2.5 T/\delta)} / z_t` and
    :func:`advanced_composition` with :math:`\delta' = \delta/2`. ``"basic"``:
    :math:`\sum_t \sqrt{2 \ln(1.25 T/\delta)} / z_t`. ``"moments"``: the log moments add,

    .. math::

        \alpha(\tau) = \frac{\tau(\tau+1)}{2} \sum_t z_t^{-2}, \qquad
        \varepsilon = \min_{\tau \ge 1} \frac{\alpha(\tau) + \ln(1/\delta)}{\tau}.

    With all multipliers equal each accountant gives :func:`gaussian_epsilon`. ``"advanced"``
    and ``"basic"`` need every :math:`\varepsilon_t \le 1` (:func:`check_classic_range`).

    Parameters
    ----------
    noise_multipliers : sequence of float
        One multiplier :math:`z_t > 0` per release.
    delta : float
        Total delta in (0, 1).
    accountant : str, default "pld"
        One of :data:`ACCOUNTANTS`.

    Returns
    -------
    float
        The epsilon; 0.0 for no releases.

    Raises
    ------
    DpfedInputError
        For bad arguments, or with ``"advanced"``/``"basic"`` when a release's classical
        per-step epsilon exceeds 1.
    """
    zs = _check_multipliers(noise_multipliers)
    d = check_open_unit("delta", delta)
    acc = check_accountant(accountant)
    t = len(zs)
    if t == 0:
        return 0.0
    _check_classic(min(zs), t, d, acc, heterogeneous=len(set(zs)) > 1)
    if acc == "pld":
        return _gaussian_dp_epsilon(math.fsum(1.0 / (z * z) for z in zs), d)
    if acc == "rdp":
        groups = sorted(Counter(zs).items())
        event = dp_event.ComposedDpEvent([_homogeneous_event(z, n) for z, n in groups])
        accountant_obj = _make_dpa_accountant(acc)
        accountant_obj.compose(event)
        return float(accountant_obj.get_epsilon(d))
    if acc == "advanced":
        delta_step = d / (2.0 * t)
        eps = [_classic_step_epsilon(z, delta_step) for z in zs]
        return advanced_composition(eps, delta_step, d / 2.0)[0]
    if acc == "basic":
        return math.fsum(_classic_step_epsilon(z, d / t) for z in zs)
    return _moments_epsilon(math.fsum(1.0 / (z * z) for z in zs), d)


#: Below this noise multiplier the PLD grid would need terabytes; such releases are composed
#: exactly instead (Gaussian mechanisms compose to one Gaussian with mu^2 = sum 1/z^2).
_PLD_MIN_MULTIPLIER = 0.25


@lru_cache(maxsize=4096)
def _cached_releases_epsilon(
    multipliers: tuple[float, ...], delta: float, accountant: str
) -> float:
    return gaussian_epsilon_heterogeneous(list(multipliers), delta, accountant=accountant)


def gaussian_releases_epsilon(
    noise_multipliers: Sequence[float],
    delta: float,
    accountant: str = "pld",
    *,
    coordinates: int = 0,
) -> float:
    r"""Epsilon of a party's Gaussian releases, as every runtime reports it (cached).

    :func:`gaussian_epsilon_heterogeneous`, cached by the multiset of multipliers (with
    ``"pld"`` a closed form, so a per-round history of epsilons costs microseconds a round).
    ``coordinates`` counts the coordinates the releases drew from the exact grid sampler:
    their coupling's delta is taken out of ``delta`` first
    (:func:`dpfed.privacy.coupling.epsilon_with_coupling`).

    Returns
    -------
    float
        The epsilon; 0.0 for no releases.

    Raises
    ------
    DpfedInputError
        As :func:`gaussian_epsilon_heterogeneous`: with ``"advanced"``/``"basic"`` when a
        release's classical per-step epsilon exceeds 1.
    """
    if len(noise_multipliers) == 0:
        return 0.0
    zs = tuple(sorted(float(z) for z in noise_multipliers))
    if accountant not in COUPLED_ACCOUNTANTS:
        coordinates = 0  # an RDP bound holds for the discrete Gaussian as it is
    return epsilon_with_coupling(
        lambda d: _cached_releases_epsilon(zs, float(d), accountant),
        float(delta),
        coordinates,
        fallback=lambda: _cached_releases_epsilon(zs, float(delta), "rdp"),
    )


# --------------------------------------------------------------------------------------------
# releases of any mechanism: one DpEvent per release, one accountant for all
# --------------------------------------------------------------------------------------------

#: Mechanisms whose releases are accounted (by their noise multiplier ``z``): ``"gaussian"``
#: (:math:`\mathcal N(0, \sigma^2 I)`, :math:`z = \sigma / C`), ``"l2_laplace"`` (density
#: :math:`\propto e^{-\|\eta\| / b}`, :math:`z = b / C`, which is :math:`1/z`-DP) and
#: ``"discrete_gaussian"`` (a sum of clients' exact discrete Gaussian noise in the secure sum's
#: ring whose Rényi divergences are at most a Gaussian's of multiplier ``z``: Rényi DP only).
MECHANISMS = ("gaussian", "l2_laplace", "discrete_gaussian")

#: The mechanisms that are pure :math:`\varepsilon`-DP, with :math:`\varepsilon = 1/z`.
PURE_MECHANISMS = ("l2_laplace",)

#: The mechanisms certified by Rényi DP only: a composition that holds one is accounted by
#: RDP whatever the accountant asked (its privacy loss distribution is not the continuous
#: Gaussian's, so ``"pld"`` would not be a bound; the closed forms are refused).
RDP_MECHANISMS = ("discrete_gaussian",)

#: The numerical accountants, which hold for every noise multiplier and every mechanism here.
NUMERICAL_ACCOUNTANTS = ("pld", "rdp")

#: The accountants that need the exact sampler's coupling delta (:mod:`dpfed.privacy.coupling`):
#: those built on the continuous Gaussian's privacy profile. RDP and the moments accountant
#: bound Rényi divergences, which the discrete Gaussian shares with the continuous one at the
#: same noise multiplier (Canonne, Kamath and Steinke 2020), so they hold for it as they are.
COUPLED_ACCOUNTANTS = ("pld", "advanced", "basic")


class Release(NamedTuple):
    """One release as the accountant sees it: its mechanism, noise multiplier and how many
    coordinates it drew from the exact grid sampler.

    Attributes
    ----------
    mechanism : str
        One of :data:`MECHANISMS`.
    noise_multiplier : float
        :math:`z > 0`: noise scale over :math:`\\ell_2` sensitivity.
    coordinates : int, default 0
        Coordinates drawn exactly on a grid (:mod:`dpfed.privacy.coupling`: each adds the
        coupling's delta); 0 for a release without grid noise.
    """

    mechanism: str
    noise_multiplier: float
    coordinates: int = 0


def as_release(item: Release | tuple[str, float] | tuple[str, float, int] | float) -> Release:
    """A :class:`Release` from a release, a ``(mechanism, z)`` pair, a ``(mechanism, z,
    coordinates)`` triple or a bare ``z`` (a Gaussian release).

    Raises
    ------
    DpfedInputError
        For an unknown mechanism, a multiplier that is not finite and > 0, or a negative
        coordinate count.
    """
    coordinates = 0
    if isinstance(item, tuple):
        if len(item) not in (2, 3):
            raise DpfedInputError(
                "a release must be (mechanism, noise_multiplier) or (mechanism, "
                f"noise_multiplier, coordinates). Found {item!r}."
            )
        mechanism, z = item[0], item[1]
        if len(item) == 3:
            coordinates = item[2]
    else:
        mechanism, z = "gaussian", item
    if mechanism not in MECHANISMS:
        raise DpfedInputError(f"mechanism must be one of {MECHANISMS}. Found {mechanism!r}.")
    return Release(
        str(mechanism),
        check_positive("noise_multiplier", z),
        check_int("coordinates", coordinates, minimum=0),
    )


def pure_epsilon(release: Release) -> float:
    r""":math:`\varepsilon = 1/z` of a pure-DP release."""
    return 1.0 / release.noise_multiplier


def release_event(release: Release) -> dp_event.DpEvent:
    r"""The ``DpEvent`` of one release.

    A Gaussian release is ``GaussianDpEvent(z)``, and so is a ``"discrete_gaussian"`` one for the
    RDP accountant (its Rényi divergences are at most the Gaussian's). A pure :math:`\varepsilon`-DP
    release is the binary randomized response at :math:`\varepsilon` (``RandomizedResponseDpEvent``
    with two buckets and noise parameter :math:`p = 2 / (1 + e^{\varepsilon})`): its pair of output
    distributions dominates that of every :math:`\varepsilon`-DP mechanism (Kairouz, Oh and
    Viswanath 2015), so composing it bounds the composition of any pure-DP releases, whatever their
    noise (the l2-Laplace noise of decentralized ADMM included).
    """
    if release.mechanism in PURE_MECHANISMS:
        eps = pure_epsilon(release)
        return dp_event.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(eps)), 2)
    return dp_event.GaussianDpEvent(release.noise_multiplier)


def releases_event(releases: Sequence[Release | tuple[str, float] | float]) -> dp_event.DpEvent:
    """The composition of ``releases`` as one ``ComposedDpEvent`` (equal releases grouped into
    ``SelfComposedDpEvent``s, in sorted order). The events are the continuous mechanisms'; the
    exact grid sampler's coupling delta (:mod:`dpfed.privacy.coupling`) is not part of them."""
    plain = (as_release(r) for r in releases)
    groups = sorted(Counter(Release(r.mechanism, r.noise_multiplier) for r in plain).items())
    return dp_event.ComposedDpEvent(
        [dp_event.SelfComposedDpEvent(release_event(r), n) for r, n in groups]
    )


#: Value discretisation of every PLD built here (``PLDAccountant``'s default).
_PLD_DISCRETIZATION = 1e-4


def _mixed_pld_epsilon(releases: tuple[Release, ...], delta: float) -> float:
    r"""PLD epsilon of Gaussian and pure-DP releases.

    The Gaussian releases compose exactly to one Gaussian with
    :math:`z^{-2} = \sum_t z_t^{-2}`; each group of ``n`` equal pure releases at
    :math:`\varepsilon` is the ``n``-fold composition of the dominating pair of
    :math:`\varepsilon`-DP. The PLDs are built here, not by ``PLDAccountant``, whose randomized
    response ignores a self-composition count and needs replace-one neighbours, under which its
    Gaussian doubles the sensitivity.
    """
    if any(r.mechanism in RDP_MECHANISMS for r in releases):
        raise AssertionError("an RDP-only release reached the PLD")  # pragma: no cover
    inv_sq = math.fsum(1.0 / r.noise_multiplier**2 for r in releases if r.mechanism == "gaussian")
    pure = Counter(pure_epsilon(r) for r in releases if r.mechanism in PURE_MECHANISMS)
    out = pld_lib.identity(value_discretization_interval=_PLD_DISCRETIZATION)
    if inv_sq > 0.0:
        out = out.compose(
            pld_lib.from_gaussian_mechanism(
                standard_deviation=1.0 / math.sqrt(inv_sq),
                value_discretization_interval=_PLD_DISCRETIZATION,
            )
        )
    for eps, n in sorted(pure.items()):
        one = pld_lib.from_privacy_parameters(
            pld_common.DifferentialPrivacyParameters(eps, 0.0),
            value_discretization_interval=_PLD_DISCRETIZATION,
        )
        out = out.compose(one.self_compose(n) if n > 1 else one)
    return float(out.get_epsilon_for_delta(delta))


@lru_cache(maxsize=1024)
def _cached_mixed_epsilon(releases: tuple[Release, ...], delta: float, accountant: str) -> float:
    gaussians = [r.noise_multiplier for r in releases if r.mechanism == "gaussian"]
    small = bool(gaussians) and math.fsum(z**-2 for z in gaussians) ** -0.5 < _PLD_MIN_MULTIPLIER
    rdp_only = any(r.mechanism in RDP_MECHANISMS for r in releases)
    if accountant == "pld" and not small and not rdp_only:
        return _mixed_pld_epsilon(releases, delta)
    # RDP: under replace-one neighbours the RDP accountant composes randomized response; its
    # Gaussian RDP is that of a shift by one noise multiplier under either relation. Also the
    # PLD's fallback when the Gaussians' composed multiplier is below 0.25 (where the PLD grid
    # would not fit in memory): an upper bound, as every RDP conversion is.
    acc = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    acc.compose(releases_event(releases))
    return float(acc.get_epsilon(delta))


def releases_epsilon(
    releases: Sequence[Release | tuple[str, float] | float],
    delta: float,
    accountant: str = "pld",
) -> float:
    r"""Epsilon of a party's releases of any mechanisms, at total delta ``delta``: the one
    function every ledger accounts with.

    Gaussian releases alone are :func:`gaussian_releases_epsilon`, with any accountant of
    :data:`ACCOUNTANTS`. Releases that include an RDP-only one (:data:`RDP_MECHANISMS`) are
    composed by RDP whatever the (numerical) accountant asked. Releases that include pure-DP
    ones (:data:`PURE_MECHANISMS`) are the composition of their :func:`release_event`\ s by a
    numerical accountant (:data:`NUMERICAL_ACCOUNTANTS`): ``"pld"`` composes the privacy loss
    distributions of Gaussians and of the dominating pair of pure :math:`\varepsilon`-DP
    (optimal composition for the pure releases); ``"rdp"`` adds their Rényi divergences. As for
    Gaussian releases, ``"pld"`` falls back to ``"rdp"`` (an upper bound) when the Gaussians
    compose to a multiplier below 0.25.

    Parameters
    ----------
    releases : sequence of Release, (mechanism, z) pairs or floats
        One entry per release; a bare float is a Gaussian release's noise multiplier.
    delta : float
        Total delta in (0, 1).
    accountant : str, default "pld"

    Returns
    -------
    float
        The epsilon; 0.0 for no releases.

    Raises
    ------
    DpfedInputError
        For a bad release, delta or accountant, or a closed-form accountant (``"advanced"``,
        ``"basic"``, ``"moments"``) asked to account pure-DP releases.
    """
    items = tuple(sorted(as_release(r) for r in releases))
    coordinates = sum(r.coordinates for r in items)
    if any(r.mechanism in RDP_MECHANISMS for r in items):
        check_open_unit("delta", delta)
        if check_accountant(accountant) not in NUMERICAL_ACCOUNTANTS:
            raise DpfedInputError(
                f"accountant must be one of {NUMERICAL_ACCOUNTANTS} for releases of mechanisms "
                f"{sorted({r.mechanism for r in items})}. Found {accountant!r}."
            )
        # Renyi DP, whatever the accountant: it needs no coupling (the grid releases'
        # discrete Gaussians share the continuous one's Renyi divergences)
        plain = tuple(sorted(Release(r.mechanism, r.noise_multiplier) for r in items))
        return _cached_mixed_epsilon(plain, float(delta), "rdp")
    if all(r.mechanism == "gaussian" for r in items):
        return gaussian_releases_epsilon(
            [r.noise_multiplier for r in items], delta, accountant, coordinates=coordinates
        )
    d = check_open_unit("delta", delta)
    acc = check_accountant(accountant)
    if acc not in NUMERICAL_ACCOUNTANTS:
        raise DpfedInputError(
            f"accountant must be one of {NUMERICAL_ACCOUNTANTS} for releases of mechanisms "
            f"{sorted({r.mechanism for r in items})}. Found {accountant!r}."
        )
    plain = tuple(sorted(Release(r.mechanism, r.noise_multiplier) for r in items))
    return epsilon_with_coupling(
        lambda dd: _cached_mixed_epsilon(plain, float(dd), acc),
        d,
        coordinates if acc in COUPLED_ACCOUNTANTS else 0,
        fallback=lambda: _cached_mixed_epsilon(plain, d, "rdp"),
    )
