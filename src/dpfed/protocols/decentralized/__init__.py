"""Decentralized learning over a network: ADMM between graph neighbours, without noise or with
dual (DVP) or primal (PVP) variable perturbation (Zhang & Zhu, paper 001).

Every node holds its own rows and talks to its neighbours only: per round it broadcasts one
vector (its primal estimate, or its perturbed version) and updates its dual from what its
neighbours broadcast.
"""

from dpfed.protocols.decentralized.messages import NodeModel
from dpfed.protocols.decentralized.roles import PERTURBATIONS, DecentralizedNode

__all__ = ["PERTURBATIONS", "DecentralizedNode", "NodeModel"]
