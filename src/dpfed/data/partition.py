"""Partitioning a data matrix among parties: vertical (by feature) and horizontal (by row)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_int, check_positive


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


def horizontal_split(
    n_samples: int,
    parts: int,
    *,
    sizes: Sequence[int] | None = None,
    uneven: float | None = None,
    rng: np.random.Generator | int | None = None,
) -> list[np.ndarray]:
    """Share the rows ``0 .. n_samples - 1`` among ``parts`` parties (or graph nodes).

    Part sizes are the explicit ``sizes``, or random uneven sizes when ``uneven`` is given,
    or otherwise as equal as possible (the first ``n_samples % parts`` parts get one row
    more, as in :func:`even_split`). The rows are
    then dealt out in blocks of those sizes from a random permutation drawn from ``rng``,
    or, when ``rng`` is ``None`` and ``uneven`` is not given, from ``0 .. n_samples - 1`` in
    order (contiguous blocks, no randomness).

    Parameters
    ----------
    n_samples : int
        Number of rows to share, >= 1.
    parts : int
        Number of parts, ``1 <= parts <= n_samples``.
    sizes : sequence of int, length parts, optional
        Rows of every part, each >= 1, summing to ``n_samples``. Not with ``uneven``.
    uneven : float, optional
        Concentration ``a > 0`` of a symmetric Dirichlet distribution: the proportions of
        the ``n_samples - parts`` rows left after giving every part one row are drawn from
        ``Dirichlet(a, ..., a)`` (rounded so they sum exactly). Small ``a`` (e.g. 0.5) gives
        very uneven sizes, large ``a`` (e.g. 100) nearly even ones. Not with ``sizes``.
    rng : numpy.random.Generator or int or None, default None
        Source of randomness: a generator (used and advanced), or a seed for
        ``numpy.random.default_rng`` (same seed, same split). ``None`` means contiguous
        blocks, except with ``uneven``, which then draws from a fresh unseeded generator.

    Returns
    -------
    list of numpy.ndarray of int64, length parts
        Part ``k`` holds the sorted row indices of party ``k``, shape ``(size_k,)``. The
        parts are disjoint, every part is non-empty, and together they cover
        ``range(n_samples)``.

    Raises
    ------
    DpfedInputError
        If ``n_samples`` or ``parts`` is not a positive integer, ``parts > n_samples``,
        ``sizes`` has the wrong length, a size < 1 or the wrong sum, both ``sizes`` and
        ``uneven`` are given, ``uneven`` is not a positive finite number, or ``rng`` is
        neither a generator, an integer seed nor ``None``.

    Examples
    --------
    >>> [p.tolist() for p in horizontal_split(7, 3)]
    [[0, 1, 2], [3, 4], [5, 6]]
    >>> [p.size for p in horizontal_split(10, 2, sizes=[3, 7], rng=0)]
    [3, 7]
    """
    n_samples = check_int("n_samples", n_samples, minimum=1)
    parts = check_int("parts", parts, minimum=1)
    if parts > n_samples:
        raise DpfedInputError(
            f"parts must be <= n_samples = {n_samples} (every part needs at least one row). "
            f"Found {parts}."
        )
    if sizes is not None and uneven is not None:
        raise DpfedInputError(
            f"give either sizes or uneven, not both. Found sizes={sizes!r} and uneven={uneven!r}."
        )
    generator = _as_generator(rng)
    if sizes is not None:
        counts = _check_sizes(sizes, n_samples, parts)
    elif uneven is not None:
        concentration = check_positive("uneven", uneven)
        if generator is None:
            generator = np.random.default_rng()
        counts = _dirichlet_sizes(n_samples, parts, concentration, generator)
    else:
        counts = even_split(n_samples, parts)
    order = (
        np.arange(n_samples, dtype=np.int64)
        if generator is None
        else generator.permutation(n_samples).astype(np.int64)
    )
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    return [np.sort(order[a:b]) for a, b in pairwise(bounds)]


def _as_generator(rng: np.random.Generator | int | None) -> np.random.Generator | None:
    if rng is None or isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, int | np.integer) and not isinstance(rng, bool):
        if rng < 0:
            raise DpfedInputError(f"rng must be a seed >= 0 when given as an integer. Found {rng}.")
        return np.random.default_rng(int(rng))
    raise DpfedInputError(
        f"rng must be a numpy.random.Generator, an integer seed or None. Found {rng!r}."
    )


def _check_sizes(sizes: Sequence[int], n_samples: int, parts: int) -> list[int]:
    if isinstance(sizes, str | bytes) or not isinstance(sizes, Sequence | np.ndarray):
        raise DpfedInputError(f"sizes must be a sequence of positive integers. Found {sizes!r}.")
    counts = [check_int(f"sizes[{k}]", size, minimum=1) for k, size in enumerate(sizes)]
    if len(counts) != parts:
        raise DpfedInputError(
            f"sizes must give one size per part ({parts} parts). Found {len(counts)} sizes."
        )
    if sum(counts) != n_samples:
        shown = ",".join(str(c) for c in counts)
        raise DpfedInputError(
            f"sizes {shown} sum to {sum(counts)}. Expected them to sum to n_samples = {n_samples}."
        )
    return counts


def _dirichlet_sizes(
    n_samples: int, parts: int, concentration: float, rng: np.random.Generator
) -> list[int]:
    """One row per part, the other ``n_samples - parts`` by Dirichlet proportions."""
    spare = n_samples - parts
    shares = rng.dirichlet(np.full(parts, concentration))
    if not np.all(np.isfinite(shares)):  # extreme concentrations; fall back to one part
        shares = np.zeros(parts)
        shares[rng.integers(parts)] = 1.0
    # Rounding the cumulative shares keeps the sizes >= 0 and makes them sum exactly.
    edges = np.rint(np.cumsum(shares) / shares.sum() * spare).astype(np.int64)
    edges = np.clip(edges, 0, spare)
    edges[-1] = spare
    extra = np.diff(np.concatenate([[0], edges]))
    return [1 + int(e) for e in extra]
