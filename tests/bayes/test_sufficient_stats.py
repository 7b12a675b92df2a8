"""Per-row statistics, clipping, and the sensitivity formula against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.bayes import (
    clip_to_bounds,
    moment_sensitivity,
    n_statistics,
    pack_statistics,
    row_moments,
    row_statistics,
    statistics_sensitivity,
    statistics_sensitivity_squared,
    unpack_statistics,
)


def _extreme_rows(cx, cy, levels=(-1.0, -0.5, 0.0, 0.5, 1.0)):
    """Every row with each coordinate in levels * bound: shape (K, d + 1)."""
    bounds = np.append(cx, cy)
    return np.array([np.array(p) * bounds for p in itertools.product(levels,
                                                                      repeat=bounds.size)])


def _pairwise_sq_diffs(rows):
    d = rows.shape[1] - 1
    z = row_statistics(rows[:, :d], rows[:, d])
    diff = z[:, None, :] - z[None, :, :]
    return diff * diff  # (K, K, D)


def test_statistics_layout_and_round_trip():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(7, 3)), rng.normal(size=7)
    z = row_statistics(X, y)
    assert z.shape == (7, n_statistics(3)) == (7, 9)
    S_xx, S_xy = unpack_statistics(z.sum(axis=0), 3)
    np.testing.assert_allclose(S_xx, X.T @ X, rtol=1e-12)
    np.testing.assert_allclose(S_xy, X.T @ y, rtol=1e-12)
    np.testing.assert_allclose(pack_statistics(S_xx, S_xy), z.sum(axis=0))
    stacked_xx, stacked_xy = unpack_statistics(z, 3)  # per row
    np.testing.assert_allclose(stacked_xy[2], X[2] * y[2])
    np.testing.assert_allclose(stacked_xx[2], np.outer(X[2], X[2]))
    with pytest.raises(DpfedInputError, match="d\\(d\\+1\\)/2 \\+ d = 9"):
        unpack_statistics(z.sum(axis=0)[:-1], 3)


@pytest.mark.parametrize(("d", "cx", "cy"), [(1, 1.0, 1.0), (2, 7.5, 7.5), (3, 1.5, 0.5)])
def test_formula_is_the_sum_of_coordinate_maxima(d, cx, cy):
    # The paper bounds each coordinate separately and adds the maxima (eq. 18); brute force
    # over extreme rows finds exactly those maxima.
    sq = _pairwise_sq_diffs(_extreme_rows(np.full(d, cx), cy))
    per_coordinate = sq.max(axis=(0, 1))
    expected = d * (2 * d - 1) * cx**4 + 4 * d * cx**2 * cy**2
    assert per_coordinate.sum() == pytest.approx(expected, rel=1e-12)
    assert statistics_sensitivity_squared(cx, cy, d) == pytest.approx(expected, rel=1e-12)
    # ... and bounds the true (joint) sensitivity, which is smaller: the bound is not tight
    joint = sq.sum(axis=2).max()
    assert joint <= expected * (1 + 1e-12)
    assert joint < expected


def test_per_feature_bounds_match_brute_force():
    cx, cy = np.array([0.5, 2.0, 1.0]), 3.0
    sq = _pairwise_sq_diffs(_extreme_rows(cx, cy, levels=(-1.0, 0.0, 1.0)))
    assert sq.max(axis=(0, 1)).sum() == pytest.approx(statistics_sensitivity_squared(cx, cy))
    assert statistics_sensitivity(cx, cy) == pytest.approx(np.sqrt(sq.max(axis=(0, 1)).sum()))


def test_random_rows_never_exceed_the_sensitivity():
    rng = np.random.default_rng(1)
    d, c = 4, 2.0
    a = rng.uniform(-c, c, size=(5000, d + 1))
    b = rng.uniform(-c, c, size=(5000, d + 1))
    za, zb = row_statistics(a[:, :d], a[:, d]), row_statistics(b[:, :d], b[:, d])
    worst = np.sqrt(((za - zb) ** 2).sum(axis=1)).max()
    assert worst <= statistics_sensitivity(c, c, d)


def test_moment_sensitivity_matches_brute_force():
    cx, cy = np.array([1.0, 2.0]), 0.5
    rows = _extreme_rows(cx, cy, levels=(-1.0, 0.0, 1.0))
    for first in (False, True):
        m = row_moments(rows[:, :2], rows[:, 2], first=first)
        sq = ((m[:, None, :] - m[None, :, :]) ** 2).max(axis=(0, 1)).sum()
        assert moment_sensitivity(cx, cy, first=first) == pytest.approx(np.sqrt(sq))


def test_clipping_is_enforced_and_copies():
    X = np.array([[100.0, -3.0], [0.5, -0.2]])
    y = np.array([-50.0, 1.0])
    Xc, yc = clip_to_bounds(X, y, [1.0, 2.0], 0.5)
    np.testing.assert_array_equal(Xc, [[1.0, -2.0], [0.5, -0.2]])
    np.testing.assert_array_equal(yc, [-0.5, 0.5])
    assert X[0, 0] == 100.0  # input untouched
    with pytest.raises(DpfedInputError, match="bound_x must hold finite numbers > 0"):
        clip_to_bounds(X, y, [1.0, 0.0], 1.0)
    with pytest.raises(DpfedInputError, match="one bound per feature"):
        clip_to_bounds(X, y, [1.0, 1.0, 1.0], 1.0)
    with pytest.raises(DpfedInputError, match="finite"):
        clip_to_bounds(np.array([[np.nan, 1.0]]), np.array([1.0]), 1.0, 1.0)
