"""Vertical (feature-partitioned) learning by DP ADMM sharing.

Party ``m`` holds the column block ``D_m`` of the same ``N`` rows; the label holder also runs
the central node. Per round a party sends one number per sample (its scores ``D_m x_m``) and
receives the residual ``sum_k D_k x_k - z`` and the dual ``y``.
"""

from dpfed.protocols.vertical.mechanisms import (
    MECHANISMS,
    NoPrivacy,
    PaperMechanism,
    PartyMechanism,
    SoundMechanism,
)
from dpfed.protocols.vertical.messages import Broadcast, Scores
from dpfed.protocols.vertical.roles import LabelHolder, PassiveParty, RoundRecord

__all__ = [
    "MECHANISMS",
    "Broadcast",
    "LabelHolder",
    "NoPrivacy",
    "PaperMechanism",
    "PartyMechanism",
    "PassiveParty",
    "RoundRecord",
    "Scores",
    "SoundMechanism",
]
