r"""The DpEvents of dpfed's mechanisms, the accountants that read them, and one calibrator.

Every privacy figure dpfed prints is computed here, and this is the one module that imports
``dp_accounting``.

* **Mechanisms** (:data:`MECHANISM_REGISTRY`): each release a protocol makes is a
  :class:`Release` (its mechanism, noise multiplier :math:`z` and how many coordinates it drew
  from the exact grid sampler), and its mechanism turns it into a ``DpEvent``:
  ``GaussianDpEvent(z)`` from dp-accounting for the Gaussian mechanism, and two events of ours
  where dp-accounting has none: :class:`L2LaplaceDpEvent` (noise of density
  :math:`\propto e^{-\|\eta\|/b}`, :math:`z = b/C`, pure :math:`1/z`-DP) and
  :class:`DiscreteGaussianDpEvent` (a sum of exact discrete Gaussians in the secure sum's ring,
  certified by Rényi DP only).
* **Accountants** (:data:`ACCOUNTANT_REGISTRY`): each is an :class:`Accountant` answering
  :meth:`~Accountant.supports` and :meth:`~Accountant.epsilon` for a composition of those events,
  with its properties stated as attributes (numerical or closed form, whether the exact grid
  sampler's coupling delta applies, whether it rests on the classical Gaussian bound). The
  protocols' lists of accountants are queries of the registry (:func:`accountant_names`).
* **One calibrator** (:func:`calibrate`): the smallest noise multiplier whose event an
  accountant certifies at a target epsilon, for any event shape a protocol releases; each
  accountant may answer the homogeneous case exactly (:meth:`Accountant.calibrate`).

Adding an accountant is one class here, registered with :func:`register_accountant`; adding a
mechanism is one :class:`Mechanism` entry (and, if dp-accounting has no event for it, one event
class), plus what each accountant that supports it does with it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from dpfed._lazy import lazy_module
from dpfed._validation import DpfedInputError, check_int, check_positive
from dpfed.privacy.closed_forms import (
    CLASSIC_MAX_EPSILON,
    advanced_composition,
    check_classic,
    classic_range_message,
    classic_step_epsilon,
    corollary1_epsilon,
    gaussian_dp_epsilon,
    in_classic_range,
    moments_accountant_epsilon,
    moments_epsilon,
)

if TYPE_CHECKING:
    import dp_accounting
    from dp_accounting import dp_event
    from dp_accounting.dp_event import DpEvent as DpEvent  # re-exported for type hints
    from dp_accounting.pld import common as pld_common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
else:  # about a second to import: on first use only (dpfed._lazy)
    dp_accounting = lazy_module("dp_accounting")
    dp_event = lazy_module("dp_accounting.dp_event")
    pld_lib = lazy_module("dp_accounting.pld.privacy_loss_distribution")
    pld_common = lazy_module("dp_accounting.pld.common")
    rdp_lib = lazy_module("dp_accounting.rdp.rdp_privacy_accountant")

__all__ = [
    "ACCOUNTANT_REGISTRY",
    "MECHANISM_REGISTRY",
    "Accountant",
    "Mechanism",
    "Release",
    "accountant_names",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_multiplier",
    "as_release",
    "calibrate",
    "event_groups",
    "gaussian_event",
    "get_accountant",
    "mechanism_names",
    "rdp_epsilon",
    "rdp_orders",
    "register_accountant",
    "register_mechanism",
    "release_event",
    "releases_event",
    "smallest_certifying",
]


# --------------------------------------------------------------------------------------------
# events of ours, where dp-accounting has none
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _event_classes() -> dict[str, type]:
    """The event classes of ours, built on first use: they subclass dp-accounting's
    ``DpEvent``, which is imported only when an epsilon is computed (:mod:`dpfed._lazy`)."""
    import attr

    @attr.s(frozen=True, slots=True, auto_attribs=True)
    class L2LaplaceDpEvent(dp_event.DpEvent):  # type: ignore[misc]
        r"""The :math:`\ell_2`-Laplace mechanism: noise of density :math:`\propto
        e^{-\|\eta\|/b}` on a query of :math:`\ell_2` sensitivity :math:`C`,
        ``noise_multiplier`` :math:`z = b/C`; pure :math:`1/z`-DP."""

        noise_multiplier: float

    @attr.s(frozen=True, slots=True, auto_attribs=True)
    class DiscreteGaussianDpEvent(dp_event.DpEvent):  # type: ignore[misc]
        """A sum of exact discrete Gaussians whose Rényi divergences are at most a continuous
        Gaussian's of multiplier ``noise_multiplier`` (Canonne, Kamath and Steinke 2020);
        certified by Rényi DP only."""

        noise_multiplier: float

    return {
        "L2LaplaceDpEvent": L2LaplaceDpEvent,
        "DiscreteGaussianDpEvent": DiscreteGaussianDpEvent,
    }


#: The event classes of ours, built on first use (:func:`_event_classes`).
_EVENT_CLASS_NAMES = ("L2LaplaceDpEvent", "DiscreteGaussianDpEvent")


def __getattr__(name: str) -> Any:
    """The event classes of ours (:func:`_event_classes`) as module attributes."""
    if name in _EVENT_CLASS_NAMES:
        return _event_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------------------------
# mechanisms and releases
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mechanism:
    """A noise mechanism as the accountants see it.

    Attributes
    ----------
    name : str
        The name releases and ledgers record.
    event : callable
        ``event(z)``: the ``DpEvent`` of one release of noise multiplier ``z``.
    event_type : callable
        The event's class, read by :func:`event_groups` (a zero-argument callable: the classes
        of ours exist once dp-accounting is imported).
    pure : bool
        Pure :math:`1/z`-DP (no delta).
    renyi_only : bool
        Certified by Rényi DP only: a composition that holds one is accounted by RDP.
    """

    name: str
    event: Callable[[float], DpEvent]
    event_type: Callable[[], type]
    pure: bool = False
    renyi_only: bool = False


#: Every mechanism whose releases are accounted, by name, in registration order.
MECHANISM_REGISTRY: dict[str, Mechanism] = {}


def register_mechanism(mechanism: Mechanism) -> Mechanism:
    """Add ``mechanism`` to :data:`MECHANISM_REGISTRY` (its name must be new)."""
    if mechanism.name in MECHANISM_REGISTRY:
        raise ValueError(f"mechanism {mechanism.name!r} is already registered")
    MECHANISM_REGISTRY[mechanism.name] = mechanism
    return mechanism


register_mechanism(
    Mechanism(
        "gaussian",
        lambda z: dp_event.GaussianDpEvent(z),
        lambda: dp_event.GaussianDpEvent,
    )
)
register_mechanism(
    Mechanism(
        "l2_laplace",
        lambda z: _event_classes()["L2LaplaceDpEvent"](z),
        lambda: _event_classes()["L2LaplaceDpEvent"],
        pure=True,
    )
)
register_mechanism(
    Mechanism(
        "discrete_gaussian",
        lambda z: _event_classes()["DiscreteGaussianDpEvent"](z),
        lambda: _event_classes()["DiscreteGaussianDpEvent"],
        renyi_only=True,
    )
)


def mechanism_names(*, pure: bool | None = None, renyi_only: bool | None = None) -> tuple[str, ...]:
    """Names of the registered mechanisms with the given properties (``None``: either)."""
    return tuple(
        m.name
        for m in MECHANISM_REGISTRY.values()
        if (pure is None or m.pure == pure) and (renyi_only is None or m.renyi_only == renyi_only)
    )


class Release(NamedTuple):
    """One release as the accountant sees it: its mechanism, noise multiplier and how many
    coordinates it drew from the exact grid sampler.

    Attributes
    ----------
    mechanism : str
        A name of :data:`MECHANISM_REGISTRY`.
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
    if mechanism not in MECHANISM_REGISTRY:
        raise DpfedInputError(
            f"mechanism must be one of {tuple(MECHANISM_REGISTRY)}. Found {mechanism!r}."
        )
    return Release(
        str(mechanism),
        check_positive("noise_multiplier", z),
        check_int("coordinates", coordinates, minimum=0),
    )


