"""The estimators follow scikit-learn's contract: its estimator checks and the label encoding.

Every estimator runs the whole ``check_estimator`` suite of the installed scikit-learn, in small
and fast configurations: without noise (the API) and with each privacy mechanism. No check is
expected to fail (:data:`EXPECTED_FAILED_CHECKS`). The configurations with noise declare the
``poor_score`` tag, so ``check_classifiers_train`` and ``check_regressors_train`` leave out only
their accuracy (0.83) or R^2 (0.5) threshold for them; every other assertion of those checks
runs. scikit-learn skips parts of a few checks when what they need is absent
(:data:`SKIPPED_BY_SCIKIT_LEARN`).
"""

from __future__ import annotations

import inspect
import warnings
from unittest import SkipTest

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier
from sklearn.datasets import make_classification
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks

from dpfed._validation import DpfedInputError
from dpfed.estimators import (
    ConsensusLogisticRegression,
    DecentralizedLogisticRegression,
    DPBayesianLinearRegression,
    VerticalLinearClassifier,
    VerticalLogisticRegression,
)
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

NOISE = {"epsilon": 1.0, "delta": 1e-5}
GRAPH = {"n_nodes": 3, "iterations": 5, "loss_scale": 10.0, "rho": 0.01, "eta": 0.5}

#: The configurations checked: few rounds, without noise and with every privacy mechanism.
ESTIMATORS = [
    VerticalLogisticRegression(iterations=5),
    VerticalLogisticRegression(mechanism="sound", iterations=5, **NOISE),
    VerticalLogisticRegression(mechanism="sound", iterations=5, protect_label_holder=True, **NOISE),
    VerticalLinearClassifier(loss="smoothed_hinge", iterations=5),
    VerticalLinearClassifier(mechanism="paper", iterations=3, **NOISE),
    ConsensusLogisticRegression(n_clients=3, iterations=5),
    ConsensusLogisticRegression(
        n_clients=3, iterations=5, mechanism="gaussian", accountant="rdp", **NOISE
    ),
    DecentralizedLogisticRegression(**GRAPH),
    DecentralizedLogisticRegression(perturbation="dvp", alpha=1.0, **GRAPH),
    DecentralizedLogisticRegression(perturbation="pvp", alpha=1.0, **GRAPH),
    DPBayesianLinearRegression(mode="nonprivate"),
    DPBayesianLinearRegression(),
    DPBayesianLinearRegression(mode="input"),
    DPBayesianLinearRegression(
        mode="distributed", projection=True, threshold_repeats=1, compute_nodes=3
    ),
]

#: Checks expected to fail, by estimator class name: ``{check name: reason}``. There are none:
#: every check passes on every configuration above, the noisy ones included (a fixed
#: ``random_state`` makes the noise, and so every fit, reproducible bit for bit). A check
#: listed here that passes fails the test (strict xfail), so the list stays minimal.
EXPECTED_FAILED_CHECKS: dict[str, dict[str, str]] = {}

#: Checks that scikit-learn itself skips (in part) when their requirement is absent.
SKIPPED_BY_SCIKIT_LEARN = {
    "check_classifier_data_not_an_array": (
        "the pandas DataFrame part needs pandas; the array-like part runs"
    ),
    "check_regressor_data_not_an_array": (
        "the pandas DataFrame part needs pandas; the array-like part runs"
    ),
    "check_array_api_input": (
        "runs only with SCIPY_ARRAY_API=1 and passes then: the estimators declare no array API "
        "support, so it checks NumPy input only"
    ),
}


def _id(estimator) -> str:
    return " ".join(repr(estimator).split())


def _expected_failed_checks(estimator) -> dict[str, str]:
    return EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {})


def _noisy(estimator) -> bool:
    params = estimator.get_params()
    return (
        params.get("mechanism", "none") != "none"
        or params.get("perturbation", "none") != "none"
        or params.get("mode", "nonprivate") != "nonprivate"
    )


