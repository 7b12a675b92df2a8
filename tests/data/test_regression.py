"""Scaling of the regression sets to a range of length 10 by declared public bounds, random
splits, and the file checks the Wine Quality and Abalone readers share."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.data import RegressionData, random_split, read_abalone, read_wine, scale_to_range


def _data(seed=0, n=50):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.exponential(size=n), rng.normal(3, 2, n), np.full(n, 4.0)])
    return RegressionData(
        "toy", X, rng.integers(3, 9, n).astype(float), ("a", "b", "c"), "t", "synthetic"
    )


BOUNDS = [(0.0, 10.0), (-10.0, 20.0), (0.0, 8.0)]
TARGET = (0.0, 10.0)


def test_declared_bounds_centre_at_midpoint_and_scale_to_length_ten():
    raw = _data()
    scaled, scaling = scale_to_range(raw, bounds=BOUNDS, target_bounds=TARGET)
    lower = np.array([b[0] for b in (*BOUNDS, TARGET)])
    upper = np.array([b[1] for b in (*BOUNDS, TARGET)])
    full = np.column_stack([raw.X, raw.y])
    expected = (np.clip(full, lower, upper) - (lower + upper) / 2) * 10 / (upper - lower)
    np.testing.assert_allclose(np.column_stack([scaled.X, scaled.y]), expected, atol=1e-12)
    assert np.all(np.abs(expected) <= 5.0)
    np.testing.assert_allclose(scaled.X[:, 2], 0.0, atol=1e-12)  # 4 is the midpoint of [0, 8]
    np.testing.assert_allclose(scaling.offset_X, [5.0, 5.0, 4.0])
    np.testing.assert_allclose(scaling.factor_X, [1.0, 1 / 3, 1.25])
    assert scaling.offset_y == 5.0 and scaling.factor_y == 1.0
    assert scaling.target_to_raw_scale(10.0) == pytest.approx(10.0)
    assert "declared public bounds" in scaling.notes[0] and "declared public" in scaled.source
    assert scaled.preprocessing["scaling"] == "declared public bounds"
    assert scaled.preprocessing["columns"]["b"] == [-10.0, 20.0]
    assert raw.preprocessing["scaling"] == "none"
    # the constants do not depend on the rows: any subset scales the same way
    half = RegressionData("toy", raw.X[:10], raw.y[:10], raw.feature_names, "t", "synthetic")
    np.testing.assert_array_equal(
        scale_to_range(half, bounds=BOUNDS, target_bounds=TARGET)[0].X, scaled.X[:10]
    )


def test_scale_to_range_refuses_missing_or_bad_bounds():
    with pytest.raises(
        DpfedInputError,
        match=r"no public bounds are declared for data set "
        r"'toy'.*never from the data",
    ):
        scale_to_range(_data())
    with pytest.raises(DpfedInputError, match="bounds and target_bounds go together"):
        scale_to_range(_data(), bounds=BOUNDS)
    with pytest.raises(DpfedInputError, match=r"one \(lo, hi\) pair per feature column \(3\)"):
        scale_to_range(_data(), bounds=BOUNDS[:2], target_bounds=TARGET)
    with pytest.raises(DpfedInputError, match="lower < upper"):
        scale_to_range(_data(), bounds=[(0.0, 1.0), (1.0, 0.0), (0.0, 1.0)], target_bounds=TARGET)
    with pytest.raises(DpfedInputError, match="length"):
        scale_to_range(_data(), length=0, bounds=BOUNDS, target_bounds=TARGET)
    renamed = dataclasses.replace(_data(), name="wine-red")
    with pytest.raises(
        DpfedInputError,
        match=r"declared bounds of 'wine-red' are for the "
        r"columns .*fixed acidity",
    ):
        scale_to_range(renamed)


def test_random_split_is_disjoint_and_seeded():
    train, test = random_split(100, 30, np.random.default_rng(1))
    assert test.size == 30 and train.size == 70
    assert np.intersect1d(train, test).size == 0 and np.union1d(train, test).size == 100
    again = random_split(100, 30, np.random.default_rng(1))
    np.testing.assert_array_equal(again[1], test)
    train, test = random_split(100, 30, np.random.default_rng(1), n_train=50)
    assert train.size == 50
    with pytest.raises(DpfedInputError, match="n_test"):
        random_split(10, 10, np.random.default_rng(0))
    with pytest.raises(DpfedInputError, match="n_train"):
        random_split(10, 5, np.random.default_rng(0), n_train=6)


@pytest.mark.parametrize(
    ("read", "label", "separator"),
    [
        (read_wine, "Wine Quality file", "semicolon"),
        (read_abalone, "Abalone file", "comma"),
    ],
)
def test_readers_refuse_what_is_not_a_readable_text_file(tmp_path, read, label, separator):
    with pytest.raises(DpfedInputError, match="must be the path of"):
        read(3)
    with pytest.raises(DpfedInputError, match=r"not an existing file\. Expected .*UCI"):
        read(tmp_path / "missing.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(
        DpfedInputError,
        match=f"{label} .* is not UTF-8 text \\(byte 0\\). "
        f"Expected the {separator}-separated UCI file",
    ):
        read(binary)
