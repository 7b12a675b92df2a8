"""scikit-learn front ends over the protocols.

Every estimator follows scikit-learn's estimator contract and passes the whole
``sklearn.utils.estimator_checks.check_estimator`` suite of the installed scikit-learn, with
no expected failure (``tests/estimators/test_sklearn_contract.py`` runs it on every estimator,
without noise and with each privacy mechanism):

* ``__init__`` only stores the parameters. ``fit`` validates ``X`` and ``y`` with
  scikit-learn's ``validate_data`` (float64, finite, 2-D, not empty, one target per row; a
  column vector ``y`` is flattened with a ``DataConversionWarning``), sets ``n_features_in_``
  and returns the estimator. ``predict``, ``predict_proba`` and ``decision_function`` check
  that it is fitted and validate ``X`` the same way; a wrong number of columns is a
  :class:`dpfed.DpfedInputError` (a ``ValueError``) in scikit-learn's words.
* The classifiers are binary only (tag ``multi_class=False``) and take any two labels:
  ``classes_`` holds them sorted, ``classes_[0]`` is trained as -1 and ``classes_[1]`` as +1,
  so labels in {0, 1} or {-1, 1} reach the protocols exactly as they are. One class, more
  than two ("Only binary classification is supported", naming the classes) and continuous
  targets ("Unknown label type") are refused with a ``ValueError``.
* The classifiers take sparse ``X`` (tag ``sparse``; converted to CSR), as their protocols
  do; :class:`DPBayesianLinearRegression` needs dense rows and says so.
* A configuration with noise (``mechanism`` or ``perturbation`` not ``"none"``, ``mode`` not
  ``"nonprivate"``) declares the tag ``poor_score``: on the checks' 200 rows the noise may
  spoil the accuracy or R^2, so ``check_classifiers_train`` and ``check_regressors_train``
  leave out their score threshold (0.83 accuracy, 0.5 R^2) and run every other assertion.
  ``non_deterministic`` is not declared: with a fixed ``random_state`` every fit, noise
  included, is reproducible bit for bit.
* scikit-learn itself skips the pandas part of ``check_classifier_data_not_an_array`` and
  ``check_regressor_data_not_an_array`` without pandas, and ``check_array_api_input`` without
  ``SCIPY_ARRAY_API=1`` (it passes with it).

The privacy parameters, their defaults and what is released are those of the protocols;
the label encoding and the validation change none of them.
"""

from dpfed.estimators.bayes import DPBayesianLinearRegression
from dpfed.estimators.consensus import ConsensusLogisticRegression
from dpfed.estimators.decentralized import DecentralizedLogisticRegression
from dpfed.estimators.generated import estimator_for
from dpfed.estimators.vertical import VerticalLinearClassifier, VerticalLogisticRegression

__all__ = [
    "ConsensusLogisticRegression",
    "DPBayesianLinearRegression",
    "DecentralizedLogisticRegression",
    "VerticalLinearClassifier",
    "VerticalLogisticRegression",
    "estimator_for",
]
