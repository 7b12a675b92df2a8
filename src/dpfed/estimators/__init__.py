"""scikit-learn style front ends over the protocols."""

from dpfed.estimators.bayes import DPBayesianLinearRegression
from dpfed.estimators.horizontal import (
    ConsensusLogisticRegression,
    DecentralizedLogisticRegression,
)
from dpfed.estimators.vertical import VerticalLinearClassifier, VerticalLogisticRegression

__all__ = [
    "ConsensusLogisticRegression",
    "DPBayesianLinearRegression",
    "DecentralizedLogisticRegression",
    "VerticalLinearClassifier",
    "VerticalLogisticRegression",
]
