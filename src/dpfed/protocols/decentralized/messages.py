"""The one message of decentralized ADMM."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfed.runtime.messages import Message


@dataclass(frozen=True)
class NodeModel(Message):
    """Node -> neighbour: the node's broadcast of round ``round`` (its primal
    :math:`f_p(t)`, or under PVP :math:`V_p(t) = f_p(t) + \\epsilon_p(t)`), shape ``(d,)``."""

    model: np.ndarray