def release_event(release: Release) -> DpEvent:
    """The ``DpEvent`` of one release: its mechanism's (:data:`MECHANISM_REGISTRY`)."""
    return MECHANISM_REGISTRY[release.mechanism].event(release.noise_multiplier)


def releases_event(releases: Sequence[Release | tuple[str, float] | float]) -> DpEvent:
    """The composition of ``releases`` as one ``ComposedDpEvent`` (equal releases grouped into
    ``SelfComposedDpEvent``s, in sorted order). The events are the continuous mechanisms'; the
    exact grid sampler's coupling delta (:mod:`dpfed.privacy.coupling`) is not part of them."""
    plain = (as_release(r) for r in releases)
    groups = sorted(Counter(Release(r.mechanism, r.noise_multiplier) for r in plain).items())
    return dp_event.ComposedDpEvent(
        [dp_event.SelfComposedDpEvent(release_event(r), n) for r, n in groups]
    )


def gaussian_event(noise_multiplier: float, steps: int = 1) -> DpEvent:
    """``steps`` Gaussian releases of one noise multiplier."""
    one = dp_event.GaussianDpEvent(noise_multiplier)
    return one if steps == 1 else dp_event.SelfComposedDpEvent(one, steps)


def event_groups(event: DpEvent) -> dict[str, list[tuple[float, int]]]:
    """The releases a composed event holds: by mechanism name, the sorted ``(z, count)`` pairs.

    Walks ``ComposedDpEvent`` and ``SelfComposedDpEvent`` (``NoOpDpEvent`` holds nothing).

    Raises
    ------
    DpfedInputError
        For an event of no registered mechanism.
    """
    counts: Counter[tuple[str, float]] = Counter()
    by_type = {m.event_type(): m.name for m in MECHANISM_REGISTRY.values()}
    stack: list[tuple[Any, int]] = [(event, 1)]
    while stack:
        item, times = stack.pop()
        if isinstance(item, dp_event.ComposedDpEvent):
            stack.extend((e, times) for e in item.events)
        elif isinstance(item, dp_event.SelfComposedDpEvent):
            stack.append((item.event, times * int(item.count)))
        elif isinstance(item, dp_event.NoOpDpEvent):
            continue
        elif type(item) in by_type:
            counts[(by_type[type(item)], float(item.noise_multiplier))] += times
        else:
            raise DpfedInputError(
                f"no mechanism of {tuple(MECHANISM_REGISTRY)} releases {item!r}: dpfed's "
                "accountants read only its mechanisms' events."
            )
    groups: dict[str, list[tuple[float, int]]] = {}
    for (name, z), n in sorted(counts.items()):
        groups.setdefault(name, []).append((z, n))
    return groups


