"""The two messages of ADMM sharing. Nothing else crosses a party boundary while training."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfed.runtime.messages import Message


@dataclass(frozen=True)
class Scores(Message):
    """Party -> label holder: the party's (perturbed) scores ``D_m x~_m``, shape ``(N,)``."""

    scores: np.ndarray


@dataclass(frozen=True)
class Broadcast(Message):
    """Label holder -> party: residual ``s - z`` and dual ``y`` (both ``(N,)``), the penalty
    for the next x-update, and whether training has finished (then no reply is expected)."""

    residual: np.ndarray
    dual: np.ndarray
    rho: float
    finished: bool = False
