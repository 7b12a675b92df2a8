"""The label holder's weighting of the passive parties, as steps of its role
(:class:`~dpfed.protocols.vertical.roles.LabelHolder`; the mathematics in
:mod:`dpfed.protocols.vertical.weighting`).

The label holder fits its exact local-only model when it starts; the broadcast before the last
x-update asks every passive party for the released statistics of its scores; once it holds
them all, it chooses the passive weight and combines its own model with its local-only one.
"""

from __future__ import annotations

import numpy as np

from dpfed.core.losses import Loss
from dpfed.core.regularizers import Regularizer
from dpfed.core.rows import Matrix
from dpfed.protocols.vertical.weighting import (
    PassiveWeight,
    StatisticsRelease,
    WeightingRequest,
    choose_passive_weight,
    fit_local_model,
    third_derivative_bound,
)
from dpfed.runtime.messages import ProtocolError

__all__ = ["PassiveWeighting"]


class PassiveWeighting:
    """The weighting steps of the label holder's role: the state below is the role's.

    Attributes
    ----------
    statistics_release : StatisticsRelease or None
        The job's release of weighting statistics (None: the job does not weigh).
    local_model : ndarray or None
        The label holder's exact local-only model, once fitted.
    statistics : dict of str to ndarray
        The released statistics received from each passive party.
    weighting : PassiveWeight or None
        The chosen weight and the bounds behind it.
    """

    name: str
    parties: list[str]
    block: Matrix
    labels: np.ndarray
    loss: Loss
    regularizer: Regularizer
    reg_weight: float
    model: np.ndarray
    max_rounds: int
    statistics_release: StatisticsRelease | None
    local_model: np.ndarray | None
    statistics: dict[str, np.ndarray]
    weighting: PassiveWeight | None

    def _requests_statistics(self, round: int) -> bool:
        """Whether the broadcast of ``round`` asks for statistics (before the last x-update)."""
        return self.statistics_release is not None and round == self.max_rounds - 1

    def _fit_local_model(self) -> None:
        """The exact local-only model: what the label holder learns without federating."""
        l2 = self.reg_weight * self.regularizer.strong_convexity
        self.local_model = fit_local_model(self.block, self.labels, self.loss, l2)

    def _request(self) -> tuple[WeightingRequest, np.ndarray]:
        """The request to the first passive party (the others get it without the change), and
        the part of the label holder's score change that clipping left out of it."""
        release = self.statistics_release
        if release is None or self.local_model is None:
            raise ProtocolError(f"{self.name} has no local model to weigh the parties against.")
        local = np.asarray(self.block @ self.local_model).reshape(-1)
        change = np.asarray(self.block @ self.model).reshape(-1) - local
        bound = release.score_bound
        shared = np.clip(change, -bound, bound)
        # the step of row i's score: its own change plus every passive score, each within V
        reach = np.abs(change) + len(self.parties) * bound
        request = WeightingRequest.at(self.loss, local, self.labels, shared, reach)
        return request, change - shared

    def _weigh_passive_parties(self) -> float:
        """Choose the passive weight, combine the label holder's own model accordingly."""
        release = self.statistics_release
        if release is None or self.local_model is None:
            raise ProtocolError(f"{self.name} holds statistics it did not ask for.")
        missing = [p for p in self.parties if p not in self.statistics]
        if missing:
            raise ProtocolError(f"{self.name} misses the weighting statistics of {missing}.")
        request, left_out = self._request()
        c3 = third_derivative_bound(self.loss)
        self.weighting = choose_passive_weight(
            own_change=left_out,
            request=request,
            upper_bounds=[release.upper(self.statistics[p]) for p in self.parties],
            c3=0.0 if c3 is None else c3,
        )
        self.statistics = {}
        beta = self.weighting.weight
        self.model = (1.0 - beta) * self.local_model + beta * self.model
        return beta
