"""What the estimators of row protocols share: the rows cut into parties, each scaled to unit
norm as the privacy analyses assume, and a linear model with an intercept."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.rows import normalize_rows
from dpfed.data import horizontal_split
from dpfed.estimators._base import BinaryScoreClassifier

__all__ = ["RowClassifier"]


class RowClassifier(BinaryScoreClassifier):
    """Rows cut into parties, each row scaled to unit norm; the model is one vector."""

    def _parts(self, X: Any, y_pm: np.ndarray, count: int, seed: int | None, what: str) -> list:
        """``count`` parties' rows (scaled to unit norm) and labels in {-1, +1}."""
        if isinstance(count, int | np.integer) and X.shape[0] < count:
            raise DpfedInputError(
                f"X has {X.shape[0]} sample(s), but {type(self).__name__} cuts the rows into "
                f"{what} = {count} parts and every part needs at least one row."
            )
        X = normalize_rows(X)
        index = horizontal_split(X.shape[0], count, rng=seed)
        return [(X[i], y_pm[i]) for i in index]

    def _set_model(self, model: np.ndarray, config: Any) -> None:
        """``coef_`` and ``intercept_`` from a model over the rows as the parties trained on
        them (``config.intercept_of``)."""
        coef, intercept = config.intercept_of(model)
        self.coef_ = coef[None, :]
        self.intercept_ = np.array([intercept])

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores of the rows of ``X`` (scaled to unit norm), plus the intercept.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)

        Returns
        -------
        ndarray, shape (n_samples,)
            Positive for ``classes_[1]``.
        """
        X = self._validate_rows(X)
        return np.asarray(normalize_rows(X) @ self.coef_[0]).reshape(-1) + self.intercept_[0]
