r"""The label holder's weighting of the passive parties' scores, as steps of the networked
secure role (:class:`~dpfed.protocols.vertical_secure.roles.SecureRole`; the mathematics in
:mod:`dpfed.protocols.vertical_secure.weighting`).

After the last round the label holder sends every passive party
:math:`\mathrm{Enc}_L(r), \mathrm{Enc}_L(c)` at its own model (``"request"``); each passive
party returns its three noisy statistics under the label holder's key (``"statistics"``, its
round :math:`T + 1` release); once it has all of them, the label holder decrypts them, chooses
one weight for every passive party's clipped scores and takes its own model as its block.
Under ``protect="passive"`` it tells every passive party the weight (:class:`WeightRelease`);
under ``"parties"`` the weight, a function of its protected data, stays with it and it weighs
the shares it receives (:meth:`WeighingSteps.peer_share`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, cast

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.protocols.vertical.weighting import WeightingRequest
from dpfed.protocols.vertical_secure.messages import WeightRelease
from dpfed.protocols.vertical_secure.party import SecureParty
from dpfed.protocols.vertical_secure.setup import SecureSetup
from dpfed.protocols.vertical_secure.weighting import (
    WeightedPassive,
    choose_weight,
    encrypted_request,
    encrypted_statistics,
    split_request,
    weighting_request,
)
from dpfed.runtime.messages import Message, ProtocolError
from dpfed.secure import ckks

__all__ = ["WeighingSteps"]


class WeighingSteps(ABC):
    """The weighting's steps of a secure role: the state below is the role's."""

    party: SecureParty
    setup: SecureSetup
    outbox: Any
    names: tuple[str, ...]
    name: str
    index: int
    k: int
    round: int
    publics: dict[int, bytes]
    request: list[bytes] | None
    statistics: dict[int, list[bytes]]
    weighting: WeightedPassive | None
    weight: float | None

    @property
    def passives(self) -> range:
        """The passive parties' indices."""
        return range(1, self.k)

    @abstractmethod
    def _parts(
        self, to: int, kind: str, block: int, round: int, items: list[bytes]
    ) -> list[Message]:
        """``items`` as the parts of one ciphertext message to party ``to``."""

    @abstractmethod
    def _context(self, holder: int) -> ckks.PublicContext:
        """Key holder ``holder``'s public context."""

    @abstractmethod
    def _event(self, round: int, label: str, sensitivity: float, coordinates: int) -> None:
        """Record a release of its data."""

    @abstractmethod
    def _finish(self) -> list[Message]:
        """A passive party's last word."""

    @abstractmethod
    def _maybe_finish(self) -> list[Message]:
        """The label holder's report of the finished job, once everything is in."""

    def _own_request(self) -> WeightingRequest:
        party = self.party
        if party.own_model is None:  # protect="parties": fitted only after every release
            party.fit_own_model()
        assert party.own_model is not None and party.y is not None
        own_scores = np.asarray(party.rows @ party.own_model).ravel()
        return weighting_request(own_scores, party.y, self.setup.weighting_reach)

    def _request(self) -> list[Message]:
        r"""The label holder's :math:`\mathrm{Enc}_L(r), \mathrm{Enc}_L(c),
        \mathrm{Enc}_L([u; w])` at its own model, to every passive party."""
        keys = self.party.keys
        assert keys is not None
        request = self._own_request()
        items = self.outbox.kept("request", lambda: encrypted_request(keys, request))
        return [
            m
            for passive in self.passives
            for m in self._parts(passive, "request", passive, self.setup.rounds, items)
        ]

    def _statistics(self) -> list[Message]:
        """A passive party's noisy statistics under the label holder's key, once it has both
        the request and its final block."""
        if self.request is None or self.round != self.setup.rounds or self.weight is not None:
            return []
        if 0 not in self.publics:
            raise ProtocolError(f"{self.name} has not received {self.names[0]}'s context")
        try:
            request = split_request(self.request, self.setup.n_samples, self._context(0).slots)
        except DpfedInputError as exc:
            raise ProtocolError(str(exc)) from exc
        release = self.setup.statistics_release()
        noise = release.noise(self.party.rng)
        scores = np.asarray(self.party.rows @ self.party.w).ravel()
        public = self._context(0)
        items = self.outbox.kept(
            "statistics", lambda: encrypted_statistics(release, public, request, scores, noise)
        )
        self._event(self.setup.rounds + 1, "secure weighting statistics", 1.0, 0)
        self.request = None  # answered; nothing else waits for it
        out = self._parts(0, "statistics", self.index, self.setup.rounds, items)
        if self.setup.protect == "parties":  # the weight stays with the label holder
            out += self._finish()
        return out

    def _take_statistics(self, passive: int, items: list[bytes]) -> list[Message]:
        if (
            self.round != self.setup.rounds
            or self.weighting is not None
            or len(items) != 3
            or passive in self.statistics
        ):
            raise ProtocolError(
                f"{self.name} did not expect {len(items)} statistics from {self.names[passive]} now"
            )
        self.statistics[passive] = items
        if len(self.statistics) < self.k - 1:
            return []
        return self._weigh() + self._maybe_finish()

    def _weigh(self) -> list[Message]:
        """The label holder's weight from every passive party's decrypted statistics; its
        own model becomes its block."""
        keys, party = self.party.keys, self.party
        assert keys is not None
        released = [keys.decrypt_sums(self.statistics[m]) for m in self.passives]
        if not all(np.all(np.isfinite(r)) for r in released):
            raise ProtocolError("the weighting statistics are not finite")
        self.weighting = choose_weight(
            self.setup.statistics_release(), self._own_request(), released
        )
        self.statistics = {}
        assert party.own_model is not None
        party.w = party.own_model.copy()
        if self.setup.protect == "parties":  # a function of its protected data: kept
            return []
        return [
            WeightRelease(self.name, self.names[m], self.setup.rounds, self.weighting.beta)
            for m in self.passives
        ]

    def _take_weight(self, message: WeightRelease) -> list[Message]:
        weight = float(message.weight)
        if self.weight is not None or self.round != self.setup.rounds or not 0.0 <= weight <= 1:
            raise ProtocolError(f"{self.name} did not expect the weight {weight} now")
        self.weight = weight
        return self._finish()

    def share(self, scores: np.ndarray) -> np.ndarray:
        """Its share of a prediction from its rows' ``scores``: a passive party's clipped
        and weighted when the label holder told it the weight, else the scores."""
        if self.index != 0 and self.weight is not None:
            bound = self.setup.passive_score_bound
            return cast(np.ndarray, self.weight * np.clip(scores, -bound, bound))
        return scores

    def peer_share(self, scores: np.ndarray) -> np.ndarray:
        """What the label holder makes of a passive party's share under
        ``protect="parties"``, where the weight stays with it: clipped and weighted; else the
        share as sent."""
        if self.index == 0 and self.setup.protect == "parties" and self.weighting is not None:
            return self.weighting.share(scores)
        return scores
