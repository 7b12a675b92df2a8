"""The two messages of ADMM sharing. Nothing else crosses a party boundary while training."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfed.runtime.messages import Message


@dataclass(frozen=True)
class Scores(Message):
    """Party -> label holder: the party's (perturbed) scores ``D_m x~_m``, shape ``(N,)``, and
    in the last round, when the label holder asked for them, the released weighting statistics
    of its final model (shape ``(3,)``, see :mod:`dpfed.protocols.vertical.weighting`)."""

    scores: np.ndarray
    statistics: np.ndarray | None = None


@dataclass(frozen=True)
class Broadcast(Message):
    """Label holder -> party: residual ``s - z`` and dual ``y`` (both ``(N,)``), the penalty
    for the next x-update, and whether training has finished (then no reply is expected).

    Before the last x-update of a weighted job it also carries what the parties' statistics
    are computed with (:class:`~dpfed.protocols.vertical.weighting.WeightingRequest`:
    ``gradient``, ``curvature`` and ``change``, each ``(N,)``, and for the logistic loss
    ``rising`` and ``falling``); the final broadcast then carries the ``passive_weight`` every
    passive party scales its model by.
    """

    residual: np.ndarray
    dual: np.ndarray
    rho: float
    finished: bool = False
    gradient: np.ndarray | None = None
    curvature: np.ndarray | None = None
    change: np.ndarray | None = None
    passive_weight: float | None = None
    rising: np.ndarray | None = None
    falling: np.ndarray | None = None
