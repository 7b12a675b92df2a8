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
Theorem 1 (the "classic" Gaussian mechanism) is only proved for a per-step
:math:`\varepsilon \in (0, 1]`. :func:`classic_gaussian_epsilon` evaluates the formula for any
noise multiplier, so the ``"advanced"`` and ``"basic"`` accountants inherit that caveat: when the
per-step epsilon exceeds 1 they are outside the theorem's hypothesis. Measured at
:math:`\delta = 10^{-5}` the classic formula under-states the exact Gaussian epsilon once the
per-step epsilon exceeds about 8.4 (noise multiplier below about 0.57), which can make the
``"basic"`` figure smaller than the tight ``"pld"`` one for a single step.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

import dp_accounting
import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive

__all__ = [
    "ACCOUNTANTS",
    "advanced_composition",
    "basic_composition",
    "calibrate_noise_multiplier",
    "check_accountant",
    "classic_gaussian_epsilon",
    "classic_gaussian_sigma",
    "corollary1_epsilon",
    "gaussian_epsilon",
    "gaussian_epsilon_heterogeneous",
    "gaussian_releases_epsilon",
    "moments_accountant_epsilon",
]

ACCOUNTANTS = ("pld", "rdp", "advanced", "basic", "moments")

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


def _check_delta_step(name: str, value: float) -> float:
    """Per-release delta: a number in [0, 1) (0 is pure DP)."""
    try:
        v = float(value)
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
# closed forms
# --------------------------------------------------------------------------------------------


def classic_gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    r"""Per-release epsilon of the classic Gaussian mechanism (the paper's Theorem 1).

    A Gaussian mechanism with standard deviation :math:`\sigma` on a query of
    :math:`\ell_2` sensitivity :math:`C` is :math:`(\varepsilon, \delta)`-DP with

    .. math::

        \varepsilon = \frac{\sqrt{2 \ln(1.25 / \delta)}}{z}, \qquad z = \sigma / C .

    Parameters
    ----------
    noise_multiplier : float
        :math:`z = \sigma / C > 0`.
    delta : float
        Per-release delta in (0, 1).

    Returns
    -------
    float
        The per-release epsilon. The theorem only covers results in (0, 1]; larger values are
        returned as computed and are not a proved guarantee.
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    d = check_open_unit("delta", delta)
    return math.sqrt(2.0 * math.log(1.25 / d)) / z


def classic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    r"""Noise standard deviation of the classic Gaussian mechanism (inverse of Theorem 1).

    .. math::

        \sigma = \frac{\sqrt{2 \ln(1.25 / \delta)}\, C}{\varepsilon} .

    Parameters
    ----------
    epsilon : float
        Per-release epsilon > 0 (Theorem 1 is proved for :math:`\varepsilon \le 1`).
    delta : float
        Per-release delta in (0, 1).
    l2_sensitivity : float
        :math:`\ell_2` sensitivity :math:`C > 0` of the released quantity.

    Returns
    -------
    float
        The standard deviation :math:`\sigma`.
    """
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    c = check_positive("l2_sensitivity", l2_sensitivity)
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


def _make_dpa_accountant(accountant: str) -> dp_accounting.PrivacyAccountant:
    if accountant == "pld":
        return PLDAccountant()
    return RdpAccountant()


def _homogeneous_event(noise_multiplier: float, steps: int) -> dp_event.DpEvent:
    return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_multiplier), steps)


def _gaussian_epsilon(z: float, t: int, d: float, accountant: str) -> float:
    """gaussian_epsilon without validation."""
    if accountant in ("pld", "rdp"):
        acc = _make_dpa_accountant(accountant)
        acc.compose(_homogeneous_event(z, t))
        return float(acc.get_epsilon(d))
    if accountant == "advanced":
        eps_step = classic_gaussian_epsilon(z, d / (2.0 * t))
        return corollary1_epsilon(eps_step, t, d / 2.0)
    if accountant == "basic":
        return t * classic_gaussian_epsilon(z, d / t)
    return _moments_epsilon(t / (z * z), d)


def gaussian_epsilon(
    noise_multiplier: float, steps: int, delta: float, *, accountant: str = "pld"
) -> float:
    r"""Epsilon of ``steps`` compositions of a Gaussian mechanism at total delta ``delta``.

    Accountants:

    ``"pld"``
        ``dp_accounting.pld.PLDAccountant`` (add-or-remove-one neighbours, discretisation
        :math:`10^{-4}`), composing ``GaussianDpEvent(z)`` ``steps`` times.
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
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    t = check_int("steps", steps, minimum=1)
    d = check_open_unit("delta", delta)
    acc = check_accountant(accountant)
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


