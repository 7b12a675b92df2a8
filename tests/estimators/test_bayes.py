"""DPBayesianLinearRegression follows the scikit-learn contract."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import Ridge

from dpfed import DpfedInputError
from dpfed.estimators import DPBayesianLinearRegression


def _fake_secure_sum(values, *, noise_std, compute_nodes, tolerated, rng):
    return SimpleNamespace(total=(values + rng.normal(size=values.shape) * noise_std).sum(0))


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = X @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.5 * rng.normal(size=600)
    return X, y


def test_get_params_and_clone():
    est = DPBayesianLinearRegression(2.0, 1e-5, mode="distributed", projection=True, random_state=3)
    params = est.get_params()
    assert params["epsilon"] == 2.0 and params["delta"] == 1e-5
    assert params["mode"] == "distributed" and params["projection"] is True
    twin = clone(est)
    assert twin.get_params() == params and twin is not est
    est.set_params(epsilon=5.0)
    assert est.epsilon == 5.0


def test_nonprivate_equals_ridge(data):
    X, y = data
    X, y = X + 2.0, y - 1.0
    # the paper's algorithm: no intercept
    model = DPBayesianLinearRegression(mode="nonprivate", lam=2.0, lam0=4.0, centre=False).fit(X, y)
    ridge = Ridge(alpha=2.0, fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(model.coef_, ridge.coef_, rtol=1e-9)
    np.testing.assert_allclose(model.predict(X), ridge.predict(X), rtol=1e-9)
    assert model.intercept_ == 0.0 and model.means_ is None
    assert model.privacy_["epsilon"] == 0.0
    # centred by the exact means: ridge with an unpenalised intercept
    model = DPBayesianLinearRegression(mode="nonprivate", lam=2.0, lam0=4.0).fit(X, y)
    ridge = Ridge(alpha=2.0, fit_intercept=True).fit(X, y)
    np.testing.assert_allclose(model.coef_, ridge.coef_, rtol=1e-9)
    assert model.intercept_ == pytest.approx(ridge.intercept_, rel=1e-9)
    np.testing.assert_allclose(model.predict(X), ridge.predict(X), rtol=1e-9)
    assert model.score(X, y) > 0.8


def test_predictions_centre_by_the_dp_means(data):
    X, y = data
    X, y = X + np.array([1.0, -1.0, 2.0, 0.0]), y + 1.5
    model = DPBayesianLinearRegression(
        3.0,
        mode="distributed",
        projection=True,
        threshold_repeats=1,
        aggregate=_fake_secure_sum,
        random_state=2,
    ).fit(X, y)
    m = model.means_
    assert m.shape == (5,) and not np.allclose(m, np.append(X.mean(0), y.mean()))
    np.testing.assert_allclose(m, model.fit_result_.centring.means)
    assert model.intercept_ == pytest.approx(m[4] - m[:4] @ model.coef_)
    np.testing.assert_allclose(model.predict(X), (X - m[:4]) @ model.coef_ + m[4], rtol=1e-9)
    np.testing.assert_allclose(model.predict(X), model.fit_result_.predict(X), rtol=1e-9)
    assert model.privacy_["centre"] is True
    assert "column sums" in model.privacy_["releases"][0]["what"]
    assert model.get_params()["centre"] is True and model.get_params()["centre_share"] == 0.3


@pytest.mark.parametrize(
    "params",
    [
        dict(mode="trusted"),
        dict(mode="input", epsilon=1.0),
        dict(mode="distributed", projection=True, threshold_repeats=2, aggregate=_fake_secure_sum),
    ],
)
def test_private_fits_are_seeded_and_report_privacy(data, params):
    X, y = data
    est = DPBayesianLinearRegression(random_state=0, **params)
    model = clone(est).fit(X, y)
    assert model.coef_.shape == (4,) and model.precision_.shape == (4, 4)
    np.linalg.cholesky(model.precision_)
    assert model.privacy_["epsilon"] == est.epsilon and model.privacy_["delta"] == 1e-4
    assert model.bounds_.shape == (5,) and np.all(model.bounds_ <= 7.5)
    again = clone(est).fit(X, y)
    np.testing.assert_array_equal(again.coef_, model.coef_)


def test_predict_checks(data):
    X, y = data
    with pytest.raises(Exception, match="not fitted"):
        DPBayesianLinearRegression().predict(X)
    model = DPBayesianLinearRegression(mode="nonprivate").fit(X, y)
    with pytest.raises(DpfedInputError, match="4 columns"):
        model.predict(X[:, :3])
