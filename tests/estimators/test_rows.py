"""The consensus and decentralized estimators follow the scikit-learn contract."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from dpfed._validation import DpfedInputError
from dpfed.estimators import ConsensusLogisticRegression, DecentralizedLogisticRegression


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 5))
    y = np.where(X @ np.array([1.0, -2.0, 0.5, 0.0, 1.0]) + 0.3 * rng.normal(size=240) > 0, 1, 0)
    return X, y


@pytest.mark.parametrize(
    "estimator",
    [
        ConsensusLogisticRegression(n_clients=4, iterations=15, rho=0.05, random_state=0),
        ConsensusLogisticRegression(
            n_clients=4,
            iterations=5,
            mechanism="gaussian",
            epsilon=5.0,
            delta=1e-5,
            accountant="rdp",
            random_state=0,
        ),
        DecentralizedLogisticRegression(
            n_nodes=4, iterations=15, loss_scale=10.0, rho=0.01, eta=0.5, random_state=0
        ),
        DecentralizedLogisticRegression(
            n_nodes=4,
            iterations=5,
            loss_scale=10.0,
            rho=0.01,
            eta=0.5,
            perturbation="dvp",
            alpha=1.0,
            random_state=0,
        ),
    ],
)
def test_fit_predict_and_privacy(data, estimator):
    X, y = data
    model = clone(estimator).fit(X, y)
    assert model.coef_.shape == (1, 5)
    assert set(model.predict(X)) <= {0, 1}
    proba = model.predict_proba(X)
    assert proba.shape == (240, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert len(model.history_) == estimator.iterations
    assert "epsilon" in model.privacy_spent_
    if (
        estimator.get_params().get("mechanism", estimator.get_params().get("perturbation"))
        == "none"
    ):
        assert model.score(X, y) > 0.85
    again = clone(estimator).fit(X, y)
    np.testing.assert_array_equal(again.coef_, model.coef_)  # seeded: reproducible


def test_wrong_width_is_refused(data):
    X, y = data
    model = ConsensusLogisticRegression(n_clients=3, iterations=3).fit(X, y)
    with pytest.raises(DpfedInputError, match="must have 5 columns"):
        model.predict(X[:, :4])


@pytest.mark.parametrize(
    "estimator",
    [
        ConsensusLogisticRegression(n_clients=4, iterations=60),
        DecentralizedLogisticRegression(n_nodes=4, iterations=60),
    ],
)
def test_the_intercept_fits_a_base_rate_the_rows_alone_cannot(estimator):
    """Rows whose direction says nothing about the label (unit rows spread on a circle) and
    a base rate of 0.2: only the intercept can learn it; the estimator's score is
    ``normalize(X) @ coef_ + intercept_``, and without it the intercept is 0."""
    rng = np.random.default_rng(0)
    angle = rng.uniform(0.0, 2.0 * np.pi, 2000)
    X = np.column_stack([np.cos(angle), np.sin(angle)])
    y = np.where(rng.random(2000) < 0.2, 1, 0)
    with_intercept = clone(estimator).set_params(random_state=0).fit(X, y)
    without = clone(estimator).set_params(random_state=0, fit_intercept=False).fit(X, y)
    assert without.intercept_[0] == 0.0
    assert with_intercept.intercept_[0] == pytest.approx(np.log(0.2 / 0.8), abs=0.3)
    scores = with_intercept.decision_function(X)
    np.testing.assert_allclose(scores, X @ with_intercept.coef_[0] + with_intercept.intercept_[0])

    def log_loss(model):
        return float(
            np.mean(np.logaddexp(0.0, -np.where(y > 0, 1, -1) * model.decision_function(X)))
        )

    assert log_loss(with_intercept) < log_loss(without) - 0.1
