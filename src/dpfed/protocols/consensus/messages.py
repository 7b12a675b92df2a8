"""The two messages of consensus ADMM."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfed.runtime.messages import Message


@dataclass(frozen=True)
class GlobalModel(Message):
    """Server -> client: the global model :math:`w^k`, shape ``(d,)``, and whether training has
    finished (then no reply is expected)."""

    model: np.ndarray
    finished: bool = False


@dataclass(frozen=True)
class LocalModel(Message):
    """Client -> server: the client's released (noisy) local model :math:`\\tilde w_i^k`,
    shape ``(d,)``."""

    model: np.ndarray
