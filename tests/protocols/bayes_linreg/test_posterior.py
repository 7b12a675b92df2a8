"""Posterior from sufficient statistics: closed form, scikit-learn equivalents, repair."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import BayesianRidge, Ridge

from dpfed import DpfedInputError
from dpfed.protocols.bayes_linreg import (
    mean_absolute_error,
    posterior_from_statistics,
    posterior_means,
    predict,
    repair_gram,
)


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.3 * rng.normal(size=200)
    return X, y


def test_closed_form_without_noise(problem):
    X, y = problem
    lam, lam0 = 2.0, 3.0
    post = posterior_from_statistics(X.T @ X, X.T @ y, lam=lam, lam0=lam0)
    precision = lam0 * np.eye(4) + lam * X.T @ X
    np.testing.assert_allclose(post.precision, precision, rtol=1e-10)
    np.testing.assert_allclose(post.mean, np.linalg.solve(precision, lam * X.T @ y), rtol=1e-10)
    np.testing.assert_allclose(post.covariance, np.linalg.inv(precision), rtol=1e-8)
    assert not post.repaired
    for repair in ("abs", "floor"):  # a true Gram matrix is left alone by either repair
        other = posterior_from_statistics(X.T @ X, X.T @ y, lam=lam, lam0=lam0, repair=repair)
        np.testing.assert_allclose(other.mean, post.mean, rtol=1e-10)


def test_matches_ridge_and_bayesian_ridge(problem):
    X, y = problem
    lam, lam0 = 4.0, 10.0
    post = posterior_from_statistics(X.T @ X, X.T @ y, lam=lam, lam0=lam0)
    ridge = Ridge(alpha=lam0 / lam, fit_intercept=False, solver="cholesky").fit(X, y)
    np.testing.assert_allclose(post.mean, ridge.coef_, rtol=1e-9)
    # BayesianRidge with Gamma hyperpriors concentrated at the fixed precisions
    k = 1e12
    br = BayesianRidge(
        fit_intercept=False,
        alpha_1=k * lam,
        alpha_2=k,
        lambda_1=k * lam0,
        lambda_2=k,
        alpha_init=lam,
        lambda_init=lam0,
        max_iter=5,
    ).fit(X, y)
    assert br.alpha_ == pytest.approx(lam, rel=1e-8)
    assert br.lambda_ == pytest.approx(lam0, rel=1e-8)
    np.testing.assert_allclose(post.mean, br.coef_, rtol=1e-7)
    np.testing.assert_allclose(post.covariance, br.sigma_, rtol=1e-7)
    np.testing.assert_allclose(post.predict(X), br.predict(X), rtol=1e-7)


@pytest.mark.parametrize("repair", ["abs", "floor"])
def test_pathological_noisy_statistics_give_a_proper_posterior(repair):
    rng = np.random.default_rng(3)
    d = 6
    S_xx = rng.normal(scale=1e4, size=(d, d)) - 5e4 * np.eye(d)  # asymmetric, indefinite
    S_xy = rng.normal(scale=1e4, size=d)
    assert np.linalg.eigvalsh(0.5 * (S_xx + S_xx.T)).min() < 0
    post = posterior_from_statistics(S_xx, S_xy, lam0=0.5, repair=repair)
    assert post.repaired and post.min_eigenvalue < 0
    np.testing.assert_array_equal(post.precision, post.precision.T)
    assert np.linalg.eigvalsh(post.precision).min() >= 0.5 * (1 - 1e-9)
    np.linalg.cholesky(post.precision)  # positive definite
    assert np.all(np.isfinite(post.mean))
    fixed = repair_gram(S_xx, repair=repair)
    eig_before = np.linalg.eigvalsh(0.5 * (S_xx + S_xx.T))
    eig_after = np.linalg.eigvalsh(fixed)
    expected = np.abs(eig_before) if repair == "abs" else np.maximum(eig_before, 0)
    np.testing.assert_allclose(np.sort(eig_after), np.sort(expected), atol=1e-6)


def test_batched_means_equal_single_posteriors(problem):
    X, y = problem
    rng = np.random.default_rng(1)
    noise = rng.normal(scale=50, size=(3, 2, 4, 4))
    S_xx = X.T @ X + noise
    S_xy = X.T @ y + rng.normal(scale=50, size=(3, 2, 4))
    batched = posterior_means(S_xx, S_xy, lam=1.5, lam0=2.0)
    for a in range(3):
        for b in range(2):
            single = posterior_from_statistics(S_xx[a, b], S_xy[a, b], lam=1.5, lam0=2.0)
            np.testing.assert_allclose(batched[a, b], single.mean, rtol=1e-9, atol=1e-12)


def test_predict_and_mae():
    X = np.array([[1.0, 2.0], [0.0, -1.0]])
    mean = np.array([0.5, 1.0])
    np.testing.assert_allclose(predict(X, mean), [2.5, -1.0])
    assert predict(X, np.stack([mean, 2 * mean])).shape == (2, 2)
    assert mean_absolute_error(np.array([2.0, 0.0]), predict(X, mean)) == pytest.approx(0.75)
    with pytest.raises(DpfedInputError):
        predict(X, np.ones(3))
    with pytest.raises(DpfedInputError, match="repair must be one of"):
        posterior_from_statistics(np.eye(2), np.ones(2), repair="clip")
