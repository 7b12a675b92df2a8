"""Preprocessing reads no private row: changing one training record (an extreme value, an
unlisted category) leaves every other row's preprocessed features unchanged, and the scaled
values lie in the declared output range.

Covers every named data set whose reader scales: breast_cancer, adult, wine-red, wine-white and
abalone. The checks on the real files skip when ``DPFED_DATA`` does not hold them.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from dpfed.data import (
    RegressionData,
    load_dataset,
    load_regression_dataset,
    read_abalone,
    read_adult,
    read_wine,
    row_norms,
    scale_to_range,
    stratified_split,
)
from dpfed.data.wine import WINE_FEATURES


def _real(needed: list[str]) -> Path:
    value = os.environ.get("DPFED_DATA", "")
    if not value or not all((Path(value) / rel).is_file() for rel in needed):
        pytest.skip(
            f"{' and '.join(needed)} not found under $DPFED_DATA (set DPFED_DATA to a folder "
            "holding them)"
        )
    return Path(value)


def _others_unchanged(before: np.ndarray, after: np.ndarray, changed: int) -> None:
    assert before.shape == after.shape
    keep = np.arange(before.shape[0]) != changed
    np.testing.assert_array_equal(after[keep], before[keep])
    assert not np.array_equal(after[changed], before[changed])


# --- breast_cancer ------------------------------------------------------------------------


def test_breast_cancer_rows_are_scaled_on_their_own(monkeypatch):
    import sklearn.datasets

    original = sklearn.datasets.load_breast_cancer
    bunch = original()
    n_test = round(0.3 * bunch.target.size)
    train_idx, _ = stratified_split(
        np.where(bunch.target == 1, 1.0, -1.0), n_test, np.random.default_rng(0)
    )
    before = load_dataset("breast_cancer")

    def extreme():
        out = original()
        out.data = out.data.copy()
        out.data[train_idx[0]] *= 1e6  # the first training row, every feature far too large
        return out

    monkeypatch.setattr(sklearn.datasets, "load_breast_cancer", extreme)
    after = load_dataset("breast_cancer")
    _others_unchanged(before.X_train, after.X_train, 0)
    np.testing.assert_array_equal(after.X_test, before.X_test)
    for X in (before.X_train, before.X_test, after.X_train):
        assert X.min() >= -1.0 and X.max() <= 1.0
    np.testing.assert_array_equal(after.X_train[0], 1.0)  # clipped to the declared bounds
    assert after.preprocessing["scaling"] == "declared public bounds"


# --- adult --------------------------------------------------------------------------------

TRAIN = (
    "20, Private, 100, HS-grad, 9, Married-civ-spouse, Sales, Husband, White, Male, 0, 0, 40, "
    "United-States, <=50K\n"
    "40, ?, 300, Bachelors, 13, Never-married, ?, Own-child, Black, Female, 1000, 10, 20, ?, "
    ">50K\n"
    "60, State-gov, 200, HS-grad, 9, Divorced, Sales, Wife, White, Female, 500, 0, 60, "
    "Mexico, <=50K\n"
)
TEST = (
    "|1x3 Cross validator\n"
    "30, Federal-gov, 50, Masters, 14, Widowed, Sales, Husband, Other, Male, 2000, 0, 40, "
    "Peru, >50K.\n"
)
EXTREME = (
    "150, Alien-gov, 99999999, HS-grad, 40, Married-civ-spouse, Sales, Husband, White, Male, "
    "9999999, 9999999, 168, Atlantis, <=50K"
)


def _adult(tmp_path: Path, train: str, test: str = TEST):
    tmp_path.mkdir(parents=True, exist_ok=True)
    a, b = tmp_path / "adult.data", tmp_path / "adult.test"
    a.write_text(train)
    b.write_text(test)
    return read_adult(a, b)


def test_adult_rows_are_encoded_on_their_own(tmp_path):
    before = _adult(tmp_path / "before", TRAIN)
    lines = TRAIN.splitlines()
    after = _adult(tmp_path / "after", "\n".join([EXTREME, *lines[1:]]) + "\n")
    assert before.X_train.shape == (3, 105)  # the documented categories, whatever the rows
    _others_unchanged(before.X_train, after.X_train, 0)
    np.testing.assert_array_equal(after.X_test, before.X_test)
    for X in (before.X_train, before.X_test, after.X_train):
        assert X.min() >= 0.0 and X.max() <= 1.0 and np.all(row_norms(X) <= 1.0)
    # every continuous value of the extreme row is clipped to its declared upper bound
    continuous = [0, 9, 26, 61, 62, 63]
    np.testing.assert_allclose(after.X_train[0, continuous], 1 / np.sqrt(14.0))


def test_adult_declared_scaling_of_one_row(tmp_path):
    ds = _adult(tmp_path, TRAIN)
    row = ds.X_train[0] * np.sqrt(14.0)
    # age 20 in [17, 90], fnlwgt 100 in [0, 1e7], education-num 9 in [1, 16],
    # capital-gain and -loss 0, hours 40 in [1, 99]
    expected = [3 / 73, 100 / 1e7, 8 / 15, 0.0, 0.0, 39 / 98]
    np.testing.assert_allclose(row[[0, 9, 26, 61, 62, 63]], expected, rtol=1e-12)
    assert row.sum() - sum(expected) == pytest.approx(8.0)  # one indicator per attribute


def test_real_adult_one_changed_record_changes_no_other_row(tmp_path):
    base = _real(["adult/adult.data", "adult/adult.test"])
    train, test = base / "adult" / "adult.data", base / "adult" / "adult.test"
    before = read_adult(train, test)
    lines = train.read_text().splitlines()
    changed = tmp_path / "adult.data"
    changed.write_text("\n".join([lines[0], EXTREME, *lines[2:]]) + "\n")
    after = read_adult(changed, test)
    _others_unchanged(before.X_train, after.X_train, 1)
    np.testing.assert_array_equal(after.X_test, before.X_test)
    for X in (after.X_train, after.X_test):
        assert X.min() >= 0.0 and X.max() <= 1.0 and np.all(row_norms(X) <= 1.0)


# --- wine-red, wine-white, abalone ----------------------------------------------------------

WINE = (
    ";".join(f'"{c}"' for c in (*WINE_FEATURES, "quality")) + "\n"
    "7.4;0.7;0;1.9;0.076;11;34;0.9978;3.51;0.56;9.4;5\n"
    "7.8;0.88;0;2.6;0.098;25;67;0.9968;3.2;0.68;9.8;6\n"
    "11.2;0.28;0.56;1.9;0.075;17;60;0.998;3.16;0.58;9.8;6\n"
)
ABALONE = (
    "M,0.455,0.365,0.095,0.514,0.2245,0.101,0.15,15\n"
    "F,0.53,0.42,0.135,0.677,0.2565,0.1415,0.21,9\n"
    "I,0.33,0.255,0.08,0.205,0.0895,0.0395,0.055,7\n"
)


def _extreme_row(data: RegressionData, row: int) -> RegressionData:
    X, y = data.X.copy(), data.y.copy()
    X[row] = X[row] * 1000 + 1000  # every feature far above its declared bound
    y[row] = 1000.0
    return dataclasses.replace(data, X=X, y=y)


def _check_regression(raw: RegressionData, row: int) -> None:
    before, scaling = scale_to_range(raw)
    after, _ = scale_to_range(_extreme_row(raw, row))
    _others_unchanged(before.X, after.X, row)
    _others_unchanged(before.y, after.y, row)
    for scaled in (before, after):
        full = np.column_stack([scaled.X, scaled.y])
        assert full.min() >= -5.0 and full.max() <= 5.0  # inside the assumed +-7.5
    np.testing.assert_array_equal(after.y[row], 5.0)
    assert after.preprocessing["scaling"] == "declared public bounds"
    assert scaling.center == "midpoint of the declared bounds"


@pytest.mark.parametrize("name", ["wine-red", "wine-white"])
def test_wine_rows_are_scaled_on_their_own(tmp_path, name):
    path = tmp_path / "wine.csv"
    path.write_text(WINE)
    _check_regression(read_wine(path, name=name), 1)


def test_abalone_rows_are_scaled_on_their_own(tmp_path):
    path = tmp_path / "abalone.data"
    path.write_text(ABALONE)
    _check_regression(read_abalone(path), 0)


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("wine-red", "wine_quality/winequality-red.csv"),
        ("wine-white", "wine_quality/winequality-white.csv"),
        ("abalone", "abalone/abalone.data"),
    ],
)
def test_real_regression_sets_are_scaled_row_by_row(name, file):
    base = _real([file])
    raw = load_regression_dataset(name, base)
    _check_regression(raw, 7)
    scaled, scaling = scale_to_range(raw)
    # the documented target scale: wine quality 0-10 maps to quality - 5
    if name.startswith("wine"):
        np.testing.assert_allclose(scaled.y, raw.y - 5.0)
        assert scaling.target_to_raw_scale(1.0) == pytest.approx(1.0)
