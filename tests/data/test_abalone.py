"""Abalone reader: one-hot sex, format errors, and the real file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.data import load_dataset, load_regression_dataset, read_abalone
from dpfed.data.abalone import ABALONE_FEATURES

ROWS = (
    "M,0.455,0.365,0.095,0.514,0.2245,0.101,0.15,15\n"
    "F,0.53,0.42,0.135,0.677,0.2565,0.1415,0.21,9\n"
    "\n"
    " I , 0.33, 0.255, 0.08, 0.205, 0.0895, 0.0395, 0.055, 7 \n"
)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "abalone.data"
    path.write_text(text)
    return path


def test_reads_rows_with_one_hot_sex(tmp_path):
    data = read_abalone(_write(tmp_path, ROWS))
    assert data.X.shape == (3, 10) and data.feature_names == ABALONE_FEATURES
    np.testing.assert_array_equal(data.X[:, :3], np.eye(3))  # M, F, I
    np.testing.assert_array_equal(data.X[2, 3:], [0.33, 0.255, 0.08, 0.205, 0.0895, 0.0395, 0.055])
    assert data.y.tolist() == [15.0, 9.0, 7.0] and data.target_name == "Rings"


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("m,0.4,0.3,0.1,0.5,0.2,0.1,0.1,9", r"line 2: sex must be one of M, F, I. Found 'm'"),
        ("X,0.4,0.3,0.1,0.5,0.2,0.1,0.1,9", r"line 2: sex must be one of M, F, I. Found 'X'"),
        ("M,0.4,0.3,0.1,0.5,0.2,0.1,9", r"line 2: expected 9 comma-separated fields.*Found 8"),
        ("M,0.4,0.3,0.1,0.5,0.2,0.1,0.1,9,1", r"line 2: expected 9 .* Found 10"),
        ("M,0.4,0.3,?,0.5,0.2,0.1,0.1,9", r"line 2: Height must be a finite number. Found '\?'"),
        ("M,0.4,0.3,0.1,0.5,0.2,0.1,0.1,9.5", r"line 2: Rings must be a non-negative integer"),
        ("M,0.4,0.3,0.1,0.5,0.2,0.1,0.1,-1", r"line 2: Rings must be a non-negative integer"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path, line, match):
    path = _write(tmp_path, ROWS.splitlines()[0] + "\n" + line + "\n")
    with pytest.raises(DpfedInputError, match=match) as info:
        read_abalone(path)
    assert str(path) in str(info.value)


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(DpfedInputError, match="no data lines"):
        read_abalone(_write(tmp_path, "\n \n"))
    with pytest.raises(DpfedInputError, match="not an existing file"):
        read_abalone(tmp_path / "nothing.data")


def test_registry_names_missing_file(tmp_path):
    (tmp_path / "abalone").mkdir()
    with pytest.raises(DpfedInputError, match=r"abalone[/\\]abalone\.data"):
        load_regression_dataset("abalone", tmp_path)
    with pytest.raises(DpfedInputError, match="unknown regression data set 'wine'"):
        load_regression_dataset("wine", tmp_path)


def test_real_file():
    base = Path(
        os.environ.get("DPFED_DATA") or Path(__file__).parents[2] / ".." / "shared" / "data"
    )
    if not (base / "abalone" / "abalone.data").is_file():
        pytest.skip("Abalone not found under $DPFED_DATA (abalone/abalone.data)")
    data = load_regression_dataset("abalone", base)
    assert data.X.shape == (4177, 10)
    np.testing.assert_array_equal(data.X[:, :3].sum(axis=1), 1.0)
    assert data.X[:, :3].sum(axis=0).tolist() == [1528.0, 1307.0, 1342.0]
    assert data.y.min() == 1.0 and data.y.max() == 29.0
    assert load_dataset("abalone", base).X_train.shape == (4177, 10)
