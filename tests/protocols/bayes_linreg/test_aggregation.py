"""Noisy sums: the noise variance each aggregation mode releases, measured."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.dca.discrete_noise import ring_sigma2
from dpfed.protocols.bayes_linreg import (
    calibrate_releases,
    clip_to_bounds,
    noisy_sum,
    row_statistics,
    statistics_sensitivity,
)


@pytest.fixture
def stats():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 2)) * 3, rng.normal(size=30) * 3
    return row_statistics(*clip_to_bounds(X, y, 7.5, 7.5))


def _sigma():
    """The Gaussian mechanism's sigma for epsilon 1 at delta 1e-4, d = 2, bounds 7.5."""
    z = calibrate_releases(1.0, 1e-4, projection=False).noise_multipliers[0]
    return z * statistics_sensitivity(7.5, 7.5, 2)


@pytest.mark.parametrize(
    ("mode", "factor", "reps"),
    [("trusted", 1.0, 4000), ("input", 30.0, 4000), ("distributed", 30.0 / 29.0, 400)],
)
def test_empirical_noise_variance_of_the_released_statistics(stats, mode, factor, reps):
    sigma = _sigma()
    exact = stats.sum(axis=0)
    rng = np.random.default_rng(1)
    draws = np.array(
        [noisy_sum(stats, mode=mode, sigma_std=sigma, rng=rng).total - exact for _ in range(reps)]
    )
    var = draws.var(axis=0, ddof=1)
    expected = sigma**2 * factor
    # every statistic gets the variance; pooled over the 5 statistics the relative error of
    # the estimate is about sqrt(2 / (5 reps))
    tol = 5 * np.sqrt(2.0 / (stats.shape[1] * reps))
    assert abs(var.mean() / expected - 1) < tol
    assert abs(draws.mean()) < 5 * np.sqrt(expected / draws.size)
    released = noisy_sum(stats, mode=mode, sigma_std=sigma, rng=np.random.default_rng(2))
    np.testing.assert_allclose(released.total_std, np.sqrt(expected))


def test_nonprivate_is_the_exact_sum(stats):
    out = noisy_sum(stats, mode="nonprivate", sigma_std=None, rng=np.random.default_rng(0))
    np.testing.assert_allclose(out.total, stats.sum(axis=0))
    assert np.all(out.total_std == 0)


def test_distributed_passes_the_per_client_std_to_the_secure_sum(stats):
    seen = {}

    def fake(values, *, noise_std, compute_nodes, tolerated, rng):
        seen.update(
            values=values, noise_std=noise_std, compute_nodes=compute_nodes, tolerated=tolerated
        )
        return SimpleNamespace(total=values.sum(axis=0))

    noisy_sum(
        stats,
        mode="distributed",
        sigma_std=6.0,
        rng=np.random.default_rng(0),
        compute_nodes=4,
        tolerated=5,
        aggregate=fake,
    )
    np.testing.assert_allclose(seen["noise_std"], 6.0 / np.sqrt(30 - 5 - 1))
    assert seen["compute_nodes"] == 4 and seen["tolerated"] == 5
    np.testing.assert_array_equal(seen["values"], stats)


def test_distributed_with_a_sensitivity_adds_exact_ring_noise(stats):
    # the default secure sum, one sigma and a sensitivity: exact discrete noise in the ring,
    # whose honest multiplier in ring units is at least sigma / Delta
    sigma = _sigma()
    sens = statistics_sensitivity(7.5, 7.5, 2)
    n, dim = stats.shape
    out = noisy_sum(
        stats,
        mode="distributed",
        sigma_std=sigma,
        rng=np.random.default_rng(4),
        tolerated=2,
        l2_sensitivity=sens,
    )
    ring = out.ring
    assert ring is not None and ring.honest == n - 2 - 1 and ring.dim == dim
    assert ring.grid_sensitivity == pytest.approx(sens * 2**24 + np.sqrt(dim), rel=1e-15)
    assert (ring.honest * ring.sigma2) ** 0.5 / ring.grid_sensitivity >= sigma / sens
    assert ring.sigma2 == ring_sigma2(ring.client_std, 24)
    # the same generator seed reproduces the release; the noise has the ring's variance
    again = noisy_sum(
        stats,
        mode="distributed",
        sigma_std=sigma,
        rng=np.random.default_rng(4),
        tolerated=2,
        l2_sensitivity=sens,
    )
    np.testing.assert_array_equal(out.total, again.total)
    rng = np.random.default_rng(5)
    exact = stats.sum(axis=0)
    draws = np.array(
        [
            noisy_sum(
                stats,
                mode="distributed",
                sigma_std=sigma,
                rng=rng,
                tolerated=2,
                l2_sensitivity=sens,
            ).total
            - exact
            for _ in range(300)
        ]
    )
    expected = n * ring.sigma2 / 2.0**48
    assert abs(draws.var(axis=0, ddof=1).mean() / expected - 1) < 5 * np.sqrt(2 / draws.size)
    # a custom aggregate keeps its own (float) contract
    plain = noisy_sum(
        stats,
        mode="distributed",
        sigma_std=sigma,
        rng=np.random.default_rng(4),
        l2_sensitivity=sens,
        aggregate=lambda v, **kw: SimpleNamespace(total=v.sum(axis=0)),
    )
    assert plain.ring is None


def test_bad_arguments(stats):
    rng = np.random.default_rng(0)
    with pytest.raises(DpfedInputError, match="mode must be one of"):
        noisy_sum(stats, mode="central", sigma_std=1.0, rng=rng)
    with pytest.raises(DpfedInputError, match="sigma_std is needed"):
        noisy_sum(stats, mode="trusted", sigma_std=None, rng=rng)
    with pytest.raises(DpfedInputError, match="N - T - 1"):
        noisy_sum(stats[:3], mode="distributed", sigma_std=1.0, rng=rng, tolerated=2)
    with pytest.raises(DpfedInputError, match="Generator"):
        noisy_sum(stats, mode="trusted", sigma_std=1.0, rng=0)
