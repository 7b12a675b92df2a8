"""Vertical (feature-wise) partitioning of a data matrix among parties."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_int


def parse_split(text: str) -> list[int]:
    """Parse a comma-separated list of block widths, e.g. ``"66,57"`` -> ``[66, 57]``.

    Parameters
    ----------
    text : str
        Positive integers separated by commas; spaces around them are ignored.

    Returns
    -------
    list of int, length n_parties
        The number of features of each party, in order.

    Raises
    ------
    DpfedInputError
        If the text is empty, has an empty part (``"66,,57"``), a part that is not an
        integer, or a part that is not positive.
    """
    if not isinstance(text, str):
        raise DpfedInputError(
            f"split must be a string of comma-separated positive integers like '66,57'. "
            f"Found {text!r}."
        )
    if not text.strip():
        raise DpfedInputError(
            f"split must list at least one block width, like '66,57'. Found {text!r}."
        )
    widths: list[int] = []
    for position, part in enumerate(text.split(","), start=1):
        part = part.strip()
        if not part:
            raise DpfedInputError(
                f"split {text!r} has an empty part at position {position}. Expected "
                "comma-separated positive integers like '66,57'."
            )
        try:
            width = int(part)
        except ValueError:
            raise DpfedInputError(
                f"split {text!r} has {part!r} at position {position}, which is not an "
                "integer. Expected comma-separated positive integers like '66,57'."
            ) from None
        if width <= 0:
            raise DpfedInputError(
                f"split {text!r} has {width} at position {position}. Every block width must "
                "be a positive integer (>= 1)."
            )
        widths.append(width)
    return widths


def even_split(n_features: int, parties: int) -> list[int]:
    """Block widths that share ``n_features`` columns as evenly as possible.

    The first ``n_features % parties`` parties get one column more than the others.

    Parameters
    ----------
    n_features : int
        Total number of features, >= ``parties``.
    parties : int
        Number of parties, >= 1.

    Returns
    -------
    list of int, length parties
        Positive widths summing to ``n_features``.

    Raises
    ------
    DpfedInputError
        If an argument is not a positive integer or there are more parties than features.
    """
    n_features = check_int("n_features", n_features, minimum=1)
    parties = check_int("parties", parties, minimum=1)
    if parties > n_features:
        raise DpfedInputError(
            f"parties must be <= the feature count {n_features} (every party needs at least "
            f"one feature). Found {parties}."
        )
    base, extra = divmod(n_features, parties)
    return [base + 1 if k < extra else base for k in range(parties)]


def vertical_split(
    X: np.ndarray | sp.spmatrix | sp.sparray, split: Sequence[int]
) -> list[np.ndarray | sp.csr_matrix]:
    """Cut the columns of ``X`` into consecutive blocks, one per party.

    Parameters
    ----------
    X : numpy.ndarray or scipy sparse matrix, shape (n_samples, n_features)
        The full data matrix.
    split : sequence of int, length n_parties
        Block widths, positive and summing to ``n_features`` (see :func:`parse_split` and
        :func:`even_split`).

    Returns
    -------
    list, length n_parties
        Block ``k`` holds columns ``sum(split[:k])`` to ``sum(split[:k+1]) - 1`` of ``X``,
        shape ``(n_samples, split[k])``. Sparse input gives CSR blocks, dense input gives
        C-contiguous array copies (a party never shares memory with ``X``).

    Raises
    ------
    DpfedInputError
        If ``X`` is not 2-D, a width is not a positive integer, or the widths do not sum to
        the number of columns of ``X``.
    """
    if not sp.issparse(X):
        X = np.asarray(X)
    if X.ndim != 2:
        raise DpfedInputError(
            f"X must be a 2-D matrix (n_samples, n_features). Found shape {X.shape}."
        )
    if isinstance(split, str | bytes) or not isinstance(split, Sequence | np.ndarray):
        raise DpfedInputError(
            f"split must be a sequence of positive integers (use parse_split for text). "
            f"Found {split!r}."
        )
    widths = [check_int(f"split[{k}]", w, minimum=1) for k, w in enumerate(split)]
    if not widths:
        raise DpfedInputError("split must list at least one block width. Found none.")
    n_features = int(X.shape[1])
    if sum(widths) != n_features:
        shown = ",".join(str(w) for w in widths)
        raise DpfedInputError(
            f"split {shown} sums to {sum(widths)} but the data has {n_features} features. "
            f"Expected the widths to sum to {n_features}."
        )
    bounds = np.concatenate([[0], np.cumsum(widths)])
    if sp.issparse(X):
        Xc = X.tocsr()
        return [Xc[:, a:b].tocsr() for a, b in pairwise(bounds.tolist())]
    return [np.array(X[:, a:b], order="C", copy=True) for a, b in pairwise(bounds.tolist())]
