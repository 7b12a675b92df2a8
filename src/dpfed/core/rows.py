"""Row norms, row normalisation and exact row clipping (dense and sparse).

Pure math used by the privacy mechanisms (which enforce row bounds on a party's own block)
and re-exported by :mod:`dpfed.data.preprocessing`.
"""

from __future__ import annotations

from typing import TypeAlias, cast

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_finite_matrix, check_positive

Matrix: TypeAlias = np.ndarray | sp.spmatrix | sp.sparray
# The sparse kinds of ``Matrix``, to cast to in the ``sp.issparse`` branches (scipy has no stubs).
_Sparse: TypeAlias = sp.spmatrix | sp.sparray

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
            sparse = cast(_Sparse, X)
            squares = np.asarray(sparse.multiply(sparse).sum(axis=1), dtype=np.float64).reshape(-1)
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
        sparse = cast(_Sparse, X)
        csr = sparse.tocsr(copy=True)
        csr.data *= np.repeat(scale, np.diff(csr.indptr))
        return csr.asformat(sparse.format)
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


#: :math:`c`, the constant of the intercept column of the horizontal protocols' rows.
DEFAULT_INTERCEPT_SCALE = 0.25


def with_intercept(X: Matrix, scale: float = DEFAULT_INTERCEPT_SCALE) -> Matrix:
    r"""Rows :math:`[\sqrt{1 - c^2}\,x, c]`: the features scaled and a constant column ``c``
    appended, so that a row of norm at most 1 keeps norm at most 1 and a linear model on them
    has an intercept, :math:`b = c\,w_{d}` (the weight of the last column).

    The scaling is a fixed row-wise map, so one record still changes one row and every
    sensitivity derived for rows of norm at most 1 holds unchanged. The intercept is
    regularised with the other weights (as liblinear's ``intercept_scaling``), which keeps
    the local problems strongly convex; a smaller ``c`` regularises it more.

    Parameters
    ----------
    X : matrix, shape (n, d)
    scale : float
        :math:`c \in (0, 1)`.

    Returns
    -------
    matrix, shape (n, d + 1)
        In the format of ``X`` (CSR for a sparse one).
    """
    c = check_positive("intercept_scale", scale)
    if not c < 1.0:
        raise DpfedInputError(f"intercept_scale must be in (0, 1). Found {scale}.")
    factor = float(np.sqrt(1.0 - c * c))
    scaled = (
        sp.csr_matrix(X, dtype=np.float64) * factor
        if sp.issparse(X)
        else np.asarray(X, dtype=np.float64) * factor
    )
    return with_constant_column(scaled, c)


def with_constant_column(X: Matrix, value: float) -> Matrix:
    """``[X, value]``: the rows with a constant column appended, in the format of ``X`` (CSR
    for a sparse one), shape ``(n, d + 1)``."""
    column = np.full((X.shape[0], 1), float(value))
    if sp.issparse(X):
        return sp.hstack([sp.csr_matrix(X, dtype=np.float64), sp.csr_matrix(column)], format="csr")
    return np.hstack([np.asarray(X, dtype=np.float64), column])


def model_rows(
    X: Matrix, *, bounded: bool, fit_intercept: bool, scale: float = DEFAULT_INTERCEPT_SCALE
) -> Matrix:
    """Rows as a horizontal protocol's parties train on them: clipped to norm 1 when
    ``bounded`` (a private mechanism), then with the intercept column when ``fit_intercept``
    (:func:`with_intercept`; clipped again so the bound holds exactly in floating point)."""
    rows = clip_rows(X, 1.0) if bounded else X
    if fit_intercept:
        rows = with_intercept(rows, scale)
        rows = clip_rows(rows, 1.0) if bounded else rows
    return rows


def split_intercept(
    model: np.ndarray, *, fit_intercept: bool, scale: float = DEFAULT_INTERCEPT_SCALE
) -> tuple[np.ndarray, float]:
    r"""``(coef, intercept)`` of a model on :func:`model_rows`' columns, for the rows before
    the intercept column: :math:`(\sqrt{1 - c^2}\,w_{:d},\ c\,w_d)`, or ``(w, 0)``."""
    w = np.asarray(model, dtype=np.float64).reshape(-1)
    if not fit_intercept:
        return w, 0.0
    return w[:-1] * float(np.sqrt(1.0 - scale * scale)), float(w[-1] * scale)
