"""Feature standardisation; row normalisation and clipping live in :mod:`dpfed.core.rows`."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_finite_matrix
from dpfed.core.rows import as_float_2d, clip_rows, normalize_rows, row_norms

Matrix = np.ndarray | sp.spmatrix | sp.sparray

__all__ = ["clip_rows", "normalize_rows", "row_norms", "standardize_apply", "standardize_fit"]


def standardize_fit(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and standard deviation of dense data.

    Parameters
    ----------
    X : numpy.ndarray, shape (n_samples, n_features)
        Dense, finite training data (centring would make sparse data dense).

    Returns
    -------
    mean : numpy.ndarray, shape (n_features,)
        Column means.
    scale : numpy.ndarray, shape (n_features,)
        Column standard deviations (``ddof=0``); constant columns get 1.

    Notes
    -----
    Both statistics read every row of ``X``: features standardised with them depend on every
    record, and a differential privacy guarantee on such features assumes the statistics
    public. dpfed's loaders use declared public bounds instead (:mod:`dpfed.data.specs`).
    """
    if sp.issparse(X):
        raise DpfedInputError(
            "standardize_fit needs dense data (centring would fill a sparse matrix). Found "
            f"a sparse {X.format} matrix of shape {X.shape}; pass X.toarray() or skip "
            "standardisation."
        )
    X = as_float_2d("X", X)
    if X.shape[0] == 0:
        raise DpfedInputError("X must hold at least one row to standardise. Found 0 rows.")
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale == 0] = 1.0
    return mean, scale


def standardize_apply(X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Return ``(X - mean) / scale`` with statistics from :func:`standardize_fit`.

    Parameters
    ----------
    X : numpy.ndarray, shape (n_samples, n_features)
        Dense, finite data.
    mean : numpy.ndarray, shape (n_features,)
        Column means.
    scale : numpy.ndarray, shape (n_features,)
        Positive column scales.

    Returns
    -------
    numpy.ndarray, shape (n_samples, n_features)
        The standardised data, float64 (a new array).
    """
    if sp.issparse(X):
        raise DpfedInputError(
            "standardize_apply needs dense data (centring would fill a sparse matrix). Found "
            f"a sparse {X.format} matrix of shape {X.shape}; pass X.toarray()."
        )
    X = as_float_2d("X", X)
    mean = np.asarray(mean, dtype=np.float64).reshape(-1)
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    d = X.shape[1]
    for label, vec in (("mean", mean), ("scale", scale)):
        if vec.shape != (d,):
            raise DpfedInputError(
                f"{label} must have one entry per feature, shape ({d},). Found shape {vec.shape}."
            )
        check_finite_matrix(label, vec[None, :])
    if np.any(scale <= 0):
        k = int(np.flatnonzero(scale <= 0)[0])
        raise DpfedInputError(
            f"scale must be positive for every feature. Found {scale[k]} at feature {k}."
        )
    return (X - mean) / scale
