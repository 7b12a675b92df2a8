"""UCI Adult reader: exact encoding on tiny files, format errors, and the real files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.data import KNOWN_DATASETS, load_dataset, read_adult, row_norms
from dpfed.data.adult import ADULT_ATTRIBUTES
from dpfed.data.specs import ADULT_CATEGORIES

# --- tiny hand-written files -----------------------------------------------------------

TRAIN = (
    "20, Private, 100, HS-grad, 9, Married, Sales, Husband, White, Male, 0, 0, 40, US, <=50K\n"
    "40, ?, 300, Bachelors, 13, Never, ?, Own-child, Black, Female, 1000, 10, 20, ?, >50K\n"
    "\n"
    "60,State-gov,200,HS-grad,9,Married,Sales,Husband,White,Female,500,0,60,Mexico,<=50K\n"
    "\n"
)
TEST = (
    "|1x3 Cross validator\n"
    "80, Federal-gov, 50, Masters, 16, Married, Sales, Husband, Asian, Male, 2000, 0, 40, US, "
    ">50K.\n"
    "\n"
    "60, Private, 300, HS-grad, 13, Never, Sales, Husband, White, Male, 1000, 10, 60, US, "
    "<=50K.\n"
    "30, ?, 100, Bachelors, 9, ?, ?, ?, ?, ?, 0, 0, 20, ?, <=50K.\n"
)

# Continuous attributes and their declared bounds (dpfed.data.specs), in column order.
BOUNDS = {
    "age": (17.0, 90.0),
    "fnlwgt": (0.0, 1e7),
    "education-num": (1.0, 16.0),
    "capital-gain": (0.0, 99999.0),
    "capital-loss": (0.0, 99999.0),
    "hours-per-week": (1.0, 99.0),
}


def _expected(line: str) -> np.ndarray:
    """One row encoded by the documented rules: declared bounds, documented categories."""
    fields = [f.strip() for f in line.split(",")][:14]
    out: list[float] = []
    for attribute, value in zip(ADULT_ATTRIBUTES, fields, strict=True):
        if attribute in BOUNDS:
            lo, hi = BOUNDS[attribute]
            out.append((min(max(float(value), lo), hi) - lo) / (hi - lo))
        else:
            known = sorted(ADULT_CATEGORIES[attribute])
            out.extend(1.0 if value == category else 0.0 for category in known)
    return np.array(out) / np.sqrt(14.0)


def _data_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("|")]


def _write(tmp_path: Path, train: str = TRAIN, test: str = TEST) -> tuple[Path, Path]:
    a, b = tmp_path / "adult.data", tmp_path / "adult.test"
    a.write_text(train)
    b.write_text(test)
    return a, b


def test_tiny_files_encode_exactly(tmp_path: Path) -> None:
    ds = read_adult(*_write(tmp_path))
    assert ds.name == "adult"
    assert ds.X_train.shape == (3, 105) and ds.X_test.shape == (3, 105)
    assert ds.X_train.dtype == np.float64 and isinstance(ds.X_train, np.ndarray)
    np.testing.assert_array_equal(ds.y_train, [-1.0, 1.0, -1.0])
    np.testing.assert_array_equal(ds.y_test, [1.0, -1.0, -1.0])
    expected_train = np.array([_expected(ln) for ln in _data_lines(TRAIN)])
    expected_test = np.array([_expected(ln) for ln in _data_lines(TEST)])
    np.testing.assert_allclose(ds.X_train, expected_train, rtol=1e-15, atol=0)
    np.testing.assert_allclose(ds.X_test, expected_test, rtol=1e-15, atol=0)
    # test row 1: age 80 -> (80 - 17) / 73, edu-num 16 -> 1; Federal-gov and Masters are
    # documented categories (indicators set although no training row has them); "Married",
    # "Asian" and "US" are not (the files spell them Married-civ-spouse, Asian-Pac-Islander,
    # United-States): zeros. Its capital-loss is 0.
    assert ds.X_test[0, 0] * np.sqrt(14.0) == pytest.approx(63 / 73)
    assert int(np.count_nonzero(ds.X_test[0])) == (6 - 1) + (8 - 3)
    assert np.all(row_norms(ds.X_train) <= 1.0) and np.all(row_norms(ds.X_test) <= 1.0)
    assert "105 columns" in ds.source and "sqrt(14)" in ds.source
    assert ds.preprocessing["scaling"] == "declared public bounds"


def test_constant_training_column_keeps_its_declared_scale(tmp_path: Path) -> None:
    rows = TRAIN.replace("0, 0, 40", "0, 7, 40").replace("1000, 10, 20", "1000, 7, 20")
    rows = rows.replace("500,0,60", "500,7,60")
    ds = read_adult(*_write(tmp_path, rows, TEST))
    loss = 62  # capital-loss column
    np.testing.assert_allclose(ds.X_train[:, loss] * np.sqrt(14.0), 7 / 99999, rtol=1e-12)


def test_crlf_and_spaces(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    train = TRAIN.replace("\n", "\r\n").replace(", ", " ,\t ")
    a = read_adult(*_write(tmp_path / "a", train, TEST))
    b = read_adult(*_write(tmp_path / "b", TRAIN, TEST))
    np.testing.assert_array_equal(a.X_train, b.X_train)


def _line(test_or_train: str, number: int, new: str) -> str:
    lines = test_or_train.split("\n")
    lines[number - 1] = new
    return "\n".join(lines)


GOOD = "20, Private, 100, HS-grad, 9, Married, Sales, Husband, White, Male, 0, 0, 40, US, "


@pytest.mark.parametrize(
    ("which", "line", "text", "match"),
    [
        ("train", 4, GOOD + "<=50K, extra", r"line 4: expected 15 comma-separated fields.*16"),
        ("train", 1, GOOD.rstrip(", "), r"line 1: expected 15 .*Found 14"),
        ("test", 4, GOOD.replace("100", "1O0") + "<=50K.", r"line 4: fnlwgt must be .*'1O0'"),
        ("train", 2, GOOD.replace("20", "?", 1) + ">50K", r"line 2: age .*categorical.*'\?'"),
        ("train", 1, GOOD.replace("40", "inf") + ">50K", r"line 1: hours-per-week .*'inf'"),
        ("test", 5, GOOD + ">50", r"line 5: the label must be '>50K' or '<=50K'.*'>50'"),
        ("train", 4, GOOD + "50K", r"line 4: the label .*'50K'"),
        ("train", 1, GOOD.replace("Sales", " "), r"line 1: field 7 \(occupation\) is empty"),
    ],
)
def test_format_errors_name_file_and_line(
    tmp_path: Path, which: str, line: int, text: str, match: str
) -> None:
    train = _line(TRAIN, line, text) if which == "train" else TRAIN
    test = _line(TEST, line, text) if which == "test" else TEST
    a, b = _write(tmp_path, train, test)
    with pytest.raises(DpfedInputError, match=match) as info:
        read_adult(a, b)
    assert repr(str(a if which == "train" else b)) in str(info.value)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    a, b = _write(tmp_path, TRAIN, "|1x3 Cross validator\n\n")
    with pytest.raises(DpfedInputError, match="holds no data rows"):
        read_adult(a, b)
    with pytest.raises(DpfedInputError, match=r"test_path .*nope.* not an existing file"):
        read_adult(a, tmp_path / "nope")
    with pytest.raises(DpfedInputError, match="train_path must be the path"):
        read_adult(3, b)  # type: ignore[arg-type]


def test_registry_entry(tmp_path: Path) -> None:
    assert "adult/adult.data" in KNOWN_DATASETS["adult"]
    folder = tmp_path / "adult"
    folder.mkdir()
    _write(folder)
    ds = load_dataset("adult", tmp_path)
    assert ds.name == "adult" and ds.X_train.shape == (3, 105)
    (folder / "adult.test").unlink()
    with pytest.raises(DpfedInputError, match=r"needs the file .*adult\.test.*adult/adult\.data"):
        load_dataset("adult", tmp_path)


# --- the real files ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def adult():
    value = os.environ.get("DPFED_DATA", "")
    needed = ["adult/adult.data", "adult/adult.test"]
    if not value or not all((Path(value) / rel).is_file() for rel in needed):
        pytest.skip(
            "adult not found under $DPFED_DATA (set DPFED_DATA to a folder holding "
            "adult/adult.data and adult/adult.test)"
        )
    return load_dataset("adult", value)


def test_real_shapes_and_labels(adult) -> None:
    assert adult.X_train.shape == (32_561, 105) and adult.X_test.shape == (16_281, 105)
    assert adult.n_features == 105
    assert isinstance(adult.X_train, np.ndarray) and adult.X_train.dtype == np.float64
    for y in (adult.y_train, adult.y_test):
        assert set(np.unique(y).tolist()) == {-1.0, 1.0}
    # The test file's comment line is skipped and its trailing periods are read.
    assert int((adult.y_train == 1).sum()) == 7_841 and int((adult.y_test == 1).sum()) == 3_846
    assert (adult.y_train == 1).mean() == pytest.approx(0.24, abs=0.01)
    assert (adult.y_test == 1).mean() == pytest.approx(0.24, abs=0.01)


def test_real_rows_in_unit_ball(adult) -> None:
    for X in (adult.X_train, adult.X_test):
        assert np.all(np.isfinite(X))
        assert X.min() >= 0.0
        assert np.all(row_norms(X) <= 1.0) and X.max() <= 1.0
    # rows divided by the public bound sqrt(14), not by their largest norm: none reaches 1
    assert 0.5 < row_norms(adult.X_train).max() < 1.0
    assert adult.preprocessing["scaling"] == "declared public bounds"


def test_real_first_rows(adult) -> None:
    # "39, State-gov, ..., <=50K": 6 continuous values plus 8 indicators (nothing missing).
    assert adult.y_train[0] == -1.0 and adult.y_test[0] == -1.0
    assert int(np.count_nonzero(adult.X_train[0])) == 14 - 1  # its capital-loss is 0
    # The one-hot blocks of train and test share their columns: per-column activity agrees.
    on_train = (adult.X_train > 0).mean(axis=0)
    on_test = (adult.X_test > 0).mean(axis=0)
    assert np.abs(on_train - on_test).max() < 0.02
