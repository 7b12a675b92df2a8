"""Scaling of the regression sets to a range of length 10, random splits, and the file checks
the Wine Quality and Abalone readers share."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.data import RegressionData, random_split, read_abalone, read_wine, scale_to_range


def _data(seed=0, n=50):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.exponential(size=n), rng.normal(3, 2, n), np.full(n, 4.0)])
    return RegressionData("toy", X, rng.integers(3, 9, n).astype(float), ("a", "b", "c"), "t",
                          "synthetic")


def test_mean_centred_range_of_length_ten():
    scaled, scaling = scale_to_range(_data())
    full = np.column_stack([scaled.X, scaled.y])
    span = full.max(axis=0) - full.min(axis=0)
    np.testing.assert_allclose(span, [10, 10, 0, 10])  # the constant column maps to 0
    np.testing.assert_allclose(full.mean(axis=0), 0, atol=1e-12)
    assert scaling.factor_X[2] == 0 and np.all(scaled.X[:, 2] == 0)
    assert "public knowledge" in scaling.notes[0] and "public knowledge" in scaled.source
    raw = _data()
    np.testing.assert_allclose((raw.y - scaling.offset_y) * scaling.factor_y, scaled.y)
    assert scaling.target_to_raw_scale(10.0) == pytest.approx(raw.y.max() - raw.y.min())


def test_midrange_lies_in_plus_minus_five():
    scaled, _ = scale_to_range(_data(), center="midrange")
    full = np.column_stack([scaled.X[:, :2], scaled.y])
    np.testing.assert_allclose(full.min(axis=0), -5)
    np.testing.assert_allclose(full.max(axis=0), 5)
    with pytest.raises(DpfedInputError, match="center must be"):
        scale_to_range(_data(), center="median")
    with pytest.raises(DpfedInputError, match="length"):
        scale_to_range(_data(), length=0)


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


@pytest.mark.parametrize(("read", "label", "separator"), [
    (read_wine, "Wine Quality file", "semicolon"),
    (read_abalone, "Abalone file", "comma"),
])
def test_readers_refuse_what_is_not_a_readable_text_file(tmp_path, read, label, separator):
    with pytest.raises(DpfedInputError, match="must be the path of"):
        read(3)
    with pytest.raises(DpfedInputError, match=r"not an existing file\. Expected .*UCI"):
        read(tmp_path / "missing.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DpfedInputError, match=f"{label} .* is not UTF-8 text \\(byte 0\\). "
                                              f"Expected the {separator}-separated UCI file"):
        read(binary)
