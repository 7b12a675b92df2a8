"""Checks at the public boundary. Every error names the value and what was expected."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp


class DpfedInputError(ValueError):
    """Bad input at a public boundary (argument, file, data set)."""


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Return ``value`` as float if it is finite and > 0 (or >= 0 with ``allow_zero``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise DpfedInputError(f"{name} must be a number. Found {value!r}.") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise DpfedInputError(f"{name} must be a finite number {bound}. Found {value!r}.")
    return v


def check_open_unit(name: str, value: float) -> float:
    """Return ``value`` if it lies in the open interval (0, 1)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise DpfedInputError(f"{name} must be a number. Found {value!r}.") from None
    if not (0.0 < v < 1.0):
        raise DpfedInputError(f"{name} must be in the open interval (0, 1). Found {value!r}.")
    return v


def check_int(name: str, value: int, *, minimum: int = 1) -> int:
    """Return ``value`` as int if it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        try:
            fv = float(value)
        except (TypeError, ValueError):
            raise DpfedInputError(f"{name} must be an integer. Found {value!r}.") from None
        if not fv.is_integer():
            raise DpfedInputError(f"{name} must be an integer. Found {value!r}.")
        value = int(fv)
    if int(value) < minimum:
        raise DpfedInputError(f"{name} must be an integer >= {minimum}. Found {value!r}.")
    return int(value)


def check_finite_matrix(name: str, matrix: np.ndarray | sp.spmatrix) -> None:
    """Raise if a dense or sparse matrix holds NaN or infinite values, naming the first one."""
    where: tuple[int, ...]
    if sp.issparse(matrix):
        if np.all(np.isfinite(matrix.data)):
            return
        coo = sp.coo_matrix(matrix)
        bad_entries = np.flatnonzero(~np.isfinite(coo.data))
        if bad_entries.size == 0:
            return
        k = int(bad_entries[0])
        where, bad = (int(coo.row[k]), int(coo.col[k])), coo.data[k]
    else:
        dense = np.asarray(matrix)
        bad_entries = np.flatnonzero(~np.isfinite(dense))
        if bad_entries.size == 0:
            return
        flat = int(bad_entries[0])
        where = tuple(int(i) for i in np.unravel_index(flat, dense.shape))
        bad = dense.reshape(-1)[flat]
    raise DpfedInputError(f"{name} must hold finite values only. Found {bad} at index {where}.")


def check_binary_labels(name: str, labels: np.ndarray) -> np.ndarray:
    """Map labels in {-1, 1} or {0, 1} to {-1.0, 1.0}; anything else is an error."""
    y = np.asarray(labels, dtype=float).reshape(-1)
    if y.size and not np.all(np.isfinite(y)):
        bad = y[~np.isfinite(y)][0]
        raise DpfedInputError(f"{name} must be finite. Found {bad}.")
    values = set(np.unique(y).tolist())
    if values <= {-1.0, 1.0}:
        return y
    if values <= {0.0, 1.0}:
        return 2.0 * y - 1.0
    outside = sorted(values - {-1.0, 0.0, 1.0})
    shown = outside[:5] if outside else sorted(values)
    raise DpfedInputError(f"{name} must be binary, in {{-1, 1}} or {{0, 1}}. Found values {shown}.")


def check_same_rows(names: Iterable[str], counts: Iterable[int]) -> int:
    """All parties must hold the same rows: equal row counts."""
    pairs = list(zip(names, counts, strict=True))
    if not pairs:
        raise DpfedInputError("at least one party is needed. Found none.")
    first = pairs[0][1]
    for _name, n in pairs[1:]:
        if n != first:
            shown = ", ".join(f"{a}: {b}" for a, b in pairs)
            raise DpfedInputError(
                f"every party must hold the same rows; row counts differ ({shown})."
            )
    return int(first)
