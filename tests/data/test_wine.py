"""Wine Quality reader: exact values on tiny files, format errors, and the real files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.data import load_dataset, load_regression_dataset, read_wine
from dpfed.data.wine import WINE_FEATURES

HEADER = ";".join(f'"{c}"' for c in (*WINE_FEATURES, "quality"))
ROW1 = "7.4;0.7;0;1.9;0.076;11;34;0.9978;3.51;0.56;9.4;5"
ROW2 = "7.8;0.88;0;2.6;0.098;25;67;0.9968;3.2;0.68;9.8;6"


def _data_dir() -> Path:
    value = os.environ.get("DPFED_DATA") or str(
        Path(__file__).parents[2] / ".." / "shared" / "data"
    )
    return Path(value)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "winequality-test.csv"
    path.write_text(text)
    return path


def test_reads_header_and_rows(tmp_path):
    data = read_wine(_write(tmp_path, f"{HEADER}\n{ROW1}\n\n{ROW2}\n"), name="tiny")
    assert data.name == "tiny" and data.X.shape == (2, 11) and data.y.tolist() == [5.0, 6.0]
    np.testing.assert_array_equal(
        data.X[1], [7.8, 0.88, 0, 2.6, 0.098, 25, 67, 0.9968, 3.2, 0.68, 9.8]
    )
    assert data.feature_names == WINE_FEATURES and data.target_name == "quality"
    assert data.X.dtype == np.float64 and data.X.flags.c_contiguous


def test_unquoted_header_and_crlf_are_accepted(tmp_path):
    header = ";".join((*WINE_FEATURES, "quality"))
    data = read_wine(_write(tmp_path, f"{header}\r\n{ROW1}\r\n"))
    assert data.X.shape == (1, 11) and data.name == "winequality-test"


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (
            HEADER.replace('"alcohol"', '"alcool"'),
            r"line 1.*column 11 named 'alcool' where 'alcohol' was expected",
        ),
        (HEADER.rsplit(";", 1)[0], r"line 1.*Found 11 fields"),
        (ROW1, r"line 1: the header must name"),
    ],
)
def test_bad_header_names_file_and_line(tmp_path, header, match):
    path = _write(tmp_path, f"{header}\n{ROW1}\n")
    with pytest.raises(DpfedInputError, match=match) as info:
        read_wine(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (ROW1 + ";1", r"line 3: expected 12 semicolon-separated fields .* Found 13"),
        (ROW1.replace(";34;", ";"), r"line 3: expected 12 .* Found 11"),
        (ROW1.replace("0.9978", "heavy"), r"line 3: density must be a finite number.*'heavy'"),
        (ROW1.replace("9.4", "nan"), r"line 3: alcohol must be a finite number"),
        (ROW1[:-1] + "5.5", r"line 3: quality must be an integer score. Found '5.5'"),
    ],
)
def test_bad_data_line_names_the_line(tmp_path, row, match):
    with pytest.raises(DpfedInputError, match=match):
        read_wine(_write(tmp_path, f"{HEADER}\n{ROW2}\n{row}\n"))


def test_empty_and_header_only_files(tmp_path):
    with pytest.raises(DpfedInputError, match="is empty"):
        read_wine(_write(tmp_path, "\n\n"))
    with pytest.raises(DpfedInputError, match="no data lines"):
        read_wine(_write(tmp_path, HEADER + "\n"))
    with pytest.raises(DpfedInputError, match="not an existing file"):
        read_wine(tmp_path / "missing.csv")


def test_real_files():
    base = _data_dir()
    if not all(
        (base / "wine_quality" / f).is_file()
        for f in ("winequality-red.csv", "winequality-white.csv")
    ):
        pytest.skip("Wine Quality not found under $DPFED_DATA (wine_quality/winequality-*.csv)")
    red = load_regression_dataset("wine-red", base)
    white = load_regression_dataset("wine-white", base)
    assert red.X.shape == (1599, 11) and white.X.shape == (4898, 11)
    assert set(np.unique(red.y)) == {3.0, 4.0, 5.0, 6.0, 7.0, 8.0}
    assert white.y.min() == 3.0 and white.y.max() == 9.0
    ds = load_dataset("wine-red", base)
    assert ds.X_test is None and ds.X_train.shape == (1599, 11)
    np.testing.assert_array_equal(ds.y_train, red.y)