# --------------------------------------------------------------------------------------------
# dp-accounting's closed forms
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# one calibrator
# --------------------------------------------------------------------------------------------


def smallest_certifying(
    spent: Callable[[float], float],
    target: float,
    *,
    bracket: tuple[float, float] = (1.0, 1.0),
    rtol: float = 1e-12,
) -> float:
    r"""The smallest :math:`x > 0` (to relative precision ``rtol``) with
    :math:`\text{spent}(x) \le \text{target}`, for ``spent`` decreasing in :math:`x` (a noise
    scale's privacy spending).

    Widens ``bracket = (lo, hi)`` until ``spent(lo) > target >= spent(hi)``, then bisects; the
    returned :math:`x` always certifies the target.

    Raises
    ------
    DpfedInputError
        If no :math:`x` below :math:`10^{300}` reaches the target.
    """
    lo, hi = bracket
    while spent(hi) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e300:
            raise DpfedInputError(f"epsilon {target!r} cannot be reached by any noise multiplier.")
    while spent(lo) <= target:
        hi, lo = lo, lo / 2.0
        if lo < 1e-300:
            return hi
    # invariant: spent(lo) > target >= spent(hi)
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if spent(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def calibrate(
    event_of: Callable[[float], DpEvent],
    epsilon: float,
    delta: float,
    accountant: str = "pld",
    *,
    start: float | None = None,
) -> float:
    r"""The smallest noise multiplier :math:`z` whose releases ``event_of(z)`` the accountant
    certifies at ``(epsilon, delta)``:

    .. math::

        z^\star = \min \{ z > 0 : \varepsilon_{acc}(\text{event}(z), \delta) \le \varepsilon \},

    by bisection to relative precision :math:`10^{-12}` (:func:`smallest_certifying`), from
    ``start`` when given (e.g. the exact Gaussian composition's multiplier). ``event_of`` must
    be decreasing in privacy spending as :math:`z` grows (every release's multiplier a
    non-decreasing function of :math:`z`). Outside a classical accountant's proven range the
    map is :math:`+\infty`, so the result is inside it.

    Raises
    ------
    DpfedInputError
        For an unknown accountant, one that does not support the events, or a target no
        multiplier reaches.
    """
    acc = get_accountant(accountant)
    eps = check_positive("epsilon", epsilon)
    probe = event_of(1.0)
    if not acc.supports(probe):
        raise DpfedInputError(
            f"accountant must be one of {accountant_names(supporting=probe)} for these "
            f"releases. Found {accountant!r}."
        )
    bracket = (1.0, 1.0) if start is None else (float(start), float(start))
    return smallest_certifying(lambda z: acc.epsilon(event_of(z), delta), eps, bracket=bracket)


# --------------------------------------------------------------------------------------------
# the accountants
# --------------------------------------------------------------------------------------------


class Accountant(ABC):
    """An accountant: which compositions of releases it reads, and their epsilon.

    Attributes
    ----------
    name : str
        The name users pass (``--accountant``, ``[params] accountant``).
    mechanisms : tuple of str
        The mechanisms whose events it reads (:meth:`supports`).
    numerical : bool
        A numerical accountant of dp-accounting, which holds for every noise multiplier and
        every mechanism it reads.
    coupled : bool
        Built on the continuous Gaussian's privacy profile, so releases drawn by the exact grid
        sampler add its coupling delta (:mod:`dpfed.privacy.coupling`). Rényi bounds need none.
    classic : bool
        Rests on the classical Gaussian bound, proven only for a per-step epsilon of at most 1.
    """

    name: ClassVar[str]
    mechanisms: ClassVar[tuple[str, ...]] = ("gaussian",)
    numerical: ClassVar[bool] = False
    coupled: ClassVar[bool] = False
    classic: ClassVar[bool] = False

    def supports(self, event: DpEvent) -> bool:
        """Whether every release of ``event`` is of a mechanism this accountant reads."""
        try:
            groups = event_groups(event)
        except DpfedInputError:
            return False
        return all(name in self.mechanisms for name in groups)

    def epsilon(self, event: DpEvent, delta: float) -> float:
        """Epsilon at total ``delta`` of the releases ``event`` composes; 0.0 for none;
        :math:`+\\infty` where the accountant certifies nothing (outside a proven range).

        Raises
        ------
        DpfedInputError
            For releases of a mechanism it does not read.
        """
        groups = event_groups(event)
        unread = sorted(set(groups) - set(self.mechanisms))
        if unread:
            raise DpfedInputError(
                f"accountant {self.name!r} does not read releases of mechanisms {unread}: use "
                f"one of {accountant_names(supporting=event)}."
            )
        if not groups:
            return 0.0
        return self._epsilon(groups, delta)

    @abstractmethod
    def _epsilon(self, groups: dict[str, list[tuple[float, int]]], delta: float) -> float:
        """Epsilon of the non-empty ``groups`` (:func:`event_groups`)."""

    def check_gaussians(
        self, z_min: float, steps: int, delta: float, *, heterogeneous: bool = False
    ) -> None:
        """Refuse ``steps`` Gaussian releases, the smallest of multiplier ``z_min``, that the
        accountant cannot certify (a classical accountant outside its proven range); every
        multiplier passes by default."""
        return

    def check_target(self, epsilon: float, delta: float, steps: int) -> None:
        """Refuse a target epsilon for ``steps`` Gaussian releases above what the accountant
        certifies at all; every target passes by default."""
        return

    def calibrate(self, epsilon: float, delta: float, steps: int) -> float:
        """The smallest multiplier of ``steps`` Gaussian releases certified at ``(epsilon,
        delta)``; by default :func:`calibrate` on them."""
        return smallest_certifying(
            lambda z: self._epsilon({"gaussian": [(z, steps)]}, delta), epsilon
        )


#: Every accountant, by name, in registration order.
ACCOUNTANT_REGISTRY: dict[str, Accountant] = {}


def register_accountant(accountant: Accountant) -> Accountant:
    """Add ``accountant`` to :data:`ACCOUNTANT_REGISTRY` (its name must be new)."""
    if accountant.name in ACCOUNTANT_REGISTRY:
        raise ValueError(f"accountant {accountant.name!r} is already registered")
    ACCOUNTANT_REGISTRY[accountant.name] = accountant
    return accountant


def get_accountant(name: str) -> Accountant:
    """The registered accountant ``name``.

    Raises
    ------
    DpfedInputError
        If ``name`` is not a registered accountant.
    """
    if not isinstance(name, str) or name not in ACCOUNTANT_REGISTRY:
        raise DpfedInputError(
            f"accountant must be one of {tuple(ACCOUNTANT_REGISTRY)}. Found {name!r}."
        )
    return ACCOUNTANT_REGISTRY[name]


def accountant_names(
    *,
    numerical: bool | None = None,
    coupled: bool | None = None,
    classic: bool | None = None,
    supporting: DpEvent | None = None,
) -> tuple[str, ...]:
    """Names of the registered accountants with the given properties (``None``: either), and
    that read ``supporting`` when given, in registration order."""
    return tuple(
        a.name
        for a in ACCOUNTANT_REGISTRY.values()
        if (numerical is None or a.numerical == numerical)
        and (coupled is None or a.coupled == coupled)
        and (classic is None or a.classic == classic)
        and (supporting is None or a.supports(supporting))
    )


def _precision(pairs: Iterable[tuple[float, int]]) -> float:
    r""":math:`\sum_t z_t^{-2}` of ``(z, count)`` pairs (Gaussian DP's :math:`\mu^2`)."""
    return math.fsum(n / (z * z) for z, n in pairs)


#: Below this composed Gaussian multiplier the PLD grid would need terabytes; such releases
#: are accounted by RDP instead (an upper bound).
PLD_MIN_MULTIPLIER = 0.25

#: Value discretisation of every PLD built here (``PLDAccountant``'s default).
_PLD_DISCRETIZATION = 1e-4

#: Relative tolerance (in noise-multiplier space) of the RDP calibration.
_CALIBRATION_RTOL = 1e-4


class PldAccountant(Accountant):
    r"""Privacy loss distributions: exact for Gaussian releases, optimal composition for pure
    ones.

    Gaussian releases compose exactly to one Gaussian with :math:`z^{-2} = \sum_t z_t^{-2}`,
    whose epsilon is the analytic Gaussian one (:func:`~dpfed.privacy.closed_forms.
    gaussian_dp_epsilon`; the limit of dp-accounting's ``PLDAccountant`` as its discretisation
    goes to zero, and never above it). With pure-DP releases the PLDs of that Gaussian and of
    the dominating pair of each pure :math:`\varepsilon`-DP release are composed
    (dp-accounting's ``privacy_loss_distribution``; built here, not by ``PLDAccountant``, whose
    randomized response ignores a self-composition count and needs replace-one neighbours,
    under which its Gaussian doubles the sensitivity). Where the Gaussians compose to a
    multiplier below :data:`PLD_MIN_MULTIPLIER` the grid would not fit in memory, and RDP
    accounts instead (an upper bound).
    """

    name = "pld"
    mechanisms = ("gaussian", "l2_laplace")
    numerical = True
    coupled = True

    def _epsilon(self, groups: dict[str, list[tuple[float, int]]], delta: float) -> float:
        inv_sq = _precision(groups.get("gaussian", ()))
        pure = [(1.0 / z, n) for z, n in groups.get("l2_laplace", ())]
        if not pure:
            return gaussian_dp_epsilon(inv_sq, delta)
        if inv_sq > 0.0 and inv_sq**-0.5 < PLD_MIN_MULTIPLIER:
            return get_accountant("rdp")._epsilon(groups, delta)
        out = pld_lib.identity(value_discretization_interval=_PLD_DISCRETIZATION)
        if inv_sq > 0.0:
            out = out.compose(
                pld_lib.from_gaussian_mechanism(
                    standard_deviation=1.0 / math.sqrt(inv_sq),
                    value_discretization_interval=_PLD_DISCRETIZATION,
                )
            )
        for eps, n in sorted(pure):
            one = pld_lib.from_privacy_parameters(
                pld_common.DifferentialPrivacyParameters(eps, 0.0),
                value_discretization_interval=_PLD_DISCRETIZATION,
            )
            out = out.compose(one.self_compose(n) if n > 1 else one)
        return float(out.get_epsilon_for_delta(delta))

    def calibrate(self, epsilon: float, delta: float, steps: int) -> float:
        r"""Exact: :math:`z^\star = \sqrt{T}\, \sigma^\star(\varepsilon, \delta)`, the
        analytic-Gaussian multiplier of one release (``dp_accounting.get_sigma_gaussian``),
        nudged past the root finder's tolerance so that it certifies the target."""
        z = analytic_gaussian_multiplier(epsilon, delta) * math.sqrt(steps)
        while gaussian_dp_epsilon(steps / (z * z), delta) > epsilon:
            z *= 1.0 + 1e-12
        return z


class RdpAccountant(Accountant):
    r"""Rényi DP (dp-accounting's ``RdpAccountant`` with its default orders).

    Gaussian and discrete Gaussian releases are ``GaussianDpEvent``\ s (the discrete Gaussian's
    Rényi divergences are at most the continuous one's); a pure :math:`\varepsilon`-DP release
    is the binary randomized response at :math:`\varepsilon` (``RandomizedResponseDpEvent``
    with two buckets and :math:`p = 2 / (1 + e^{\varepsilon})`), whose pair of output
    distributions dominates that of every :math:`\varepsilon`-DP mechanism (Kairouz, Oh and
    Viswanath 2015). With pure releases or discrete Gaussians the accountant uses replace-one
    neighbours, under which it composes randomized response; its Gaussian RDP is that of a
    shift by one noise multiplier under either relation.
    """

    name = "rdp"
    mechanisms = ("gaussian", "l2_laplace", "discrete_gaussian")
    numerical = True

    def _epsilon(self, groups: dict[str, list[tuple[float, int]]], delta: float) -> float:
        if set(groups) == {"gaussian"}:
            acc = dp_accounting.rdp.RdpAccountant()
        else:
            acc = dp_accounting.rdp.RdpAccountant(
                neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
            )
        events = []
        for name in sorted(groups):
            for z, n in groups[name]:
                if MECHANISM_REGISTRY[name].pure:
                    one = dp_event.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(1.0 / z)), 2)
                else:
                    one = dp_event.GaussianDpEvent(z)
                events.append(dp_event.SelfComposedDpEvent(one, n))
        acc.compose(dp_event.ComposedDpEvent(events))
        return float(acc.get_epsilon(delta))

    def calibrate(self, epsilon: float, delta: float, steps: int) -> float:
        r"""``dp_accounting.calibrate_dp_mechanism`` on the bracket
        :math:`[0.9\, z_{exact},\ 1.25 \max(z_{moments}, z_{exact})]`, where :math:`z_{exact}`
        is the exact analytic-Gaussian multiplier for :math:`T` releases (a lower bound) and
        :math:`z_{moments}` the moments accountant's (usually an upper bound), widened if
        needed; tolerance :math:`10^{-4} z_{exact}`."""
        z_exact = analytic_gaussian_multiplier(epsilon, delta) * math.sqrt(steps)
        z_moments = smallest_certifying(
            lambda z: moments_epsilon(steps / (z * z), delta), epsilon, rtol=1e-6
        )
        lo = 0.9 * z_exact
        hi = 1.25 * max(z_moments, z_exact)
        tol = _CALIBRATION_RTOL * z_exact
        for _ in range(60):
            try:
                z = dp_accounting.calibrate_dp_mechanism(
                    dp_accounting.rdp.RdpAccountant,
                    lambda z: gaussian_event(z, steps),
                    epsilon,
                    delta,
                    bracket_interval=dp_accounting.ExplicitBracketInterval(lo, hi),
                    tol=tol,
                )
            except ValueError:  # the bracket did not contain the solution: widen it
                lo, hi = lo / 2.0, hi * 2.0
                continue
            return float(z)
        raise DpfedInputError(  # pragma: no cover - only for pathological inputs
            f"could not calibrate a noise multiplier for epsilon={epsilon!r}, "
            f"delta={delta!r}, steps={steps!r} with accountant 'rdp'."
        )