def calibrate_noise_multiplier(
    epsilon: float, delta: float, steps: int, *, accountant: str = "pld"
) -> float:
    r"""Smallest noise multiplier whose ``gaussian_epsilon`` is at most ``epsilon``.

    Solves

    .. math::

        z^\star = \min \{ z > 0 : \varepsilon_{acc}(z, T, \delta) \le \varepsilon \}.

    For ``"pld"``/``"rdp"`` this uses ``dp_accounting.calibrate_dp_mechanism`` on the bracket
    :math:`[0.9\, z_{exact},\ 1.25 \max(z_{moments}, z_{exact})]`, where :math:`z_{exact}` is
    the exact analytic-Gaussian multiplier for :math:`T` releases (a lower bound for both
    accountants) and :math:`z_{moments}` the moments-accountant one (usually an upper bound);
    the bracket is widened if needed. The tolerance is :math:`10^{-4} z_{exact}`. For the closed
    forms it bisects the monotone map :math:`z \mapsto \varepsilon` to relative precision
    :math:`10^{-12}`.

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
    """
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    t = check_int("steps", steps, minimum=1)
    acc = check_accountant(accountant)

    if acc not in ("pld", "rdp"):
        return _bisect_decreasing(lambda z: _gaussian_epsilon(z, t, d, acc), eps)

    # T Gaussian releases with multiplier z are one Gaussian release with multiplier z/sqrt(T).
    z_exact = float(dp_accounting.get_sigma_gaussian(eps, d)) * math.sqrt(t)
    z_moments = _bisect_decreasing(lambda z: _moments_epsilon(t / (z * z), d), eps, rtol=1e-6)
    lo = 0.9 * z_exact
    hi = 1.25 * max(z_moments, z_exact)
    tol = _CALIBRATION_RTOL * z_exact
    for _ in range(60):
        try:
            z = dp_accounting.calibrate_dp_mechanism(
                lambda: _make_dpa_accountant(acc),
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
    raise DpfedInputError(  # pragma: no cover - only for pathological inputs
        f"could not calibrate a noise multiplier for epsilon={epsilon!r}, delta={delta!r}, "
        f"steps={steps!r} with accountant {accountant!r}."
    )


def gaussian_epsilon_heterogeneous(
    noise_multipliers: Sequence[float], delta: float, *, accountant: str = "pld"
) -> float:
    r"""Epsilon of a sequence of Gaussian releases with different noise multipliers.

    ``"pld"``/``"rdp"``: equal multipliers are grouped into ``SelfComposedDpEvent``s and all
    groups are composed into one accountant. ``"advanced"``: with :math:`T` releases,
    :math:`\varepsilon_t = \sqrt{2 \ln(2.5 T/\delta)} / z_t` and
    :func:`advanced_composition` with :math:`\delta' = \delta/2`. ``"basic"``:
    :math:`\sum_t \sqrt{2 \ln(1.25 T/\delta)} / z_t`. ``"moments"``: the log moments add,

    .. math::

        \alpha(\tau) = \frac{\tau(\tau+1)}{2} \sum_t z_t^{-2}, \qquad
        \varepsilon = \min_{\tau \ge 1} \frac{\alpha(\tau) + \ln(1/\delta)}{\tau}.

    With all multipliers equal each accountant gives :func:`gaussian_epsilon`.

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
    """
    zs = _check_multipliers(noise_multipliers)
    d = check_open_unit("delta", delta)
    acc = check_accountant(accountant)
    t = len(zs)
    if t == 0:
        return 0.0
    if acc in ("pld", "rdp"):
        groups = sorted(Counter(zs).items())
        event = dp_event.ComposedDpEvent([_homogeneous_event(z, n) for z, n in groups])
        accountant_obj = _make_dpa_accountant(acc)
        accountant_obj.compose(event)
        return float(accountant_obj.get_epsilon(d))
    if acc == "advanced":
        delta_step = d / (2.0 * t)
        eps = [classic_gaussian_epsilon(z, delta_step) for z in zs]
        return advanced_composition(eps, delta_step, d / 2.0)[0]
    if acc == "basic":
        return math.fsum(classic_gaussian_epsilon(z, d / t) for z in zs)
    return _moments_epsilon(math.fsum(1.0 / (z * z) for z in zs), d)


#: Below this noise multiplier the PLD grid would need terabytes; such releases are composed
#: exactly instead (Gaussian mechanisms compose to one Gaussian with mu^2 = sum 1/z^2).
_PLD_MIN_MULTIPLIER = 0.25


@lru_cache(maxsize=4096)
def _cached_releases_epsilon(
    multipliers: tuple[float, ...], delta: float, accountant: str
) -> float:
    if accountant == "pld" and min(multipliers) < _PLD_MIN_MULTIPLIER:
        mu = math.sqrt(math.fsum(1.0 / z**2 for z in multipliers))
        return float(dp_accounting.get_epsilon_gaussian(1.0 / mu, delta))
    return gaussian_epsilon_heterogeneous(list(multipliers), delta, accountant=accountant)


def gaussian_releases_epsilon(
    noise_multipliers: Sequence[float], delta: float, accountant: str = "pld"
) -> float:
    r"""Epsilon of a party's Gaussian releases, as every runtime reports it (cached).

    Like :func:`gaussian_epsilon_heterogeneous`, except that with ``"pld"`` and a multiplier
    below 0.25 (where the PLD grid would not fit in memory) the releases are composed exactly:
    Gaussian mechanisms with multipliers :math:`z_t` compose to one with
    :math:`z^{-2} = \sum_t z_t^{-2}`, whose epsilon is the analytic Gaussian one. Results are
    cached by the multiset of multipliers.

    Returns
    -------
    float
        The epsilon; 0.0 for no releases.
    """
    if len(noise_multipliers) == 0:
        return 0.0
    zs = tuple(sorted(float(z) for z in noise_multipliers))
    return _cached_releases_epsilon(zs, float(delta), accountant)
