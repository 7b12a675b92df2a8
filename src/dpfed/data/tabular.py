"""Rows of a regression data set read from a text file: the common reader of the Wine
Quality and Abalone files."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError


@dataclass(frozen=True, eq=False, repr=False)
class RegressionData:
    """A regression data set: features, a real target and where they came from.

    Attributes
    ----------
    name : str
        Registry name (``wine-red``, ``wine-white``, ``abalone``) or a file name.
    X : numpy.ndarray, shape (n_samples, n_features)
        Features, float64.
    y : numpy.ndarray, shape (n_samples,)
        Target, float64.
    feature_names : tuple of str
        One name per column of ``X``.
    target_name : str
    source : str
        Files read and how the columns were encoded.
    preprocessing : dict
        JSON-able description of the scaling applied: ``{"scaling": "none", ...}`` for raw
        values, the declared bounds after :func:`scale_to_range`.

    Notes
    -----
    Equality and hashing are by identity (the fields hold arrays).
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    target_name: str
    source: str
    preprocessing: dict[str, Any] = field(
        default_factory=lambda: {"scaling": "none", "note": "raw values as read"}
    )

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return int(self.X.shape[1])

    def __repr__(self) -> str:
        return (
            f"RegressionData(name={self.name!r}, X={self.X.shape}, target={self.target_name!r}, "
            f"source={self.source!r})"
        )


def read_text(
    path: str | os.PathLike[str], *, label: str, what: str, expected: str, separator: str
) -> tuple[Path, str]:
    """Check the path of a UCI text file and read it (the readers of :mod:`dpfed.data.wine`
    and :mod:`dpfed.data.abalone`).

    Parameters
    ----------
    path : str or os.PathLike
    label : str
        The kind of file in messages, e.g. ``"Abalone file"``.
    what, expected : str
        What ``path`` must be (``"the Abalone file"``) and which file is expected
        (``"the UCI Abalone file abalone.data"``).
    separator : str
        ``"comma"`` or ``"semicolon"``: how the fields are separated.

    Returns
    -------
    file : pathlib.Path
        ``path`` with ``~`` expanded.
    text : str
        The file's content.

    Raises
    ------
    DpfedInputError
        If ``path`` is not a path, not an existing file, cannot be read or is not UTF-8.
    """
    if not isinstance(path, str | os.PathLike):
        raise DpfedInputError(f"path must be the path of {what}. Found {path!r}.")
    file = Path(path).expanduser()
    if not file.is_file():
        raise DpfedInputError(
            f"path {os.fspath(path)!r} is not an existing file. Expected {expected}."
        )
    try:
        return file, file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DpfedInputError(
            f"{label} {str(file)!r} is not UTF-8 text (byte {exc.start}). Expected the "
            f"{separator}-separated UCI file."
        ) from None
    except OSError as exc:
        raise DpfedInputError(
            f"{label} {str(file)!r} cannot be read: {exc.strerror or exc}."
        ) from None


def finite_value(text: str, *, where: str, column: str) -> float:
    """The field ``text`` of column ``column`` as a finite float; ``where`` (file and line)
    starts the error message."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DpfedInputError(f"{where}: {column} must be a finite number. Found {text.strip()!r}.")
    return value


def from_rows(
    rows: Sequence[Sequence[float]],
    *,
    name: str,
    feature_names: tuple[str, ...],
    target_name: str,
    source: str,
) -> RegressionData:
    """A :class:`RegressionData` of parsed rows, each the features then the target."""
    data = np.asarray(rows, dtype=np.float64)
    return RegressionData(
        name=name,
        X=np.ascontiguousarray(data[:, :-1]),
        y=np.ascontiguousarray(data[:, -1]),
        feature_names=feature_names,
        target_name=target_name,
        source=source,
    )