class _ClassicAccountant(Accountant):
    """Theorem 1 per step, proven only for a per-step epsilon of at most 1."""

    coupled = True
    classic = True

    @abstractmethod
    def delta_step(self, steps: int, delta: float) -> float:
        """The per-step delta of ``steps`` releases at total ``delta``."""

    @abstractmethod
    def max_epsilon(self, steps: int, delta: float) -> float:
        """The largest total it certifies: every step at the edge of the range."""

    def check_gaussians(
        self, z_min: float, steps: int, delta: float, *, heterogeneous: bool = False
    ) -> None:
        check_classic(
            z_min, steps, self.delta_step(steps, delta), self.name, heterogeneous=heterogeneous
        )

    def check_target(self, epsilon: float, delta: float, steps: int) -> None:
        limit = self.max_epsilon(steps, delta)
        if epsilon > limit * (1.0 + 1e-9):
            raise DpfedInputError(
                classic_range_message(
                    f"accountant {self.name!r} uses",
                    self.delta_step(steps, delta),
                    f"target epsilon {epsilon:g}, above the {limit:.4g} it certifies there "
                    f"over {steps} step{'s' if steps > 1 else ''} at delta {delta:g}",
                )
            )

    def _step_epsilons(
        self, groups: dict[str, list[tuple[float, int]]], delta: float
    ) -> tuple[list[tuple[float, int]], int] | None:
        """Per-step classical epsilons as ``(eps, count)`` pairs and the step count; None
        outside the proven range."""
        pairs = groups["gaussian"]
        steps = sum(n for _, n in pairs)
        d_step = self.delta_step(steps, delta)
        eps = [(classic_step_epsilon(z, d_step), n) for z, n in pairs]
        if not all(in_classic_range(e) for e, _ in eps):
            return None
        return eps, steps


