"""Tests for dpfed.privacy.l2_laplace: density exp(-zeta ||e||) sampled exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfed._validation import DpfedInputError
from dpfed.privacy.l2_laplace import l2_laplace_norm_cdf, sample_l2_laplace

N = 20000
SEED = 20240607


def _norm_sample(zeta: float, dim: int, seed: int = SEED) -> np.ndarray:
    return np.linalg.norm(sample_l2_laplace(zeta, dim, seed, size=N), axis=1)


@pytest.mark.parametrize("dim", [1, 2, 10, 105])
def test_norm_is_gamma_dim_over_zeta(dim: int) -> None:
    zeta = 0.7
    norms = _norm_sample(zeta, dim)
    result = stats.kstest(norms, stats.gamma(a=dim, scale=1 / zeta).cdf)
    assert result.pvalue > 0.01
    # the module's cdf is the same distribution
    result2 = stats.kstest(norms, lambda r: l2_laplace_norm_cdf(r, zeta, dim))
    assert result2.pvalue == pytest.approx(result.pvalue)


@pytest.mark.parametrize("dim", [2, 10, 105])
def test_wrong_gamma_shape_is_rejected(dim: int) -> None:
    # A sampler drawing the norm from Gamma(dim - 1) (the classic mistake of forgetting the
    # r^(d-1) surface factor, or using it twice) would fail the test above: its KS p-value is
    # tiny against the right law, and ours is tiny against the wrong one.
    zeta = 0.7
    norms = _norm_sample(zeta, dim)
    wrong = stats.kstest(norms, stats.gamma(a=dim - 1, scale=1 / zeta).cdf)
    assert wrong.pvalue < 1e-6
    rng = np.random.default_rng(SEED)
    wrong_norms = rng.gamma(shape=dim - 1, scale=1 / zeta, size=N)
    assert stats.kstest(wrong_norms, stats.gamma(a=dim, scale=1 / zeta).cdf).pvalue < 1e-6


def test_one_dimension_is_laplace() -> None:
    zeta = 2.5
    x = sample_l2_laplace(zeta, 1, SEED, size=N)[:, 0]
    assert stats.kstest(x, stats.laplace(scale=1 / zeta).cdf).pvalue > 0.01


@pytest.mark.parametrize("dim", [2, 3, 10, 105])
def test_direction_mean_is_zero(dim: int) -> None:
    e = sample_l2_laplace(1.3, dim, SEED + dim, size=N)
    u = e / np.linalg.norm(e, axis=1, keepdims=True)
    # each coordinate of a uniform direction has mean 0 and variance 1/dim
    assert np.all(np.abs(u.mean(axis=0)) < 4 / math.sqrt(N))
    assert np.allclose(np.linalg.norm(u, axis=1), 1.0)


def test_direction_uniform_in_2d_angle() -> None:
    e = sample_l2_laplace(0.5, 2, SEED, size=N)
    angle = np.arctan2(e[:, 1], e[:, 0])
    assert stats.kstest(angle, stats.uniform(loc=-math.pi, scale=2 * math.pi).cdf).pvalue > 0.01


def test_direction_uniform_in_3d_z_coordinate() -> None:
    # Archimedes: the z-coordinate of a uniform point on the 2-sphere is uniform on [-1, 1].
    e = sample_l2_laplace(0.5, 3, SEED, size=N)
    zc = e[:, 2] / np.linalg.norm(e, axis=1)
    assert stats.kstest(zc, stats.uniform(loc=-1.0, scale=2.0).cdf).pvalue > 0.01


@pytest.mark.parametrize(("zeta", "dim"), [(0.5, 1), (2.0, 10), (0.1, 105)])
def test_mean_norm_is_dim_over_zeta(zeta: float, dim: int) -> None:
    norms = _norm_sample(zeta, dim)
    sd_of_mean = math.sqrt(dim) / zeta / math.sqrt(N)
    assert abs(norms.mean() - dim / zeta) < 4 * sd_of_mean


def test_shapes_and_determinism() -> None:
    a = sample_l2_laplace(1.0, 7, 123)
    assert a.shape == (7,)
    b = sample_l2_laplace(1.0, 7, 123)
    np.testing.assert_array_equal(a, b)
    c = sample_l2_laplace(1.0, 7, np.random.default_rng(123), size=5)
    assert c.shape == (5, 7)
    np.testing.assert_array_equal(c, sample_l2_laplace(1.0, 7, 123, size=5))
    assert not np.array_equal(c, sample_l2_laplace(1.0, 7, 124, size=5))
    # a shared generator advances
    g = np.random.default_rng(5)
    assert not np.array_equal(sample_l2_laplace(1.0, 3, g), sample_l2_laplace(1.0, 3, g))
    assert sample_l2_laplace(1.0, 3, None).shape == (3,)


def test_norm_cdf_closed_forms() -> None:
    r = np.array([0.0, 0.3, 1.0, 4.0])
    zeta = 1.7
    # d = 1: 1 - e^{-zeta r};  d = 2: 1 - e^{-zeta r} (1 + zeta r)
    np.testing.assert_allclose(l2_laplace_norm_cdf(r, zeta, 1), 1 - np.exp(-zeta * r))
    np.testing.assert_allclose(
        l2_laplace_norm_cdf(r, zeta, 2), 1 - np.exp(-zeta * r) * (1 + zeta * r)
    )
    assert isinstance(l2_laplace_norm_cdf(1.0, zeta, 3), float)


@pytest.mark.parametrize(
    ("zeta", "dim", "rng", "size"),
    [
        (0.0, 3, 1, None),
        (-1.0, 3, 1, None),
        (float("inf"), 3, 1, None),
        (1.0, 0, 1, None),
        (1.0, 2.5, 1, None),
        (1.0, 3, 1, 0),
        (1.0, 3, "seed", None),
        (1.0, 3, True, None),
        (1.0, 3, -4, None),
        (1.0, 3, np.random.RandomState(0), None),
    ],
)
def test_rejects_bad_inputs(zeta: float, dim: int, rng: object, size: int | None) -> None:
    with pytest.raises(DpfedInputError):
        sample_l2_laplace(zeta, dim, rng, size=size)  # type: ignore[arg-type]
