"""What the package's estimators share: scikit-learn input validation, binary label encoding,
the width check of prediction rows, and ``predict_proba``/``predict`` from a decision function.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from dpfed._validation import DpfedInputError
from dpfed.parameters import parameter_names

ConfigT = TypeVar("ConfigT")

#: How every estimator of the package reads ``X`` besides sparsity: float64 (scikit-learn's
#: defaults add finite, 2-D, at least one row and one column).
X_PARAMS: dict[str, Any] = {"dtype": np.float64}


def config_of(estimator: Any, config: type[ConfigT], **fixed: Any) -> ConfigT:
    """The protocol configuration an estimator's parameters make: every field of the
    configuration dataclass ``config`` from the parameter of its own name, ``seed`` from
    ``random_state`` (scikit-learn's name), and the fields the estimator fixes (``fixed``:
    the loss of a logistic regression)."""
    names = [name for name in parameter_names(config) if name not in fixed]
    values = {name: getattr(estimator, name) for name in names if name != "seed"}
    if "seed" in names:
        values["seed"] = estimator.random_state
    return config(**values, **fixed)


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


def refuse_fit_params(estimator: BaseEstimator, fit_params: dict[str, Any]) -> None:
    """Refuse ``fit`` keyword arguments, naming ``sample_weight`` and why.

    The protocols weight every record equally, and under a privacy mechanism each record's
    influence is what the sensitivity bounds: a weight ``w`` would scale it by ``w``, beyond
    the bound (a weighted mechanism would need its sensitivity multiplied by the largest
    weight, which no protocol here is calibrated for).

    Raises
    ------
    DpfedInputError
        For ``sample_weight`` (not None), naming the reason.
    TypeError
        For any other keyword, as Python would.
    """
    weight = fit_params.pop("sample_weight", None)
    if fit_params:
        raise TypeError(
            f"{type(estimator).__name__}.fit() got unexpected keyword argument(s) "
            f"{sorted(fit_params)}"
        )
    if weight is not None:
        raise DpfedInputError(
            f"{type(estimator).__name__} does not take sample_weight: its protocol weights "
            "every record equally, and under a privacy mechanism a record's weight would scale "
            "its influence beyond the sensitivity the noise is calibrated to. Repeat or drop "
            "rows instead (each row stays one record of the privacy unit)."
        )


#: A fitted scaler's signature on the rows it was fitted on, with its name.
_SCALER_SIGNATURES = ("StandardScaler", "MinMaxScaler", "MaxAbsScaler")


def fitted_scaler(X: Any) -> str | None:
    """The scikit-learn scaler whose exact signature the training rows ``X`` carry (it was
    fitted on these very rows), or None.

    Each leaves one on its own training rows: every varying column with mean 0 and standard
    deviation 1 (``StandardScaler``), minimum 0 and maximum 1 (``MinMaxScaler``), or largest
    absolute value 1 (``MaxAbsScaler``); raw data practically never has all of them. A scaler
    fitted on private rows is computed from them without noise, so a private estimator after
    it in a pipeline is not covered by its epsilon.
    """
    import scipy.sparse as sp

    if X.shape[0] < 2:
        return None
    if sp.issparse(X):
        peak = abs(X).max(axis=0).toarray().ravel()
        live = peak > 0
        return "MaxAbsScaler" if live.any() and np.all(peak[live] == 1.0) else None
    values = np.asarray(X, dtype=np.float64)
    spread = values.max(axis=0) - values.min(axis=0)
    live = spread > 0
    if not live.any():
        return None
    v = values[:, live]
    if np.allclose(v.mean(axis=0), 0.0, atol=1e-9) and np.allclose(v.std(axis=0), 1.0, atol=1e-9):
        return "StandardScaler"
    if np.allclose(v.min(axis=0), 0.0, atol=1e-12) and np.allclose(v.max(axis=0), 1.0, atol=1e-12):
        return "MinMaxScaler"  # (x - min) * scale rounds: 1 - 2^-53 is a scaled maximum
    if np.all(np.abs(v).max(axis=0) == 1.0) and np.any(v < 0):
        return "MaxAbsScaler"
    return None


def warn_if_scaled_on_private_rows(estimator: BaseEstimator, X: Any) -> None:
    """Warn when a private estimator's training rows look scaled by a scaler fitted on them
    (:func:`fitted_scaler`)."""
    scaler = fitted_scaler(X)
    if scaler is not None:
        warnings.warn(
            f"{type(estimator).__name__}: the training rows look scaled by a {scaler} fitted "
            "on these very rows. Such a scaler is computed from the private data without noise, "
            "so the model is not covered by its epsilon; scale with public bounds instead (a "
            "FunctionTransformer or constants known before seeing the data).",
            UserWarning,
            stacklevel=3,
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
        if self._adds_noise():
            warn_if_scaled_on_private_rows(self, X)
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