class AdvancedAccountant(_ClassicAccountant):
    r"""Theorem 1 per step with :math:`\delta_{step} = \delta / (2T)`, then Corollary 1 (one
    multiplier) or advanced composition (several) with :math:`\delta' = \delta / 2`."""

    name = "advanced"

    def delta_step(self, steps: int, delta: float) -> float:
        return delta / (2.0 * steps)

    def max_epsilon(self, steps: int, delta: float) -> float:
        return corollary1_epsilon(CLASSIC_MAX_EPSILON, steps, delta / 2.0)

    def _epsilon(self, groups: dict[str, list[tuple[float, int]]], delta: float) -> float:
        read = self._step_epsilons(groups, delta)
        if read is None:
            return math.inf
        eps, steps = read
        if len(eps) == 1:
            return corollary1_epsilon(eps[0][0], steps, delta / 2.0)
        each = [e for e, n in eps for _ in range(n)]
        return advanced_composition(each, self.delta_step(steps, delta), delta / 2.0)[0]


class BasicAccountant(_ClassicAccountant):
    r"""Theorem 1 per step with :math:`\delta_{step} = \delta / T`, then
    :math:`\varepsilon = \sum_t \varepsilon_t`."""

    name = "basic"

    def delta_step(self, steps: int, delta: float) -> float:
        return delta / steps

    def max_epsilon(self, steps: int, delta: float) -> float:
        return steps * CLASSIC_MAX_EPSILON

    def _epsilon(self, groups: dict[str, list[tuple[float, int]]], delta: float) -> float:
        read = self._step_epsilons(groups, delta)
        if read is None:
            return math.inf
        eps, _ = read
        if len(eps) == 1:
            return eps[0][1] * eps[0][0]
        return math.fsum(e for e, n in eps for _ in range(n))


