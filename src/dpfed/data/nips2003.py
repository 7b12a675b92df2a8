"""Reader for the NIPS 2003 feature-selection challenge files (arcene, dexter, madelon, ...).

Each split is two text files in one folder: ``{name}_{split}.data`` (one row per line) and
``{name}_{split}.labels`` (one label per line, ``1`` or ``-1``). The data files come in
three formats:

* dense (arcene, gisette, madelon): space-separated numbers, the same count on every line;
* sparse (dexter): ``index:value`` pairs with 1-based indices;
* sparse binary (dorothea): the 1-based indices of the non-zero (= 1) features only.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_finite_matrix

#: Column counts of the sparse NIPS 2003 sets (a file need not use its last column).
SPARSE_N_FEATURES: dict[str, int] = {"dexter": 20000, "dorothea": 100000}

#: Sets whose data files list only the indices of the non-zero features (all values 1).
SPARSE_BINARY: frozenset[str] = frozenset({"dorothea"})

SPLITS: tuple[str, ...] = ("train", "valid")


def read_nips2003(
    folder: str | os.PathLike[str], name: str, split: str
) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
    """Read one split of a NIPS 2003 challenge data set.

    Parameters
    ----------
    folder : str or os.PathLike
        Folder holding ``{name}_{split}.data`` and ``{name}_{split}.labels``.
    name : str
        Data set name as used in the file names, e.g. ``"madelon"``.
    split : {"train", "valid"}
        Which split to read (the challenge's test labels were never released).

    Returns
    -------
    X : numpy.ndarray or scipy.sparse.csr_matrix, shape (n_samples, n_features)
        Features, float64: a dense array for dense files, CSR for sparse ones. Sparse files
        get ``n_features`` from :data:`SPARSE_N_FEATURES` (dexter 20,000, dorothea 100,000),
        or the largest index found for other names.
    y : numpy.ndarray, shape (n_samples,)
        Labels as written in the labels file, float64.

    Raises
    ------
    DpfedInputError
        If a file is missing or malformed, or the data and labels files disagree on the
        number of rows.
    """
    if not isinstance(name, str) or not name.strip():
        raise DpfedInputError(f"name must be a non-empty data set name. Found {name!r}.")
    if split not in SPLITS:
        raise DpfedInputError(f"split must be one of {', '.join(SPLITS)}. Found {split!r}.")
    base = Path(folder)
    data_path = base / f"{name}_{split}.data"
    labels_path = base / f"{name}_{split}.labels"
    for file in (data_path, labels_path):
        if not file.is_file():
            raise DpfedInputError(
                f"NIPS 2003 file {str(file)!r} does not exist. Expected {name}_{split}.data "
                f"and {name}_{split}.labels in the folder {str(base)!r}."
            )

    lines = _read_lines(data_path)
    if not lines:
        raise DpfedInputError(f"data file {str(data_path)!r} holds no rows. Expected one per line.")
    if any(":" in line for line in lines):
        X: np.ndarray | sp.csr_matrix = _parse_sparse(
            lines, data_path, SPARSE_N_FEATURES.get(name), binary=False
        )
    elif name in SPARSE_BINARY:
        X = _parse_sparse(lines, data_path, SPARSE_N_FEATURES.get(name), binary=True)
    else:
        X = _parse_dense(lines, data_path)
    check_finite_matrix(f"the features in {str(data_path)!r}", X)

    y = _parse_labels(labels_path)
    if y.shape[0] != X.shape[0]:
        raise DpfedInputError(
            f"data and labels must have the same number of rows. Found {X.shape[0]} rows in "
            f"{str(data_path)!r} and {y.shape[0]} labels in {str(labels_path)!r}."
        )
    return X, y


def _read_lines(path: Path) -> list[str]:
    """Lines of a text file without trailing blank lines."""
    try:
        text = path.read_text(encoding="ascii")
    except UnicodeDecodeError as err:
        raise DpfedInputError(
            f"file {str(path)!r} is not plain ASCII text (byte {err.start}). Expected a NIPS "
            "2003 challenge text file."
        ) from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _parse_dense(lines: list[str], path: Path) -> np.ndarray:
    """Dense rows of space-separated numbers, shape ``(len(lines), n_columns)``."""
    rows = [line.split() for line in lines]
    width = len(rows[0])
    for number, row in enumerate(rows, start=1):
        if len(row) != width or not row:
            raise DpfedInputError(
                f"every line of {str(path)!r} must hold the same number of values as line 1 "
                f"({width}). Found {len(row)} on line {number}."
            )
    try:
        return np.array(rows, dtype=np.float64)
    except ValueError:
        for number, row in enumerate(rows, start=1):
            for token in row:
                try:
                    float(token)
                except ValueError:
                    raise DpfedInputError(
                        f"every value in {str(path)!r} must be a number. Found {token!r} "
                        f"on line {number}."
                    ) from None
        raise


def _parse_sparse(
    lines: list[str], path: Path, n_features: int | None, *, binary: bool
) -> sp.csr_matrix:
    """Sparse rows (``idx:val`` pairs, or bare indices if ``binary``), 1-based indices."""
    indptr = np.zeros(len(lines) + 1, dtype=np.int64)
    cols: list[int] = []
    vals: list[float] = []
    expected = "'index'" if binary else "'index:value'"
    for number, line in enumerate(lines, start=1):
        tokens = line.split()
        for token in tokens:
            index, sep, value = token.partition(":")
            try:
                col = int(index)
                val = 1.0 if binary and not sep else float(value)
            except ValueError:
                raise DpfedInputError(
                    f"every entry of {str(path)!r} must be {expected} with an integer index. "
                    f"Found {token!r} on line {number}."
                ) from None
            if col < 1:
                raise DpfedInputError(
                    f"indices in {str(path)!r} must be 1-based (>= 1). Found {col} on line "
                    f"{number}."
                )
            if n_features is not None and col > n_features:
                raise DpfedInputError(
                    f"indices in {str(path)!r} must be <= {n_features}, the feature count of "
                    f"this data set. Found {col} on line {number}."
                )
            cols.append(col - 1)
            vals.append(val)
        indptr[number] = indptr[number - 1] + len(tokens)
    indices = np.asarray(cols, dtype=np.int64)
    width = n_features if n_features is not None else int(indices.max(initial=-1)) + 1
    X = sp.csr_matrix(
        (np.asarray(vals, dtype=np.float64), indices, indptr),
        shape=(len(lines), max(width, 1)),
    )
    X.sum_duplicates()  # also sorts indices within rows
    return X


def _parse_labels(path: Path) -> np.ndarray:
    """One number per line, shape ``(n_rows,)``."""
    labels = []
    for number, line in enumerate(_read_lines(path), start=1):
        tokens = line.split()
        try:
            if len(tokens) != 1:
                raise ValueError
            label = float(tokens[0])
            if not np.isfinite(label):
                raise ValueError
            labels.append(label)
        except ValueError:
            raise DpfedInputError(
                f"every line of {str(path)!r} must hold exactly one finite numeric label. Found "
                f"{line!r} on line {number}."
            ) from None
    return np.asarray(labels, dtype=np.float64)
