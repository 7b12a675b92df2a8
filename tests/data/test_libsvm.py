"""LIBSVM reader: format, n_features padding, errors, and the real a9a files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed import DpfedInputError
from dpfed.data import read_libsvm


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _a9a_dir() -> Path:
    value = os.environ.get("DPFED_DATA", "")
    base = Path(value) / "a9a" if value else None
    if base is None or not (base / "a9a").is_file() or not (base / "a9a.t").is_file():
        pytest.skip(
            "a9a not found under $DPFED_DATA (set DPFED_DATA to a folder holding "
            "a9a/a9a and a9a/a9a.t)"
        )
    return base


def test_reads_csr_float64_with_labels_as_written(tmp_path: Path) -> None:
    f = _write(tmp_path / "small", "1 1:0.5 3:2 \n-1 2:1\n+1 3:-4.25\n")
    X, y = read_libsvm(f)
    assert sp.issparse(X) and X.format == "csr"
    assert X.dtype == np.float64 and y.dtype == np.float64
    np.testing.assert_array_equal(
        X.toarray(), [[0.5, 0.0, 2.0], [0.0, 1.0, 0.0], [0.0, 0.0, -4.25]]
    )
    np.testing.assert_array_equal(y, [1.0, -1.0, 1.0])


def test_labels_are_not_remapped(tmp_path: Path) -> None:
    X, y = read_libsvm(_write(tmp_path / "f", "0 1:1\n2 1:1\n7 2:1\n"))
    np.testing.assert_array_equal(y, [0.0, 2.0, 7.0])
    assert X.shape == (3, 2)


def test_n_features_pads_unused_columns(tmp_path: Path) -> None:
    X, _ = read_libsvm(_write(tmp_path / "f", "1 1:1 2:1\n-1 2:3\n"), n_features=5)
    assert X.shape == (2, 5)
    assert X[:, 2:].nnz == 0
    assert X.format == "csr"


def test_index_beyond_n_features_is_an_error(tmp_path: Path) -> None:
    f = _write(tmp_path / "wide", "1 1:1 4:1\n")
    with pytest.raises(DpfedInputError, match=r"feature index 4.*n_features is 3") as info:
        read_libsvm(f, n_features=3)
    assert str(f) in str(info.value)


@pytest.mark.parametrize("bad", [0, -2, 1.5, "x"])
def test_bad_n_features(tmp_path: Path, bad: object) -> None:
    with pytest.raises(DpfedInputError, match="n_features"):
        read_libsvm(_write(tmp_path / "f", "1 1:1\n"), n_features=bad)  # type: ignore[arg-type]


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.libsvm"
    with pytest.raises(DpfedInputError, match="does not exist") as info:
        read_libsvm(missing)
    assert str(missing) in str(info.value)


def test_folder_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(DpfedInputError, match="folder"):
        read_libsvm(tmp_path)


def test_index_zero_needs_zero_based(tmp_path: Path) -> None:
    f = _write(tmp_path / "zero", "1 0:1 2:1\n")
    with pytest.raises(DpfedInputError, match="zero_based=True"):
        read_libsvm(f)
    X, _ = read_libsvm(f, zero_based=True)
    np.testing.assert_array_equal(X.toarray(), [[1.0, 0.0, 1.0]])


def test_malformed_line(tmp_path: Path) -> None:
    f = _write(tmp_path / "bad", "1 1:1\nhello world\n")
    with pytest.raises(DpfedInputError, match="could not read") as info:
        read_libsvm(f)
    assert str(f) in str(info.value)


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(DpfedInputError, match="no rows"):
        read_libsvm(_write(tmp_path / "empty", ""))


def test_non_finite_value(tmp_path: Path) -> None:
    with pytest.raises(DpfedInputError, match="finite"):
        read_libsvm(_write(tmp_path / "nan", "1 1:1\n-1 2:nan\n"))


def test_real_a9a_shapes_and_labels() -> None:
    base = _a9a_dir()
    X, y = read_libsvm(base / "a9a", n_features=123)
    Xt, yt = read_libsvm(base / "a9a.t", n_features=123)
    assert X.shape == (32561, 123) and Xt.shape == (16281, 123)
    assert X.nnz == 451592 and Xt.nnz == 225731
    assert int((y == 1).sum()) == 7841 and int((y == -1).sum()) == 24720
    assert int((yt == 1).sum()) == 3846 and int((yt == -1).sum()) == 12435
    assert np.all(X.data == 1.0)
    # Feature 123 occurs once in a9a and never in a9a.t.
    assert X[:, 122].nnz == 1 and Xt[:, 122].nnz == 0
    # Without n_features the test file is one column short.
    assert read_libsvm(base / "a9a.t")[0].shape == (16281, 122)
