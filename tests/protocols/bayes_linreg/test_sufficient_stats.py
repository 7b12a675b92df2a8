"""Per-row statistics, clipping, and the sensitivity formula against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.protocols.bayes_linreg import (
    clip_to_bounds,
    moment_pair_sensitivity_squared,
    moment_sensitivity,
    n_statistics,
    pack_statistics,
    row_moments,
    row_statistics,
    statistics_sensitivity,
    statistics_sensitivity_squared,
    sum_sensitivity,
    unpack_statistics,
)


def _extreme_rows(cx, cy, levels=(-1.0, -0.5, 0.0, 0.5, 1.0)):
    """Every row with each coordinate in levels * bound: shape (K, d + 1)."""
    bounds = np.append(cx, cy)
    return np.array([np.array(p) * bounds for p in itertools.product(levels, repeat=bounds.size)])


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
    m = row_moments(rows[:, :2], rows[:, 2])
    sq = ((m[:, None, :] - m[None, :, :]) ** 2).max(axis=(0, 1)).sum()
    assert moment_sensitivity(cx, cy) == pytest.approx(np.sqrt(sq))


def _pair_brute_force(c, w, points=2001):
    v = np.linspace(-c, c, points)
    a, b = np.meshgrid(v, v)
    return ((a * a - b * b) ** 2 + w * w * (a - b) ** 2).max()


@pytest.mark.parametrize(
    ("c", "w"),
    [
        (7.5, 1.0),
        (7.5, 7.5 / np.sqrt(2)),
        (2.0, 1.0),
        (1.0, 1.0),
        (1.45, 1.0),
        (3.0, 0.1),
        (0.5, 2.0),
    ],
)
def test_moment_pair_sensitivity_is_the_exact_maximum(c, w):
    # the square and the (weighted) value of one coordinate change together: the exact
    # maximum over v, v' in [-c, c], not the sum of the separate maxima c^4 + 4 w^2 c^2
    exact = float(moment_pair_sensitivity_squared(c, w))
    assert exact == pytest.approx(_pair_brute_force(c, w), rel=1e-6)
    assert exact <= c**4 + 4 * w * w * c * c
    if w >= c / np.sqrt(2):
        assert exact == pytest.approx(4 * w * w * c * c)  # the squares ride along for free


def test_moment_sensitivity_with_first_moments_is_exact_and_joint():
    cx, cy = np.array([1.0, 2.0]), 0.5
    c = np.append(cx, cy)
    for scale in (None, 0.7, c / np.sqrt(2)):
        w = np.ones(3) if scale is None else np.broadcast_to(scale, (3,))
        expected = sum(_pair_brute_force(cj, wj) for cj, wj in zip(c, w, strict=True))
        got = moment_sensitivity(cx, cy, first=True, first_scale=scale)
        assert got == pytest.approx(np.sqrt(expected), rel=1e-6)
    # the worst rows of every coordinate can be combined: random pairs never exceed it
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, size=(2, 20000, 3)) * c
    w = c / np.sqrt(2)
    ma = row_moments(a[:, :2], a[:, 2], first=True, first_scale=w)
    mb = row_moments(b[:, :2], b[:, 2], first=True, first_scale=w)
    assert np.sqrt(((ma - mb) ** 2).sum(axis=1)).max() <= moment_sensitivity(
        cx, cy, first=True, first_scale=w
    )
    assert moment_sensitivity(cx, cy, first=True, first_scale=w) == pytest.approx(
        np.sqrt(2 * (c**4).sum())
    )
    np.testing.assert_allclose(ma[:, 3:], a * w)
    with pytest.raises(DpfedInputError, match="first_scale must hold finite numbers > 0"):
        row_moments(a[:, :2], a[:, 2], first=True, first_scale=0.0)


def test_sum_sensitivity_is_attained():
    cx, cy = np.array([1.0, 2.0, 0.5]), 3.0
    c = np.append(cx, cy)
    assert sum_sensitivity(cx, cy) == pytest.approx(np.linalg.norm(c - (-c)))
    assert sum_sensitivity(1.5, 2.0, 4) == pytest.approx(2 * np.sqrt(4 * 1.5**2 + 4.0))
    rows = _extreme_rows(cx, cy, levels=(-1.0, 0.0, 1.0))
    worst = np.sqrt(((rows[:, None, :] - rows[None, :, :]) ** 2).sum(axis=2)).max()
    assert worst == pytest.approx(sum_sensitivity(cx, cy))


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
