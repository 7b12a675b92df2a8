"""Pure optimisation math: losses, regularisers, feasible sets, ADMM sharing steps.

No randomness and no I/O live here.
"""

from dpfed.core.constraints import Ball, Box, FeasibleSet, Unconstrained
from dpfed.core.losses import (
    LOSSES,
    LogisticLoss,
    Loss,
    SigmoidLoss,
    SmoothedHingeLoss,
    SquaredLoss,
    get_loss,
)
from dpfed.core.regularizers import (
    L1,
    L2,
    REGULARIZERS,
    ElasticNet,
    Regularizer,
    get_regularizer,
)

__all__ = [
    "L1",
    "L2",
    "LOSSES",
    "REGULARIZERS",
    "Ball",
    "Box",
    "ElasticNet",
    "FeasibleSet",
    "LogisticLoss",
    "Loss",
    "Regularizer",
    "SigmoidLoss",
    "SmoothedHingeLoss",
    "SquaredLoss",
    "Unconstrained",
    "get_loss",
    "get_regularizer",
]