_STRICT = (
    {"xfail_strict": True}
    if "xfail_strict" in inspect.signature(parametrize_with_checks).parameters
    else {}
)


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks, **_STRICT)
def test_scikit_learn_estimator_checks(estimator, check) -> None:
    name = getattr(check, "func", check).__name__
    try:
        check(estimator)
    except SkipTest as skip:
        assert name in SKIPPED_BY_SCIKIT_LEARN, f"{name} was skipped unexpectedly: {skip}"
        pytest.skip(f"{name}: {SKIPPED_BY_SCIKIT_LEARN[name]} ({skip})")


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_id)
def test_tags_say_what_the_estimator_does(estimator) -> None:
    tags = get_tags(estimator)
    assert not tags.non_deterministic and tags.target_tags.required
    if is_classifier(estimator):
        assert tags.classifier_tags.multi_class is False  # binary only
        assert tags.input_tags.sparse  # every protocol takes sparse rows
        assert tags.classifier_tags.poor_score is _noisy(estimator)
    else:
        assert not tags.input_tags.sparse
        assert tags.regressor_tags.poor_score is _noisy(estimator)


def _rows(n: int = 120, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y01 = (X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y01


CLASSIFIERS = [
    VerticalLogisticRegression(split=[3, 2], iterations=5),
    VerticalLogisticRegression(
        split=[3, 2], mechanism="sound", iterations=5, random_state=1, **NOISE
    ),
    ConsensusLogisticRegression(n_clients=3, iterations=5, random_state=0),
    DecentralizedLogisticRegression(graph="complete", random_state=0, **GRAPH),
]


@pytest.mark.parametrize(
    "mechanism", [{"mechanism": "none"}, {"mechanism": "sound", **NOISE}], ids=["none", "sound"]
)
def test_01_and_pm1_labels_reach_the_protocol_as_they_are(mechanism: dict) -> None:
    X, y01 = _rows()
    y_pm = 2.0 * y01 - 1.0
    run = train_vertical(
        [X[:, :3], X[:, 3:]], y_pm, VerticalConfig(iterations=5, seed=1, lam=1e-4, **mechanism)
    )
    coefs, intercept = run.coefficients()
    expected = np.concatenate(list(coefs.values()))
    for y in (y01, y_pm, y_pm.astype(int), y01.astype(float)):
        clf = VerticalLogisticRegression(
            split=[3, 2], iterations=5, random_state=1, **mechanism
        ).fit(X, y)
        np.testing.assert_array_equal(clf.coef_[0], expected)  # bit for bit
        assert clf.intercept_[0] == intercept
        np.testing.assert_array_equal(clf.classes_, np.unique(y))
        assert clf.privacy_spent_ == run.privacy


@pytest.mark.parametrize("estimator", CLASSIFIERS, ids=_id)
def test_any_two_labels_are_classes(estimator) -> None:
    X, y01 = _rows()
    reference = clone(estimator).fit(X, y01)
    for labels in (
        np.array(["no", "yes"]),
        np.array([3, 7]),
        np.array([False, True]),
        np.array([-1.0, 0.0]),
    ):
        y = labels[y01]
        clf = clone(estimator).fit(X, y)
        np.testing.assert_array_equal(clf.classes_, labels)
        np.testing.assert_array_equal(clf.coef_, reference.coef_)
        np.testing.assert_array_equal(clf.predict(X), labels[reference.predict(X)])
        np.testing.assert_array_equal(clf.predict_proba(X), reference.predict_proba(X))


@pytest.mark.parametrize("estimator", CLASSIFIERS, ids=_id)
def test_one_class_or_more_than_two_are_refused(estimator) -> None:
    X, y01 = _rows()
    name = type(estimator).__name__
    with pytest.raises(
        ValueError,
        match=(
            r"Only binary classification is supported.*"
            rf"{name} needs exactly 2 classes in y\. "
            r"Found 3 classes: \[0, 1, 2\]"
        ),
    ):
        clone(estimator).fit(X, np.arange(len(y01)) % 3)
    with pytest.raises(DpfedInputError, match=r"Found 1 class: \['a'\]"):
        clone(estimator).fit(X, np.full(len(y01), "a"))
    with pytest.raises(ValueError, match="Unknown label type"):
        clone(estimator).fit(X, X[:, 0])


@pytest.mark.parametrize("estimator", CLASSIFIERS, ids=_id)
def test_sparse_rows_fit_and_predict_like_dense_ones(estimator) -> None:
    X, y01 = _rows()
    X[np.abs(X) < 0.5] = 0.0
    dense = clone(estimator).fit(X, y01)
    for matrix in (sp.csr_matrix, sp.csc_matrix, sp.coo_array):
        sparse = clone(estimator).fit(matrix(X), y01)
        np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(
            sparse.decision_function(matrix(X)), dense.decision_function(X), rtol=1e-9, atol=1e-12
        )


def test_too_few_rows_for_the_configuration_are_named() -> None:
    X, y01 = _rows(n=2)
    y01 = np.array([0, 1])
    with pytest.raises(DpfedInputError, match="n_clients = 3 parts"):
        ConsensusLogisticRegression(n_clients=3).fit(X, y01)
    with pytest.raises(DpfedInputError, match="n_nodes = 3 parts"):
        DecentralizedLogisticRegression(n_nodes=3).fit(X, y01)
    with pytest.raises(DpfedInputError, match=r"N - T - 1 >= 1 \(tolerated T = 1\): at least 3"):
        DPBayesianLinearRegression(mode="distributed", tolerated=1).fit(X, [0.5, 1.0])
    with pytest.raises(DpfedInputError, match="projection's threshold search needs N >= 2"):
        DPBayesianLinearRegression(projection=True).fit(X[:1], [0.5])


@pytest.mark.parametrize("estimator", [*CLASSIFIERS, DPBayesianLinearRegression()], ids=_id)
def test_a_wrong_width_is_a_dpfed_input_error_in_scikit_learn_words(estimator) -> None:
    X, y01 = _rows()
    model = clone(estimator).fit(X, y01 if is_classifier(estimator) else X[:, 0])
    with pytest.raises(
        DpfedInputError,
        match=(
            f"X has 4 features, but {type(estimator).__name__} is expecting 5 features as input"
        ),
    ):
        model.predict(X[:, :4])


def test_sample_weight_is_refused_by_name_and_other_keywords_as_python_would():
    X, y = make_classification(n_samples=60, n_features=4, random_state=0)
    for estimator in (
        VerticalLogisticRegression(split=[2, 2], iterations=2),
        ConsensusLogisticRegression(n_clients=2, iterations=2),
    ):
        with pytest.raises(DpfedInputError, match="does not take sample_weight"):
            estimator.fit(X, y, sample_weight=np.ones(60))
        with pytest.raises(TypeError, match="unexpected keyword"):
            estimator.fit(X, y, weights=np.ones(60))
        estimator.fit(X, y, sample_weight=None)  # None is no weighting: accepted


def test_a_scaler_fitted_on_the_rows_in_front_of_a_private_estimator_is_warned_about():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, StandardScaler

    X, y = make_classification(n_samples=80, n_features=4, random_state=1)
    private = dict(split=[2, 2], iterations=2, mechanism="sound", **NOISE)
    for scaler in (StandardScaler(), MinMaxScaler(), MaxAbsScaler()):
        with pytest.warns(UserWarning, match=f"scaled by a {type(scaler).__name__} fitted"):
            make_pipeline(scaler, VerticalLogisticRegression(**private)).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        VerticalLogisticRegression(**private).fit(X, y)  # raw rows: no warning
        make_pipeline(StandardScaler(), VerticalLogisticRegression(split=[2, 2], iterations=2)).fit(
            X, y
        )  # no mechanism: nothing to void
