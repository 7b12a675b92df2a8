"""What the package's estimators share: scikit-learn input validation, binary label encoding,
the width check of prediction rows, and ``predict_proba``/``predict`` from a decision function.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from dpfed._validation import DpfedInputError

#: How every estimator of the package reads ``X`` besides sparsity: float64 (scikit-learn's
#: defaults add finite, 2-D, at least one row and one column).
X_PARAMS: dict[str, Any] = {"dtype": np.float64}


def check_width(estimator: BaseEstimator, X: Any) -> None:
    """Refuse prediction rows whose number of columns differs from the training rows'.

    Only a 2-D ``X`` with a ``shape`` is checked here (scikit-learn's validation reports the
    rest), so that the error is a :class:`dpfed.DpfedInputError` naming the expected width.

    Parameters
    ----------
    estimator : fitted estimator with ``n_features_in_``
    X : array-like, shape (n_samples, n_features)

    Raises
    ------
    DpfedInputError
        If ``X`` is 2-D with another number of columns than ``n_features_in_``.
    """
    shape = getattr(X, "shape", None)
    expected = estimator.n_features_in_
    if shape is not None and len(shape) == 2 and shape[1] != expected:
        raise DpfedInputError(
            f"X has {shape[1]} features, but {type(estimator).__name__} is expecting "
            f"{expected} features as input: X must have {expected} columns, as in fit."
        )


class BinaryScoreClassifier(ClassifierMixin, BaseEstimator):
    """A binary classifier from a real score: the protocols train on labels in {-1, +1}.

    Any two labels are accepted. ``classes_`` holds them sorted (``numpy.unique``); the first
    is encoded as -1 and the second as +1, which maps {0, 1} and {-1, 1} to {-1, +1} as the
    protocols read them directly. ``predict`` gives ``classes_[1]`` where
    ``decision_function`` is positive and ``predict_proba`` is its logistic sigmoid.

    Every protocol behind it takes sparse rows, so sparse ``X`` is accepted (as CSR).
    Subclasses implement ``fit`` (with :meth:`_validate_fit`) and ``decision_function``
    (with :meth:`_validate_rows`).
    """

    def _adds_noise(self) -> bool:
        """Whether ``fit`` adds privacy noise (so that a poor score on few rows is expected)."""
        return False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        # Privacy noise on the checks' 200 rows can spoil the accuracy; no reasonable
        # accuracy is promised there (the checks' accuracy threshold is then skipped).
        tags.classifier_tags.poor_score = self._adds_noise()
        tags.input_tags.sparse = True
        return tags

    def _validate_fit(self, X: Any, y: Any) -> tuple[Any, np.ndarray]:
        """Validate the training rows and labels; set ``n_features_in_`` and ``classes_``.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
        y : array-like, shape (n_samples,)
            Two distinct labels of any type.

        Returns
        -------
        X : ndarray or scipy.sparse.csr_matrix, shape (n_samples, n_features)
            float64.
        y_pm : ndarray, shape (n_samples,)
            -1.0 for ``classes_[0]`` and +1.0 for ``classes_[1]``.
        """
        X, y = validate_data(self, X, y, accept_sparse="csr", **X_PARAMS)
        return X, self._encode_labels(y)

    def _encode_labels(self, y: np.ndarray) -> np.ndarray:
        """Set ``classes_`` and map ``classes_[0]`` to -1.0 and ``classes_[1]`` to +1.0."""
        check_classification_targets(y)
        classes, encoded = np.unique(y, return_inverse=True)
        if classes.size != 2:
            shown = ", ".join(repr(c) for c in classes[:5].tolist())
            more = ", ..." if classes.size > 5 else ""
            plural = "es" if classes.size != 1 else ""
            found = f"Found {classes.size} class{plural}: [{shown}{more}]."
            needs = f"{type(self).__name__} needs exactly 2 classes in y."
            if classes.size > 2:
                raise DpfedInputError(
                    "Only binary classification is supported. The type of the target is "
                    f"{type_of_target(y)!r}: {needs} {found}"
                )
            raise DpfedInputError(f"{needs} {found}")
        self.classes_ = classes
        return np.where(encoded.reshape(-1) == 1, 1.0, -1.0)

    def _validate_rows(self, X: Any) -> Any:
        """Check that the estimator is fitted and validate prediction rows like ``fit``'s."""
        check_is_fitted(self, "coef_")
        check_width(self, X)
        return validate_data(self, X, reset=False, accept_sparse="csr", **X_PARAMS)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Probabilities of ``classes_`` for the rows of ``X``, shape ``(n_samples, 2)``:
        the logistic sigmoid of ``decision_function`` for ``classes_[1]``."""
        with np.errstate(over="ignore"):
            p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        """Labels of the rows of ``X``, shape ``(n_samples,)``: ``classes_[1]`` where
        ``decision_function`` is positive, else ``classes_[0]``."""
        return np.where(self.decision_function(X) > 0, self.classes_[1], self.classes_[0])
