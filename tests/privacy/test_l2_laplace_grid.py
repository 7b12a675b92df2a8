"""The exact l2-Laplace grid release: the float shortcut decides as interval arithmetic does,
and the released law is the rounding of the continuous l2-Laplace law."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpfed._validation import DpfedInputError
from dpfed.privacy.l2_laplace_grid import (
    GRID_BITS_BELOW_SCALE,
    l2_laplace_grid_release,
    l2_laplace_grid_spacing,
)

MIN_P = 1e-4  # a correct sampler fails one of these tests about once in ten thousand runs


@pytest.mark.parametrize("dim", [1, 2, 3, 8])
@pytest.mark.parametrize("grid", [None, 2.0**-40, 2.0**-49])
def test_the_float_shortcut_decides_as_interval_arithmetic_does(dim, grid):
    """Same words, same releases, whether the float path decides first or every vector is
    decided in interval arithmetic. At the 2^-40 grid a third or more of the vectors leave the
    float path, so both paths and the extra words are exercised; at 2^-49 the float error is
    about a cell, and a float path that ignored its error bound would decide dozens of
    coordinates wrongly here."""
    value = 0.01 * np.random.default_rng(9).normal(size=(150, dim))
    fast = l2_laplace_grid_release(value, 1.5, np.random.default_rng(5), grid=grid)
    exact = l2_laplace_grid_release(value, 1.5, np.random.default_rng(5), grid=grid, fast=False)
    np.testing.assert_array_equal(fast, exact)


def test_one_dimension_is_the_rounded_laplace_law_exactly():
    """d = 1: P(Y = m gamma) = F((m + 1/2) gamma - v) - F((m - 1/2) gamma - v), F the Laplace
    CDF of scale 1/zeta; chi-square at 10^6 releases on a grid coarse enough to show the
    rounding, at an offset v off the grid."""
    zeta, grid, n = 1.0, 0.25, 1_000_000
    v = 0.3 * grid
    released = l2_laplace_grid_release(
        np.full((n, 1), v), zeta, np.random.default_rng(11), grid=grid
    )[:, 0]
    cells = np.rint(released / grid).astype(np.int64)
    np.testing.assert_array_equal(cells * grid, released)
    edges = np.arange(-40, 41)
    law = stats.laplace(loc=v, scale=1.0 / zeta)
    probs = law.cdf((edges + 0.5) * grid) - law.cdf((edges - 0.5) * grid)
    probs[0] = law.cdf(-39.5 * grid)
    probs[-1] = law.sf(39.5 * grid)
    counts = np.bincount(np.clip(cells, -40, 40) + 40, minlength=edges.size)
    assert stats.chisquare(counts, probs * n).pvalue > MIN_P


@pytest.mark.parametrize("zeta", [0.5, 3.0])
def test_three_dimensions_have_gamma_norms_and_uniform_directions(zeta):
    """d = 3 at the default grid (rounding 2^-21 / zeta per coordinate): the noise's norm is
    Gamma(3, 1/zeta) and its first coordinate over the norm is uniform on [-1, 1]
    (Archimedes), by Kolmogorov-Smirnov at 10^6 releases, about a point off the grid."""
    n, value = 1_000_000, np.array([0.7, -2.0, 123.456])
    noise = (
        l2_laplace_grid_release(np.tile(value, (n, 1)), zeta, np.random.default_rng(int(zeta * 10)))
        - value
    )
    norms = np.linalg.norm(noise, axis=1)
    assert stats.kstest(norms, stats.gamma(3, scale=1.0 / zeta).cdf).pvalue > MIN_P
    assert stats.kstest(noise[:, 0] / norms, stats.uniform(-1, 2).cdf).pvalue > MIN_P


def test_the_exact_path_alone_draws_the_laplace_law():
    """A grid so fine (2^-46) that the float path decides almost nothing: the interval path and
    its extra words give the Laplace law (Kolmogorov-Smirnov, 3,000 releases)."""
    released = l2_laplace_grid_release(
        np.zeros((3000, 1)), 2.0, np.random.default_rng(2), grid=2.0**-46
    )[:, 0]
    assert stats.kstest(released, stats.laplace(scale=0.5).cdf).pvalue > MIN_P


def test_releases_sit_on_the_grid_near_the_value_and_a_seed_repeats_them():
    zeta = 0.8
    grid = l2_laplace_grid_spacing(zeta)
    assert grid == 2.0 ** (np.floor(np.log2(1.0 / zeta)) - GRID_BITS_BELOW_SCALE)
    value = np.random.default_rng(0).normal(size=(4, 5))
    first = l2_laplace_grid_release(value, zeta, np.random.default_rng(7))
    again = l2_laplace_grid_release(value, zeta, np.random.default_rng(7))
    np.testing.assert_array_equal(first, again)
    assert first.shape == value.shape
    np.testing.assert_array_equal(np.rint(first / grid) * grid, first)
    one = l2_laplace_grid_release(value[0], zeta, np.random.default_rng(7))
    np.testing.assert_array_equal(one, first[0])  # a row's words come first, in row order
    other = l2_laplace_grid_release(value, zeta, np.random.default_rng(8))
    assert not np.array_equal(first, other)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"value": np.array([1.0, np.nan])}, "finite"),
        ({"value": np.zeros((2, 2, 2))}, "finite"),
        ({"zeta": 0.0}, "zeta"),
        ({"grid": 0.3}, "power of two"),
        ({"value": np.array([1e300])}, "too large"),
    ],
)
def test_bad_inputs_are_refused_with_names(kwargs, match):
    args = {"value": np.zeros(3), "zeta": 1.0, "rng": np.random.default_rng(0)} | kwargs
    with pytest.raises(DpfedInputError, match=match):
        l2_laplace_grid_release(**args)