class MomentsAccountant(Accountant):
    r"""The moments accountant of Abadi et al. in closed form for the Gaussian (no sampling):
    the log moments add, :math:`\alpha(\tau) = \frac{\tau(\tau+1)}{2} \sum_t z_t^{-2}`, and
    :math:`\varepsilon = \min_{\tau \ge 1} (\alpha(\tau) + \ln(1/\delta)) / \tau`
    (:func:`~dpfed.privacy.closed_forms.moments_epsilon`). A Rényi bound: no coupling delta."""

    name = "moments"

    def _epsilon(self, groups: dict[str, list[tuple[float, int]]], delta: float) -> float:
        return moments_epsilon(_precision(groups["gaussian"]), delta)

    def calibrate(self, epsilon: float, delta: float, steps: int) -> float:
        r"""The closed form inverted exactly. With :math:`S = T/z^2` and
        :math:`L = \ln(1/\delta)` the epsilon is :math:`S/2 + \sqrt{2SL}` for
        :math:`S \le 2L` and :math:`S + L` otherwise; both increase in :math:`S` and meet at
        :math:`S = 2L`, :math:`\varepsilon = 3L`. Hence

        .. math::

            S = \begin{cases}
                \big(\sqrt{2(L + \varepsilon)} - \sqrt{2L}\big)^2 & \varepsilon \le 3L,\\
                \varepsilon - L & \varepsilon > 3L,
            \end{cases}
            \qquad z = \sqrt{T/S},

        raised by relative steps of :math:`10^{-12}` until the figure certifies the target.
        """
        big_l = math.log(1.0 / delta)
        if epsilon <= 3.0 * big_l:
            root = math.sqrt(2.0 * (big_l + epsilon)) - math.sqrt(2.0 * big_l)
            s = root * root
        else:
            s = epsilon - big_l
        z = math.sqrt(steps / s)
        while moments_accountant_epsilon(z, steps, delta) > epsilon:
            z *= 1.0 + 1e-12
        return z


for _accountant in (
    PldAccountant(),
    RdpAccountant(),
    AdvancedAccountant(),
    BasicAccountant(),
    MomentsAccountant(),
):
    register_accountant(_accountant)
