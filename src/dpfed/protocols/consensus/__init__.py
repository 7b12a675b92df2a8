"""Horizontal (sample-partitioned) learning with a server: (DP) consensus ADMM.

Client ``i`` holds ``m_i`` rows. Per round it receives the global model, solves its local
problem exactly, adds Gaussian noise and uploads the noisy local model; the server averages
and runs the dual updates. Every client's dual is a function of released values, so the
server and the client track it identically and it never travels.
"""

from dpfed.protocols.consensus.messages import GlobalModel, LocalModel
from dpfed.protocols.consensus.roles import ConsensusClient, ConsensusServer, ServerRecord

__all__ = ["ConsensusClient", "ConsensusServer", "GlobalModel", "LocalModel", "ServerRecord"]
