r"""Privacy accounting for repeated releases: the functions every protocol and ledger calls.

They are front ends of the one accountant registry (:mod:`dpfed.privacy.accountants`, over
dp-accounting's ``DpEvent``\ s) and of the closed forms (:mod:`dpfed.privacy.closed_forms`), whose
names are re-exported here.

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

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.accountants import (
    ACCOUNTANT_REGISTRY,
    MECHANISM_REGISTRY,
    Release,
    accountant_names,
    analytic_gaussian_epsilon,
    analytic_gaussian_multiplier,
    as_release,
    gaussian_event,
    get_accountant,
    mechanism_names,
    rdp_epsilon,
    rdp_orders,
    release_event,
    releases_event,
)
from dpfed.privacy.closed_forms import (
    CLASSIC_MAX_EPSILON,
    advanced_composition,
    basic_composition,
    check_multipliers,
    classic_gaussian_epsilon,
    classic_gaussian_sigma,
    classic_range_message,
    corollary1_epsilon,
    gaussian_delta,
    in_classic_range,
    moments_accountant_epsilon,
)
from dpfed.privacy.coupling import epsilon_with_coupling

if TYPE_CHECKING:
    from dpfed.privacy.accountants import DpEvent as DpEvent  # re-exported for type hints

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
    "classic_range_message",
    "corollary1_epsilon",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_epsilon_heterogeneous",
    "gaussian_releases_epsilon",
    "in_classic_range",
    "moments_accountant_epsilon",
    "rdp_epsilon",
    "rdp_orders",
    "release_event",
    "releases_epsilon",
    "releases_event",
]

# The registry's names, as the protocols and the command line list them (queries of
# dpfed.privacy.accountants, not lists kept by hand).

#: Every accountant's name.
ACCOUNTANTS = tuple(ACCOUNTANT_REGISTRY)

#: The accountants built on the classical Gaussian bound (Theorem 1 per step).
CLASSIC_ACCOUNTANTS = accountant_names(classic=True)

#: The numerical accountants, which hold for every noise multiplier and every mechanism here.
NUMERICAL_ACCOUNTANTS = accountant_names(numerical=True)

#: The accountants that need the exact sampler's coupling delta (:mod:`dpfed.privacy.coupling`):
#: those built on the continuous Gaussian's privacy profile. RDP and the moments accountant
#: bound Rényi divergences, which the discrete Gaussian shares with the continuous one at the
#: same noise multiplier (Canonne, Kamath and Steinke 2020), so they hold for it as they are.
COUPLED_ACCOUNTANTS = accountant_names(coupled=True)

#: Mechanisms whose releases are accounted (by their noise multiplier ``z``): ``"gaussian"``
#: (:math:`\mathcal N(0, \sigma^2 I)`, :math:`z = \sigma / C`), ``"l2_laplace"`` (density
#: :math:`\propto e^{-\|\eta\| / b}`, :math:`z = b / C`, which is :math:`1/z`-DP) and
#: ``"discrete_gaussian"`` (a sum of clients' exact discrete Gaussian noise in the secure sum's
#: ring whose Rényi divergences are at most a Gaussian's of multiplier ``z``: Rényi DP only).
MECHANISMS = tuple(MECHANISM_REGISTRY)

#: The mechanisms that are pure :math:`\varepsilon`-DP, with :math:`\varepsilon = 1/z`.
PURE_MECHANISMS = mechanism_names(pure=True)

#: The mechanisms certified by Rényi DP only: a composition that holds one is accounted by
#: RDP whatever the accountant asked (its privacy loss distribution is not the continuous
#: Gaussian's, so ``"pld"`` would not be a bound; the closed forms are refused).
RDP_MECHANISMS = mechanism_names(renyi_only=True)


def check_accountant(accountant: str) -> str:
    """Return ``accountant`` if it is one of :data:`ACCOUNTANTS`, else raise.

    Raises
    ------
    DpfedInputError
        If ``accountant`` is not a known accountant name.
    """
    return get_accountant(accountant).name


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
    zs = check_multipliers(noise_multipliers)
    d = check_open_unit("delta", delta)
    acc = get_accountant(accountant)
    if zs:
        acc.check_gaussians(min(zs), len(zs), d, heterogeneous=len(set(zs)) > 1)


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
    acc = get_accountant(accountant)
    acc.check_gaussians(z, t, d)
    return acc.epsilon(gaussian_event(z, t), d)


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
    acc = get_accountant(accountant)
    acc.check_target(eps, d, t)
    return acc.calibrate(eps, d, t)


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
    zs = check_multipliers(noise_multipliers)
    d = check_open_unit("delta", delta)
    acc = get_accountant(accountant)
    if not zs:
        return 0.0
    acc.check_gaussians(min(zs), len(zs), d, heterogeneous=len(set(zs)) > 1)
    return acc.epsilon(_gaussians_event(zs), d)


def _gaussians_event(noise_multipliers: Sequence[float]) -> DpEvent:
    """Gaussian releases of these multipliers as one event (equal ones self-composed)."""
    return releases_event(list(noise_multipliers))


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
    if not get_accountant(accountant).coupled:
        coordinates = 0  # an RDP bound holds for the discrete Gaussian as it is
    return epsilon_with_coupling(
        lambda d: _cached_releases_epsilon(zs, float(d), accountant),
        float(delta),
        coordinates,
        fallback=lambda: _cached_releases_epsilon(zs, float(delta), "rdp"),
    )


@lru_cache(maxsize=1024)
def _cached_events_epsilon(releases: tuple[Release, ...], delta: float, accountant: str) -> float:
    return get_accountant(accountant).epsilon(releases_event(releases), delta)


def _refuse(accountant: str, allowed: Sequence[str], items: Sequence[Release]) -> DpfedInputError:
    return DpfedInputError(
        f"accountant must be one of {tuple(allowed)} for releases of mechanisms "
        f"{sorted({r.mechanism for r in items})}. Found {accountant!r}."
    )


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
    d = check_open_unit("delta", delta)
    acc = get_accountant(accountant)
    plain = tuple(sorted(Release(r.mechanism, r.noise_multiplier) for r in items))
    if any(MECHANISM_REGISTRY[r.mechanism].renyi_only for r in items):
        if not acc.numerical:
            raise _refuse(accountant, NUMERICAL_ACCOUNTANTS, items)
        # Renyi DP, whatever the accountant: it needs no coupling (the grid releases'
        # discrete Gaussians share the continuous one's Renyi divergences)
        return _cached_events_epsilon(plain, d, "rdp")
    if all(r.mechanism == "gaussian" for r in items):
        return gaussian_releases_epsilon(
            [r.noise_multiplier for r in items], d, accountant, coordinates=coordinates
        )
    event = releases_event(plain)
    if not acc.supports(event):
        raise _refuse(accountant, accountant_names(supporting=event), items)
    return epsilon_with_coupling(
        lambda dd: _cached_events_epsilon(plain, float(dd), acc.name),
        d,
        coordinates if acc.coupled else 0,
        fallback=lambda: _cached_events_epsilon(plain, d, "rdp"),
    )
