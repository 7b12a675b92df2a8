"""What every linear classifier of the package shares once it has a decision function."""

from __future__ import annotations

import numpy as np


class ScoreClassifierMixin:
    """``predict_proba`` and ``predict`` from ``decision_function`` and ``classes_``."""

    def predict_proba(self, X) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.column_stack([1.0 - p, p])

    def predict(self, X) -> np.ndarray:
        return np.where(self.decision_function(X) > 0, self.classes_[1], self.classes_[0])
