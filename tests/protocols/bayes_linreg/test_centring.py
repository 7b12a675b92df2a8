"""Centring by DP column means: the release, its noise in every mode, the exact means."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.protocols.bayes_linreg import (
    PrivateMeans,
    centre_rows,
    estimate_means,
    exact_means,
    first_moment_scale,
    sum_sensitivity,
)


@pytest.fixture
def rows():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(30, 3)) + np.array([0.5, 0.0, -0.5])
    y = rng.uniform(-1.0, 1.0, size=30)
    X[0, 0] = 9.0  # beyond the bound: clipped before it is summed
    return X, y


@pytest.mark.parametrize(
    ("mode", "factor", "reps"),
    [
        ("trusted", 1.0, 1500),
        ("distributed", 30 / 29, 400),  # through the real secure sum (dpfed.dca.secure_sum)
        ("input", 30.0, 1500),
    ],
)
def test_noise_of_the_means_is_as_calibrated(rows, mode, factor, reps):
    X, y = rows
    true = np.append(np.clip(X, -1.0, 1.0).mean(axis=0), y.mean())
    z = 0.8
    sigma = z * sum_sensitivity(1.0, 1.0, 3)
    draws = []
    for k in range(reps):
        est = estimate_means(
            X,
            y,
            bound_x=1.0,
            bound_y=1.0,
            noise_multiplier=z,
            mode=mode,
            rng=np.random.default_rng([4, k]),
            compute_nodes=3,
        )
        draws.append(est.means)
    err = (np.array(draws) - true) * 30  # noise in the released sums
    np.testing.assert_allclose(err.var(axis=0), sigma**2 * factor, rtol=0.15)
    assert est.sigma_std == pytest.approx(sigma) and est.release == "column sums"
    np.testing.assert_allclose(est.mean_noise_std, sigma * np.sqrt(factor) / 30)


def test_sensitivity_and_weights():
    assert sum_sensitivity(7.5, 7.5, 11) == pytest.approx(2 * 7.5 * np.sqrt(12))
    np.testing.assert_allclose(
        first_moment_scale([1.0, 2.0], 3.0), np.array([1.0, 2.0, 3.0]) / np.sqrt(2)
    )


def test_exact_means_and_centre_rows(rows):
    X, y = rows
    m = exact_means(X, y)
    assert m.release == "exact" and m.sensitivity is None
    np.testing.assert_allclose(m.mean_x, X.mean(axis=0))
    assert m.mean_y == pytest.approx(y.mean())
    Xc, yc = centre_rows(X, y, m)
    np.testing.assert_allclose(Xc.mean(axis=0), 0.0, atol=1e-12)
    assert abs(yc.mean()) < 1e-12
    assert m.to_json()["mean_noise_std"] is None
    with pytest.raises(DpfedInputError, match="d \\+ 1 = 4"):
        centre_rows(X, y, PrivateMeans(np.zeros(3), "exact"))


def test_bad_arguments(rows):
    X, y = rows
    with pytest.raises(DpfedInputError, match="nonprivate"):
        estimate_means(
            X,
            y,
            bound_x=1.0,
            bound_y=1.0,
            noise_multiplier=1.0,
            mode="nonprivate",
            rng=np.random.default_rng(0),
        )
    with pytest.raises(DpfedInputError, match="noise_multiplier"):
        estimate_means(
            X,
            y,
            bound_x=1.0,
            bound_y=1.0,
            noise_multiplier=0.0,
            mode="trusted",
            rng=np.random.default_rng(0),
        )
    with pytest.raises(DpfedInputError, match="bound_y"):
        estimate_means(
            X,
            y,
            bound_x=1.0,
            bound_y=-1.0,
            noise_multiplier=1.0,
            mode="trusted",
            rng=np.random.default_rng(0),
        )
