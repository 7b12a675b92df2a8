"""NIPS 2003 reader: dense, sparse and sparse-binary formats, errors, and the real files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed import DpfedInputError
from dpfed.data import read_nips2003


def _write_split(folder: Path, name: str, split: str, data: str, labels: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}_{split}.data").write_text(data)
    (folder / f"{name}_{split}.labels").write_text(labels)
    return folder


def _real_dir(name: str, splits: tuple[str, ...]) -> Path:
    value = os.environ.get("DPFED_DATA", "")
    folder = Path(value) / name
    needed = [f"{name}/{name}_{s}.{ext}" for s in splits for ext in ("data", "labels")]
    if not value or not all((Path(value) / rel).is_file() for rel in needed):
        pytest.skip(
            f"{name} not found under $DPFED_DATA (set DPFED_DATA to a folder holding "
            f"{', '.join(needed)})"
        )
    return folder


def test_dense_with_trailing_spaces(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "toy", "train", "1 2 3 \n4 5 6 \n", "1\n-1\n")
    X, y = read_nips2003(folder, "toy", "train")
    assert isinstance(X, np.ndarray) and X.dtype == np.float64
    np.testing.assert_array_equal(X, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(y, [1.0, -1.0])


def test_dense_tolerates_trailing_blank_lines(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "toy", "valid", "1 2 \n3 4 \n\n", "1\n-1\n\n")
    X, y = read_nips2003(folder, "toy", "valid")
    assert X.shape == (2, 2) and y.shape == (2,)


def test_sparse_uses_known_width_and_one_based_indices(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "dexter", "train", "1:5 20000:2 \n3:1 \n", "1\n-1\n")
    X, y = read_nips2003(folder, "dexter", "train")
    assert sp.issparse(X) and X.format == "csr" and X.shape == (2, 20000)
    assert X[0, 0] == 5.0 and X[0, 19999] == 2.0 and X[1, 2] == 1.0 and X.nnz == 3
    np.testing.assert_array_equal(y, [1.0, -1.0])


def test_sparse_unknown_name_uses_max_index_and_keeps_empty_rows(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "other", "train", "2:1 \n\n7:3 \n", "1\n-1\n1\n")
    X, _ = read_nips2003(folder, "other", "train")
    assert X.shape == (3, 7)
    np.testing.assert_array_equal(X.toarray()[:, [1, 6]], [[1, 0], [0, 0], [0, 3]])


def test_sparse_binary_dorothea(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "dorothea", "train", " 1 5 100000 \n 2 \n", "1\n-1\n")
    X, _ = read_nips2003(folder, "dorothea", "train")
    assert X.shape == (2, 100000) and X.nnz == 4
    assert X[0, 99999] == 1.0 and X[1, 1] == 1.0


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("0:1 \n", "1-based"),
        ("20001:1 \n", "<= 20000"),
        ("1:x \n", "index:value"),
        ("a:1 \n", "index:value"),
    ],
)
def test_sparse_bad_entries(tmp_path: Path, data: str, match: str) -> None:
    folder = _write_split(tmp_path, "dexter", "train", data, "1\n")
    with pytest.raises(DpfedInputError, match=match):
        read_nips2003(folder, "dexter", "train")


def test_dense_ragged_rows_name_the_line(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "toy", "train", "1 2 3 \n4 5 \n", "1\n-1\n")
    with pytest.raises(DpfedInputError, match=r"line 1 \(3\)\. Found 2 on line 2"):
        read_nips2003(folder, "toy", "train")


def test_dense_blank_line_inside_is_an_error(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "toy", "train", "\n1 2 \n", "1\n")
    with pytest.raises(DpfedInputError, match="same number of values"):
        read_nips2003(folder, "toy", "train")


def test_dense_non_number(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "toy", "train", "1 2 \n3 x \n", "1\n-1\n")
    with pytest.raises(DpfedInputError, match="'x' on line 2"):
        read_nips2003(folder, "toy", "train")


def test_row_count_mismatch_names_both_counts(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "toy", "train", "1 2 \n3 4 \n5 6 \n", "1\n-1\n")
    with pytest.raises(DpfedInputError, match=r"Found 3 rows .* and 2 labels"):
        read_nips2003(folder, "toy", "train")


def test_bad_label_line(tmp_path: Path) -> None:
    folder = _write_split(tmp_path, "toy", "train", "1 \n2 \n", "1\none\n")
    with pytest.raises(DpfedInputError, match="'one' on line 2"):
        read_nips2003(folder, "toy", "train")


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(DpfedInputError, match=r"toy_train\.data") as info:
        read_nips2003(tmp_path, "toy", "train")
    assert str(tmp_path) in str(info.value)
    (tmp_path / "toy_train.data").write_text("1 \n")
    with pytest.raises(DpfedInputError, match=r"toy_train\.labels"):
        read_nips2003(tmp_path, "toy", "train")


@pytest.mark.parametrize("split", ["test", "Train", ""])
def test_bad_split(tmp_path: Path, split: str) -> None:
    with pytest.raises(DpfedInputError, match="split must be one of train, valid"):
        read_nips2003(tmp_path, "toy", split)


def test_real_madelon() -> None:
    folder = _real_dir("madelon", ("train", "valid"))
    X, y = read_nips2003(folder, "madelon", "train")
    Xv, yv = read_nips2003(folder, "madelon", "valid")
    assert X.shape == (2000, 500) and Xv.shape == (600, 500)
    assert X.sum() == 488083511 and Xv.sum() == 146395833  # official Check_sum values
    assert int((y == 1).sum()) == 1000 and int((yv == 1).sum()) == 300


def test_real_arcene() -> None:
    folder = _real_dir("arcene", ("train", "valid"))
    X, y = read_nips2003(folder, "arcene", "train")
    assert X.shape == (100, 10000) and y.shape == (100,)
    assert X.sum() == 70726744
    assert int((y == 1).sum()) == 44


def test_real_dexter() -> None:
    folder = _real_dir("dexter", ("train",))
    X, y = read_nips2003(folder, "dexter", "train")
    assert sp.issparse(X) and X.shape == (300, 20000)
    assert X.nnz == 28218 and X.sum() == 2816528
    assert int((y == 1).sum()) == 150 and int((y == -1).sum()) == 150
