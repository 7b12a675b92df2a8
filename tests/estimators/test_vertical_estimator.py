import numpy as np
import pytest
from sklearn.base import clone

from dpfed import DpfedInputError
from dpfed.estimators import VerticalLogisticRegression

from ..conftest import make_vertical_problem


def _data():
    blocks, y = make_vertical_problem(n=300, split=(3, 2, 2))
    return np.hstack(blocks), y


def test_estimator_contract_and_predictions():
    X, y = _data()
    clf = VerticalLogisticRegression(split=[3, 2, 2], lam=1e-2, iterations=30)
    assert clone(clf).get_params()["split"] == [3, 2, 2]
    assert clf.fit(X, y) is clf
    assert clf.coef_.shape == (1, 7)
    assert set(clf.party_models_) == {"label", "party1", "party2"}
    proba = clf.predict_proba(X)
    assert proba.shape == (300, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert clf.score(X, y) > 0.85
    assert clf.privacy_spent_["mechanism"] == "none" and clf.privacy_spent_["epsilon"] == 0.0
    labels01 = (y > 0).astype(int)
    assert set(np.unique(clf.fit(X, labels01).predict(X))) <= {0, 1}


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_the_intercept_is_the_label_holders_and_predicts_with_the_coefficients(fit_intercept):
    X, y = _data()
    y = np.where(X[:, 0] + 0.5 > 0, 1.0, -1.0)  # a threshold away from the origin
    clf = VerticalLogisticRegression(
        split=[3, 2, 2], lam=1e-3, iterations=40, fit_intercept=fit_intercept
    ).fit(X, y)
    # unbounded rows (no mechanism): the scores are the rows times coef_ plus intercept_
    np.testing.assert_allclose(
        clf.decision_function(X), X @ clf.coef_[0] + clf.intercept_[0], atol=1e-9
    )
    assert (clf.intercept_[0] > 0.1) if fit_intercept else clf.intercept_[0] == 0.0
    assert clf.party_models_["label"].shape == (3 + int(fit_intercept),)


def test_estimator_reports_privacy_spent():
    X, y = _data()
    clf = VerticalLogisticRegression(
        split=[3, 2, 2], lam=1e-2, mechanism="sound", epsilon=2.0, delta=1e-5, random_state=0
    ).fit(X, y)
    spent = clf.privacy_spent_
    assert spent["mechanism"] == "sound" and spent["accountant"] == "pld"
    assert 1.9 < spent["epsilon"] <= 2.0
    assert set(spent["per_party"]) == {"label", "party1", "party2"}


def test_estimator_with_the_paper_mechanism_spends_no_certified_epsilon():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 43))  # party1 holds 40 columns of 30 rows: d_m > N
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    clf = VerticalLogisticRegression(
        split=[3, 40],
        lam=1e-2,
        iterations=3,
        mechanism="paper",
        epsilon=1.0,
        delta=1e-5,
        random_state=0,
    ).fit(X, y)
    spent = clf.privacy_spent_
    assert spent["epsilon"] is None and spent["paper_epsilon"] == pytest.approx(1.0)
    assert any(r.startswith("party1:") and "lambda_min" in r for r in spent["paper_epsilon_reason"])
    assert all(h["epsilon"] is None for h in clf.history_)


def test_estimator_rejects_a_wrong_split_and_width():
    X, y = _data()
    with pytest.raises(DpfedInputError, match="summing to the 7 features"):
        VerticalLogisticRegression(split=[3, 3]).fit(X, y)
    clf = VerticalLogisticRegression(split=[3, 2, 2], iterations=3).fit(X, y)
    with pytest.raises(DpfedInputError, match="7 columns"):
        clf.predict(X[:, :5])


def test_the_secure_estimator_fits_under_encryption_with_an_intercept():
    pytest.importorskip("tenseal")
    blocks, y = make_vertical_problem(n=600, split=(3, 2))
    X = np.hstack(blocks)
    clf = VerticalLogisticRegression(
        split=[3, 2],
        secure=True,
        epsilon=8.0,
        delta=1e-5,
        iterations=3,
        protect_label_holder=True,
        random_state=0,
    )
    labels = np.where(y > 0, 3, 1)  # any two labels
    assert clf.fit(X, labels) is clf
    assert clf.coef_.shape == (1, 5) and clf.intercept_.shape == (1,)
    assert clf.privacy_spent_["epsilon"] <= 8.0 + 1e-9
    assert clf.privacy_spent_["protect"] == "all"
    assert len(clf.history_) == 6 and all(h["bytes"] > 0 for h in clf.history_)
    assert clf.score(X, labels) > 0.7
    assert np.array_equal(clf.classes_, [1, 3])
    assert clf.passive_weight_ is None  # a publishable model: no exact one to weigh against
    keeps = clone(clf).set_params(label_holder_keeps_model=True).fit(X, labels)
    assert keeps.privacy_spent_["protect"] == "parties"
    assert 0.0 <= keeps.passive_weight_ <= 1.0


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({}, "needs epsilon and delta"),
        ({"epsilon": 1.0, "delta": 1e-5, "loss": "sigmoid"}, "logistic loss"),
        ({"epsilon": 1.0, "delta": 1e-5, "mechanism": "paper"}, "own mechanism"),
        (
            {"epsilon": 1.0, "delta": 1e-5, "label_holder_keeps_model": True},
            "goes with protect_label_holder",
        ),
    ],
)
def test_the_secure_estimator_refuses_what_it_cannot_fit(params, match):
    X, y = _data()
    with pytest.raises(DpfedInputError, match=match):
        VerticalLogisticRegression(split=[4, 3], secure=True, **params).fit(X, y)
