"""The DCA secure sum as transport-free roles: clients secret-share their noisy vectors among
compute nodes, which agree on the clients to include and sum what they received."""

from dpfed.protocols.secure_sum.messages import NodeKey, ReceivedReport, SealedShare
from dpfed.protocols.secure_sum.roles import ComputeNode, SecureSumClient

__all__ = ["ComputeNode", "NodeKey", "ReceivedReport", "SealedShare", "SecureSumClient"]
