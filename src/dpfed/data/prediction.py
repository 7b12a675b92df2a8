"""New rows to score with a trained model, named the way a job file names its data.

A prediction names its rows with one string that every party resolves at its own site, as
each party resolves the ``data`` of a job file: ``NAME:test`` or ``NAME:train`` for a part of
a named data set (read from the party's ``data_dir``, preprocessed as for training; a party
refuses to score its training rows unless the job opts in, see
:mod:`dpfed.runtime.prediction`), or the path of a file: ``.npy`` (a numeric matrix),
``.csv`` (comma-separated numbers, no header) or anything else as a LIBSVM file (its labels
are ignored). A relative path is taken relative to ``base`` (the job file's folder) when the
file is there, else to the working directory.

Rows have no identifiers yet, so a party recognises its training rows by what the request
names: its training part or file, or a file holding exactly its training rows in their order,
which :func:`row_digests` (a digest per row of its nonzero columns and values, the same for a
dense and a sparse copy) tells apart from other rows.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.data.libsvm import read_libsvm
from dpfed.data.registry import KNOWN_DATASETS, load_dataset

#: The parts of a named data set a prediction may score.
PARTS = ("test", "train")


def prediction_rows(
    data: str,
    *,
    n_features: int,
    data_dir: str | os.PathLike[str] | None = None,
    base: str | os.PathLike[str] | None = None,
) -> np.ndarray | sp.csr_matrix:
    """The rows named by ``data``, with the training data's ``n_features`` columns.

    Parameters
    ----------
    data : str
        ``NAME:test``, ``NAME:train`` or a file path (see the module docstring).
    n_features : int
        Columns of the training data; a LIBSVM file is padded to it (its last columns may be
        unused), any other source must have exactly this many.
    data_dir : path or None
        Folder of the named data sets (None: the ``DPFED_DATA`` environment variable).
    base : path or None
        Folder that relative file paths are tried against first.

    Returns
    -------
    numpy.ndarray or scipy.sparse.csr_matrix, shape (n_rows, n_features)
        Float64 rows, all finite.

    Raises
    ------
    DpfedInputError
        An unknown name or part, a missing or unreadable file, a column count other than
        ``n_features``, or values that are not finite.
    """
    name, _, part = data.rpartition(":")
    if name in KNOWN_DATASETS:
        if part not in PARTS:
            raise DpfedInputError(
                f"a named data set's rows are {name}:test or {name}:train. Found {data!r}."
            )
        dataset = load_dataset(name, data_dir)
        rows = dataset.X_test if part == "test" else dataset.X_train
        if rows is None:
            raise DpfedInputError(f"data set {name!r} has no test part. Use {name}:train.")
        return _checked(rows, n_features, data)
    path = Path(data).expanduser()
    if not path.is_absolute() and base is not None and (Path(base) / path).is_file():
        path = Path(base) / path
    if not path.is_file():
        raise DpfedInputError(
            f"the rows to score must be NAME:test or NAME:train of a named data set "
            f"({', '.join(sorted(KNOWN_DATASETS))}) or an existing file. Found {data!r}."
        )
    try:
        if path.suffix == ".npy":
            rows = np.load(path, allow_pickle=False)
        elif path.suffix == ".csv":
            rows = np.loadtxt(path, delimiter=",", ndmin=2)
        else:
            X, _ = read_libsvm(path)
            if X.shape[1] > n_features:
                raise DpfedInputError(
                    f"{str(path)!r} uses column {X.shape[1]}; the model has {n_features} columns."
                )
            rows = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    except (OSError, ValueError) as exc:
        raise DpfedInputError(f"cannot read {str(path)!r}: {exc}") from None
    return _checked(rows, n_features, data)


def _checked(rows, n_features: int, data: str) -> np.ndarray | sp.csr_matrix:
    if sp.issparse(rows):
        rows = sp.csr_matrix(rows, dtype=np.float64)
        values = rows.data
    else:
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2:
            raise DpfedInputError(f"{data!r} must hold a matrix. Found shape {rows.shape}.")
        values = rows
    if rows.shape[1] != n_features:
        raise DpfedInputError(
            f"{data!r} has {rows.shape[1]} columns; the model was trained on {n_features}."
        )
    if not np.all(np.isfinite(values)):
        raise DpfedInputError(f"{data!r} holds values that are not finite.")
    return rows


def row_digests(rows: np.ndarray | sp.spmatrix) -> list[bytes]:
    """One 16-byte BLAKE2b digest per row, of its nonzero columns and their values.

    Two rows of the same width get the same digest exactly when they hold the same values
    (``-0.0`` equals ``0.0``), whether they come as dense or sparse matrices.

    Parameters
    ----------
    rows : numpy.ndarray or scipy.sparse matrix, shape (n_rows, n_columns)

    Returns
    -------
    list of bytes
        ``n_rows`` digests, in row order.
    """
    canonical = sp.csr_matrix(rows, dtype=np.float64, copy=True)
    canonical.sum_duplicates()  # sorted column indices, one entry per column
    canonical.eliminate_zeros()
    indices = canonical.indices.astype(np.int64)
    values = canonical.data + 0.0  # -0.0 is gone with the zeros; + 0.0 for good measure
    bounds = canonical.indptr
    width = np.int64(canonical.shape[1]).tobytes()
    return [
        hashlib.blake2b(
            width + indices[a:b].tobytes() + values[a:b].tobytes(), digest_size=16
        ).digest()
        for a, b in itertools.pairwise(bounds)
    ]


__all__ = ["PARTS", "prediction_rows", "row_digests"]
