r"""An append-only record of every noisy release, and the privacy it spends.

Each party's releases are accounted separately: a party's epsilon is that of the composition of
all releases computed from its data,

.. math::

    \varepsilon_{party} = \varepsilon_{acc}\big((m_1, z_1), \dots, (m_T, z_T);\ \delta\big),
    \qquad z_t = \sigma_t / C_t,

with :math:`m_t` the mechanism of release :math:`t` (Gaussian or pure-DP l2-Laplace); see
:func:`dpfed.privacy.accounting.releases_epsilon`, the one function the per-job ledger and the
persistent budget both account with.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.accounting import (
    MECHANISMS,
    Release,
    advanced_composition,
    check_accountant,
    releases_epsilon,
    releases_event,
)

if TYPE_CHECKING:
    from dpfed.privacy.accounting import DpEvent

__all__ = ["PrivacyEvent", "PrivacyLedger"]

# Relative tolerance for noise_multiplier == sigma / l2_sensitivity.
_MULTIPLIER_RTOL = 1e-6


def _check_text(name: str, value: object, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value):
        kind = "a string" if allow_empty else "a non-empty string"
        raise DpfedInputError(f"{name} must be {kind}. Found {value!r}.")
    return value


@dataclass(frozen=True)
class PrivacyEvent:
    r"""One noisy release computed from one party's data.

    Parameters
    ----------
    party : str
        Whose data the release depends on.
    round : int
        Iteration (>= 0) in which the release happened.
    mechanism : str
        Noise mechanism; the ledger accounts those of
        :data:`~dpfed.privacy.accounting.MECHANISMS` (``"gaussian"``, ``"l2_laplace"``).
    noise_multiplier : float
        :math:`z = \sigma / C`, finite and > 0. A release without noise is refused.
    l2_sensitivity : float
        :math:`\ell_2` sensitivity :math:`C > 0` of the released quantity.
    sigma : float
        Noise standard deviation :math:`\sigma > 0`; must agree with ``noise_multiplier``
        (:math:`z = \sigma / C` to a relative :math:`10^{-6}`).
    label : str, default ""
        What was released, e.g. ``"message"``, ``"model"``, ``"dual"``.
    epsilon, delta : float or None
        Per-release :math:`(\varepsilon, \delta)` of a paper-style analysis, when the
        mechanism states one. Given together or not at all; :math:`\varepsilon > 0`,
        :math:`\delta \in (0, 1)`.
    coordinates : int, default 0
        How many coordinates the release drew from the exact grid sampler (each adds the
        coupling's delta, :mod:`dpfed.privacy.coupling`); 0 for noise drawn otherwise.

    Raises
    ------
    DpfedInputError
        If any field is invalid.
    """

    party: str
    round: int
    mechanism: str
    noise_multiplier: float
    l2_sensitivity: float
    sigma: float
    label: str = ""
    epsilon: float | None = None
    delta: float | None = None
    coordinates: int = 0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field (and normalise numbers to ``int``/``float``).

        Raises
        ------
        DpfedInputError
            If a field is invalid; the message names the field, the value and what was
            expected.
        """
        put = object.__setattr__
        _check_text("party", self.party)
        put(self, "round", check_int("round", self.round, minimum=0))
        _check_text("mechanism", self.mechanism)
        _check_text("label", self.label, allow_empty=True)
        z = check_positive("noise_multiplier", self.noise_multiplier)
        c = check_positive("l2_sensitivity", self.l2_sensitivity)
        s = check_positive("sigma", self.sigma)
        if not math.isclose(z, s / c, rel_tol=_MULTIPLIER_RTOL):
            raise DpfedInputError(
                "noise_multiplier must equal sigma / l2_sensitivity "
                f"(= {s / c!r}). Found {self.noise_multiplier!r}."
            )
        put(self, "noise_multiplier", z)
        put(self, "l2_sensitivity", c)
        put(self, "sigma", s)
        put(self, "coordinates", check_int("coordinates", self.coordinates, minimum=0))
        if (self.epsilon is None) != (self.delta is None):
            raise DpfedInputError(
                "epsilon and delta must be given together or not at all. "
                f"Found epsilon={self.epsilon!r}, delta={self.delta!r}."
            )
        if self.epsilon is not None and self.delta is not None:
            put(self, "epsilon", check_positive("epsilon", self.epsilon))
            put(self, "delta", check_open_unit("delta", self.delta))

    def to_dict(self) -> dict[str, Any]:
        """Plain-``dict`` form (JSON-serialisable)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrivacyEvent:
        """Inverse of :meth:`to_dict`; unknown or missing keys are errors."""
        if not isinstance(data, Mapping):
            raise DpfedInputError(f"a privacy event must be a mapping. Found {data!r}.")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise DpfedInputError(
                f"a privacy event has fields {names}. Found unknown keys {unknown}."
            )
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        missing = [k for k in required if k not in data]
        if missing:
            raise DpfedInputError(
                f"a privacy event needs the keys {required}. Missing {missing} in {dict(data)!r}."
            )
        return cls(**dict(data))


class PrivacyLedger:
    """Append-only list of :class:`PrivacyEvent`; accounts epsilon per party.

    Parameters
    ----------
    events : iterable of PrivacyEvent, optional
        Events recorded, in order, at construction.

    Notes
    -----
    The ledger never drops or edits a recorded event; there is no removal method.
    """

    def __init__(self, events: Iterable[PrivacyEvent] = ()) -> None:
        self._events: list[PrivacyEvent] = []
        for event in events:
            self.record(event)

    # ---------------------------------------------------------------- recording and queries

    def record(self, event: PrivacyEvent) -> PrivacyEvent:
        """Validate and append ``event``; returns it.

        Raises
        ------
        DpfedInputError
            If ``event`` is not a valid :class:`PrivacyEvent`.
        """
        if not isinstance(event, PrivacyEvent):
            raise DpfedInputError(f"event must be a PrivacyEvent. Found {event!r}.")
        event.validate()
        self._events.append(event)
        return event

    def events(self, party: str | None = None) -> list[PrivacyEvent]:
        """Recorded events in order (a copy), optionally only those of ``party``."""
        if party is None:
            return list(self._events)
        return [e for e in self._events if e.party == party]

    def parties(self) -> list[str]:
        """Parties with at least one event, in order of first release."""
        return list(dict.fromkeys(e.party for e in self._events))

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        return f"PrivacyLedger({len(self._events)} events, parties={self.parties()})"

    def _party_events(self, party: str) -> list[PrivacyEvent]:
        events = self.events(party)
        if not events:
            raise DpfedInputError(
                f"party must have recorded events; known parties are {self.parties()}. "
                f"Found {party!r}."
            )
        return events

    # ---------------------------------------------------------------- accounting

    def releases(self, party: str) -> list[Release]:
        """``party``'s releases as the accountant sees them, in recording order.

        Raises
        ------
        DpfedInputError
            For an unknown party or a release whose mechanism is not one of
            :data:`~dpfed.privacy.accounting.MECHANISMS`.
        """
        out = []
        for e in self._party_events(party):
            if e.mechanism not in MECHANISMS:
                raise DpfedInputError(
                    f"mechanism must be one of {MECHANISMS} for accounting. "
                    f"Found {e.mechanism!r} (party {party!r}, round {e.round})."
                )
            out.append(Release(e.mechanism, e.noise_multiplier, e.coordinates))
        return out

    def dp_event(self, party: str) -> DpEvent:
        """The composition of ``party``'s releases as one dp-accounting ``DpEvent``
        (see :func:`~dpfed.privacy.accounting.releases_event`)."""
        return releases_event(self.releases(party))

    def epsilon(self, party: str, delta: float, *, accountant: str = "pld") -> float:
        r"""Epsilon spent by ``party`` at total delta ``delta``.

        All of the party's releases are composed:

        .. math::

            \varepsilon = \varepsilon_{acc}\big((m_1, z_1), \dots, (m_T, z_T); \delta\big),

        via :func:`~dpfed.privacy.accounting.releases_epsilon`.

        Parameters
        ----------
        party : str
            A party with recorded events.
        delta : float
            Total delta in (0, 1).
        accountant : str, default "pld"
            One of :data:`~dpfed.privacy.accounting.ACCOUNTANTS`; pure-DP releases need one of
            :data:`~dpfed.privacy.accounting.NUMERICAL_ACCOUNTANTS`.

        Raises
        ------
        DpfedInputError
            For a bad delta or accountant, an unknown party, a release of an unaccounted
            mechanism, with ``"basic"``/``"advanced"`` a release outside the classical Gaussian
            bound's proved range (per-step epsilon above 1), or a closed-form accountant asked
            to account pure-DP releases.
        """
        check_open_unit("delta", delta)
        check_accountant(accountant)
        return releases_epsilon(self.releases(party), delta, accountant)

    def paper_epsilon(self, party: str, delta_prime: float) -> tuple[float, float]:
        r"""Advanced composition of ``party``'s stated per-release :math:`(\varepsilon, \delta)`.

        .. math::

            \varepsilon' = \sqrt{2 \ln(1/\delta') \sum_t \varepsilon_t^2}
                           + \sum_t \varepsilon_t (e^{\varepsilon_t} - 1), \qquad
            \delta_{tot} = \sum_t \delta_t + \delta'.

        Parameters
        ----------
        party : str
            A party with recorded events.
        delta_prime : float
            Slack :math:`\delta'` in (0, 1).

        Returns
        -------
        tuple of float
            ``(epsilon_prime, delta_total)``.

        Raises
        ------
        DpfedInputError
            For an unknown party or if any of its events lacks ``epsilon``/``delta``.
        """
        check_open_unit("delta_prime", delta_prime)
        events = self._party_events(party)
        epsilons, deltas = [], []
        for e in events:
            if e.epsilon is None or e.delta is None:
                raise DpfedInputError(
                    "every event needs a per-release epsilon and delta for paper_epsilon. "
                    f"Found epsilon={e.epsilon!r}, delta={e.delta!r} "
                    f"(party {party!r}, round {e.round}, label {e.label!r})."
                )
            epsilons.append(float(e.epsilon))
            deltas.append(float(e.delta))
        return advanced_composition(epsilons, deltas, delta_prime)

    def summary(self, delta: float, accountant: str = "pld") -> dict[str, Any]:
        """Per-party releases and epsilon, and the largest epsilon over parties.

        Returns
        -------
        dict
            ``{"delta": delta, "accountant": accountant, "parties": {party: {"releases": n,
            "epsilon": eps}}, "max_epsilon": max_eps}``; ``max_epsilon`` is 0.0 for an empty
            ledger.
        """
        d = check_open_unit("delta", delta)
        check_accountant(accountant)
        per_party = {
            p: {
                "releases": len(self.events(p)),
                "epsilon": self.epsilon(p, d, accountant=accountant),
            }
            for p in self.parties()
        }
        max_eps = max((v["epsilon"] for v in per_party.values()), default=0.0)
        return {
            "delta": d,
            "accountant": accountant,
            "parties": per_party,
            "max_epsilon": max_eps,
        }

    # ---------------------------------------------------------------- serialisation

    def to_json(self) -> list[dict[str, Any]]:
        """All events as plain dicts, in order (pass to ``json.dumps``)."""
        return [e.to_dict() for e in self._events]

    @classmethod
    def from_json(cls, data: str | Sequence[Mapping[str, Any]]) -> PrivacyLedger:
        """Rebuild a ledger from :meth:`to_json` output, or from that output as JSON text.

        Raises
        ------
        DpfedInputError
            If the data is not a list of valid events.
        """
        if isinstance(data, str | bytes):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as err:
                raise DpfedInputError(
                    f"ledger JSON must be valid JSON. Found error: {err}."
                ) from None
        if not isinstance(data, Sequence) or isinstance(data, str | bytes | Mapping):
            raise DpfedInputError(f"ledger JSON must be a list of events. Found {data!r}.")
        events = []
        for i, item in enumerate(data):
            try:
                events.append(PrivacyEvent.from_dict(item))
            except DpfedInputError as err:
                raise DpfedInputError(f"event {i}: {err}") from None
        return cls(events)
