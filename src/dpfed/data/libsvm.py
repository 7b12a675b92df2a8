"""Reader for LIBSVM / SVMlight sparse text files (``label idx:val idx:val ...``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_finite_matrix, check_int


def read_libsvm(
    path: str | os.PathLike[str],
    n_features: int | None = None,
    *,
    zero_based: bool = False,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Read a LIBSVM file into a CSR matrix and a label vector.

    Parameters
    ----------
    path : str or os.PathLike
        The LIBSVM text file (``label idx:val ...``, one row per line).
    n_features : int or None, default None
        Number of columns of the result. ``None`` uses the largest index found in the file.
        Give it explicitly when a file does not use the last feature (the official ``a9a.t``
        never uses feature 123, so read it with ``n_features=123``). Columns beyond the last
        index used are all zero.
    zero_based : bool, default False
        Whether indices start at 0. LIBSVM files are 1-based; set ``True`` only for files
        written with 0-based indices (e.g. by ``sklearn.datasets.dump_svmlight_file``).

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape (n_samples, n_features)
        Features, float64.
    y : numpy.ndarray, shape (n_samples,)
        Labels as written in the file, float64 (no remapping).

    Raises
    ------
    DpfedInputError
        If the file is missing, cannot be parsed, holds no rows, holds NaN or infinite
        values, or uses a feature index beyond ``n_features``.
    """
    file = Path(path)
    if not file.is_file():
        what = "is a folder, not a file" if file.is_dir() else "does not exist"
        raise DpfedInputError(f"LIBSVM file {str(file)!r} {what}. Expected an existing file.")
    if n_features is not None:
        n_features = check_int("n_features", n_features, minimum=1)
    try:
        from sklearn.datasets import load_svmlight_file  # slow to import: on first use

        X, y = load_svmlight_file(str(file), dtype=np.float64, zero_based=zero_based)
    except ValueError as err:
        hint = ""
        if "index 0" in str(err).lower() and not zero_based:
            hint = " LIBSVM indices start at 1; pass zero_based=True for a 0-based file."
        raise DpfedInputError(
            f"could not read {str(file)!r} as a LIBSVM file "
            f"(expected lines 'label idx:val idx:val ...'): {err}.{hint}"
        ) from None
    if X.shape[0] == 0:
        raise DpfedInputError(
            f"LIBSVM file {str(file)!r} holds no rows. Expected at least one line "
            "'label idx:val ...'."
        )
    used = int(X.shape[1])
    if n_features is not None:
        if used > n_features:
            largest = used - 1 if zero_based else used
            raise DpfedInputError(
                f"LIBSVM file {str(file)!r} uses feature index {largest}, which needs "
                f"{used} columns, but n_features is {n_features}. Expected every index to "
                f"fit in n_features columns; pass n_features >= {used} or None."
            )
        if used < n_features:
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    X = sp.csr_matrix(X, dtype=np.float64)
    check_finite_matrix(f"the features in {str(file)!r}", X)
    y = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(y)):
        row = int(np.flatnonzero(~np.isfinite(y))[0])
        raise DpfedInputError(
            f"the labels in {str(file)!r} must be finite. Found {y[row]} on row {row + 1}."
        )
    return X, y
