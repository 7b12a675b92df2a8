"""Algorithm 2: private standard deviations and the auxiliary-data threshold search."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.protocols.bayes_linreg import (
    THRESHOLD_GRID,
    ThresholdCache,
    estimate_marginal_stds,
    moment_pair_sensitivity_squared,
    search_thresholds,
    statistics_sensitivity,
)
from dpfed.protocols.bayes_linreg.projection import _sensitivity_grid


@pytest.fixture
def rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3)) * np.array([0.5, 1.0, 2.0])
    y = rng.normal(size=2000) * 1.5
    X[0, 0] = 40.0  # beyond the assumed bound: clipped to 7.5 first
    return X, y


def test_grid_is_the_papers():
    assert len(THRESHOLD_GRID) == 20
    assert THRESHOLD_GRID[0] == 0.1 and THRESHOLD_GRID[-1] == 2.0
    assert all(0.1 <= p <= 2.1 for p in THRESHOLD_GRID)


def test_stds_with_little_noise_are_root_mean_squares(rows):
    X, y = rows
    est = estimate_marginal_stds(
        X,
        y,
        bound_x=7.5,
        bound_y=7.5,
        noise_multiplier=1e-6,
        mode="trusted",
        rng=np.random.default_rng(1),
    )
    Xc = np.clip(X, -7.5, 7.5)
    expected = np.sqrt(np.mean(np.column_stack([Xc, y]) ** 2, axis=0))
    np.testing.assert_allclose(est.stds, expected, rtol=1e-4)
    assert not est.fallback.any()
    assert est.sensitivity == pytest.approx(np.sqrt(4 * 7.5**4))
    with_mean = estimate_marginal_stds(
        X,
        y,
        bound_x=7.5,
        bound_y=7.5,
        noise_multiplier=1e-6,
        mode="trusted",
        rng=np.random.default_rng(1),
        first_moments=True,
    )
    np.testing.assert_allclose(with_mean.stds, np.column_stack([Xc, y]).std(axis=0), rtol=1e-4)
    np.testing.assert_allclose(with_mean.means, np.column_stack([Xc, y]).mean(axis=0), atol=1e-4)
    # default weights of the sums: c / sqrt(2), exact sensitivity sqrt(sum_j 2 c_j^4)
    np.testing.assert_allclose(with_mean.first_scale, np.full(4, 7.5 / np.sqrt(2)))
    assert with_mean.sensitivity == pytest.approx(np.sqrt(4 * 2 * 7.5**4))
    assert est.means is None and est.mean_noise_std is None


def test_first_moments_noise_and_variance_around_the_dp_mean(rows):
    X, y = rows
    spy_calls = []

    def spy(values, *, noise_std, compute_nodes, tolerated, rng):
        spy_calls.append(np.asarray(noise_std))
        total = values.sum(axis=0) + rng.normal(size=values.shape[1]) * 1e-9
        return SimpleNamespace(total=total)

    est = estimate_marginal_stds(
        X + 1.0,
        y,
        bound_x=7.5,
        bound_y=7.5,
        noise_multiplier=2.0,
        mode="distributed",
        rng=np.random.default_rng(0),
        first_moments=True,
        first_scale=1.0,
        aggregate=spy,
    )
    # unit weights: the exact sensitivity G(7.5, 1) per coordinate, below c^4 + 4 c^2
    per = moment_pair_sensitivity_squared(7.5, 1.0)
    assert est.sensitivity == pytest.approx(np.sqrt(4 * per))
    assert est.sensitivity < np.sqrt(4 * (7.5**4 + 4 * 7.5**2))
    np.testing.assert_allclose(spy_calls[0], 2.0 * est.sensitivity / np.sqrt(1999))
    np.testing.assert_allclose(
        est.mean_noise_std, 2.0 * est.sensitivity * np.sqrt(2000 / 1999) / 2000
    )
    v = np.column_stack([np.clip(X + 1.0, -7.5, 7.5), y])
    np.testing.assert_allclose(est.means, v.mean(axis=0), atol=1e-9)
    np.testing.assert_allclose(est.variances, (v * v).mean(axis=0) - est.means**2, atol=1e-9)


def test_non_positive_variance_falls_back_to_half(rows):
    X, y = rows

    def negative(values, *, noise_std, compute_nodes, tolerated, rng):
        total = values.sum(axis=0)
        total[1] = -5.0
        return SimpleNamespace(total=total)

    est = estimate_marginal_stds(
        X,
        y,
        bound_x=7.5,
        bound_y=7.5,
        noise_multiplier=1.0,
        mode="distributed",
        rng=np.random.default_rng(0),
        aggregate=negative,
    )
    assert est.fallback.tolist() == [False, True, False, False]
    assert est.stds[1] == 0.5 and est.variances[1] < 0
    with pytest.raises(DpfedInputError, match="nonprivate"):
        estimate_marginal_stds(
            X,
            y,
            bound_x=7.5,
            bound_y=7.5,
            noise_multiplier=1.0,
            mode="nonprivate",
            rng=np.random.default_rng(0),
        )


def test_vectorised_sensitivity_grid():
    rng = np.random.default_rng(2)
    cx, cy = rng.uniform(0.1, 3, size=(4, 5)), rng.uniform(0.1, 3, size=4)
    grid = _sensitivity_grid(cx, cy)
    for a in range(4):
        for b in range(4):
            assert grid[a, b] == pytest.approx(statistics_sensitivity(cx[a], cy[b]))


def test_search_prefers_wide_bounds_without_noise_and_narrow_with_much():
    quiet = search_thresholds(500, 3, 0.0, repeats=2, seed=0)
    assert quiet.p_x == 2.0 and quiet.p_y >= 1.0
    loud = search_thresholds(500, 3, 5.0, repeats=2, seed=0)
    assert loud.p_x <= 0.6 and loud.p_y <= 0.6
    louder = search_thresholds(500, 3, 20.0, repeats=2, seed=0)
    assert (louder.p_x, louder.p_y) == (0.1, 0.1)
    assert loud.mean_mae.shape == (20, 20)
    again = search_thresholds(500, 3, 5.0, repeats=2, seed=0)
    assert (again.p_x, again.p_y) == (loud.p_x, loud.p_y)
    np.testing.assert_array_equal(again.mean_mae, loud.mean_mae)


def test_cache_runs_each_search_once():
    cache = ThresholdCache()
    a = cache.get(300, 2, 1.0, repeats=1)
    b = cache.get(300, 2, 1.0 + 1e-15, repeats=1)
    c = cache.get(300, 3, 1.0, repeats=1)
    assert a is b and c is not a
    assert (cache.misses, cache.hits, len(cache)) == (2, 1, 2)
    # the search itself answers from the cache, explicit defaults included
    assert search_thresholds(300, 2, 1.0, lam=1.0, repeats=1, seed=0, cache=cache) is a
    assert (cache.misses, cache.hits, len(cache)) == (2, 2, 2)
