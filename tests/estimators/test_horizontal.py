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
        ConsensusLogisticRegression(n_clients=4, iterations=5, mechanism="gaussian",
                                    epsilon=5.0, delta=1e-5, accountant="rdp", random_state=0),
        DecentralizedLogisticRegression(n_nodes=4, iterations=15, loss_scale=10.0, rho=0.01,
                                        eta=0.5, random_state=0),
        DecentralizedLogisticRegression(n_nodes=4, iterations=5, loss_scale=10.0, rho=0.01,
                                        eta=0.5, perturbation="dvp", alpha=1.0,
                                        random_state=0),
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
    if estimator.get_params().get("mechanism", estimator.get_params().get("perturbation")) \
            == "none":
        assert model.score(X, y) > 0.85
    again = clone(estimator).fit(X, y)
    np.testing.assert_array_equal(again.coef_, model.coef_)  # seeded: reproducible


def test_wrong_width_is_refused(data):
    X, y = data
    model = ConsensusLogisticRegression(n_clients=3, iterations=3).fit(X, y)
    with pytest.raises(DpfedInputError, match="must have 5 columns"):
        model.predict(X[:, :4])
