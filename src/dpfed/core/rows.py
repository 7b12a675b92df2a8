"""Row norms, row normalisation and exact row clipping (dense and sparse).

Pure math used by the privacy mechanisms (which enforce row bounds on a party's own block)
and re-exported by :mod:`dpfed.data.preprocessing`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_finite_matrix, check_positive

Matrix = np.ndarray | sp.spmatrix | sp.sparray

# Rounding in the scaled-row norm can exceed the bound by an ulp; this many corrections suffice.
_CLIP_ROUNDS = 8


def as_float_2d(name: str, X: Matrix) -> Matrix:
    """``X`` as a float64 2-D matrix (copy of a sparse one in its own format); checks finiteness."""
    if sp.issparse(X):
        out = X.astype(np.float64, copy=True)
    else:
        out = np.array(X, dtype=np.float64, copy=True)
    if out.ndim != 2:
        raise DpfedInputError(
            f"{name} must be a 2-D matrix (n_samples, n_features). Found shape {out.shape}."
        )
    check_finite_matrix(name, out)
    return out


def _row_norms(X: Matrix) -> np.ndarray:
    with np.errstate(over="ignore"):  # an overflow is reported below
        if sp.issparse(X):
            squares = np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).reshape(-1)
            norms = np.sqrt(squares)
        else:
            norms = np.linalg.norm(X, axis=1)
    if not np.all(np.isfinite(norms)):
        row = int(np.flatnonzero(~np.isfinite(norms))[0])
        raise DpfedInputError(
            f"every row norm of X must fit in float64. Found an overflowing norm on row {row}; "
            "rescale the data first."
        )
    return norms


def _scale_rows(X: Matrix, scale: np.ndarray) -> Matrix:
    """``diag(scale) @ X`` in the format of ``X`` (new object, float64)."""
    if sp.issparse(X):
        csr = X.tocsr(copy=True)
        csr.data *= np.repeat(scale, np.diff(csr.indptr))
        return csr.asformat(X.format)
    return X * scale[:, None]


def row_norms(X: Matrix) -> np.ndarray:
    """Euclidean norm of every row.

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (n_samples, n_features)
        Finite values.

    Returns
    -------
    numpy.ndarray, shape (n_samples,)
        ``||X[i]||_2`` for every row ``i``, float64.
    """
    return _row_norms(as_float_2d("X", X))


def normalize_rows(X: Matrix) -> Matrix:
    """Scale every row to unit Euclidean norm; all-zero rows stay zero.

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (n_samples, n_features)
        Finite values.

    Returns
    -------
    numpy.ndarray or scipy sparse matrix, shape (n_samples, n_features)
        A new float64 matrix of the same kind (dense, or sparse in the same format).
    """
    X = as_float_2d("X", X)
    norms = _row_norms(X)
    scale = np.zeros_like(norms)
    np.divide(1.0, norms, out=scale, where=norms > 0)
    return _scale_rows(X, scale)


def clip_rows(X: Matrix, bound: float) -> Matrix:
    """Scale down the rows whose Euclidean norm exceeds ``bound`` to norm ``bound``.

    Rows with norm ``<= bound`` are returned unchanged; clipped rows keep their direction.
    The result satisfies ``row_norms(result) <= bound`` exactly in floating point, which a
    sensitivity bound relies on.

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (n_samples, n_features)
        Finite values.
    bound : float
        Largest allowed row norm, > 0.

    Returns
    -------
    numpy.ndarray or scipy sparse matrix, shape (n_samples, n_features)
        A new float64 matrix of the same kind (dense, or sparse in the same format).
    """
    bound = check_positive("bound", bound)
    X = as_float_2d("X", X)
    norms = _row_norms(X)
    scale = np.ones_like(norms)
    over = norms > bound
    scale[over] = bound / norms[over]
    out = _scale_rows(X, scale)
    for _ in range(_CLIP_ROUNDS):
        new = _row_norms(out)
        still = new > bound
        if not still.any():
            return out
        # Step the scale one ulp down towards zero until rounding no longer overshoots.
        scale[still] = np.nextafter(scale[still] * (bound / new[still]), 0.0)
        out = _scale_rows(X, scale)
    raise RuntimeError("clip_rows could not bring every row norm within the bound")
