"""scikit-learn style front ends over the protocols."""

from dpfed.estimators.vertical import VerticalLinearClassifier, VerticalLogisticRegression

__all__ = ["VerticalLinearClassifier", "VerticalLogisticRegression"]
