"""The three messages of the networked secure sum."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfed.runtime.messages import Message


@dataclass(frozen=True)
class NodeKey(Message):
    """Compute node -> client: the node's X25519 public key, the 32 raw bytes viewed as
    ``int64`` of shape ``(4,)``. The channel is mutually authenticated, so the client knows
    whose key it is."""

    public_key: np.ndarray


@dataclass(frozen=True)
class SealedShare(Message):
    """Client -> compute node: the client's share for this node, sealed for it alone
    (:func:`dpfed.dca.envelope.seal_for_nodes`). ``envelope`` holds the envelope's bytes
    padded with zeros to a multiple of 8 and viewed as ``int64``; ``length`` is the envelope's
    length in bytes."""

    envelope: np.ndarray
    length: int


@dataclass(frozen=True)
class ReceivedReport(Message):
    """Compute node -> the other compute nodes: which clients' shares it received
    (``received``, bool of shape ``(N,)``, in the job's client order). Every node sums over
    the clients all nodes received, so the masks cancel."""

    received: np.ndarray
