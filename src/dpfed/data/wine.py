"""Reader of the UCI Wine Quality files ``winequality-red.csv`` and ``winequality-white.csv``.

Format (Cortez et al., 2009): a header line of 12 double-quoted column names, then one wine
per line, 12 fields separated by semicolons: the 11 physico-chemical inputs of
:data:`WINE_FEATURES` and the sensory ``quality`` score, an integer from 0 to 10.
"""

from __future__ import annotations

import os
from pathlib import Path

from dpfed._validation import DpfedInputError
from dpfed.data.tabular import RegressionData, finite_value, from_rows, read_text

__all__ = ["WINE_FEATURES", "WINE_TARGET", "read_wine"]

#: The 11 inputs, in file order.
WINE_FEATURES: tuple[str, ...] = (
    "fixed acidity",
    "volatile acidity",
    "citric acid",
    "residual sugar",
    "chlorides",
    "free sulfur dioxide",
    "total sulfur dioxide",
    "density",
    "pH",
    "sulphates",
    "alcohol",
)
#: The target, the 12th column.
WINE_TARGET = "quality"
_COLUMNS = (*WINE_FEATURES, WINE_TARGET)
_LABEL = "Wine Quality file"


def _where(path: Path, line: int) -> str:
    return f"{_LABEL} {str(path)!r}, line {line}"


def read_wine(path: str | os.PathLike[str], *, name: str | None = None) -> RegressionData:
    """Read a Wine Quality CSV file.

    Parameters
    ----------
    path : str or os.PathLike
        ``winequality-red.csv`` or ``winequality-white.csv``.
    name : str or None, default None
        Name of the result (default: the file name without ``.csv``).

    Returns
    -------
    RegressionData
        ``X`` of shape (n, 11), float64, columns :data:`WINE_FEATURES`; ``y`` of shape (n,),
        the integer quality as float64. On the official files n = 1,599 (red) and 4,898
        (white).

    Raises
    ------
    DpfedInputError
        If the file does not exist or cannot be read, the header is not the 12 expected
        column names, a line does not have 12 semicolon-separated fields, a value is not a
        finite number, the quality is not an integer, or there is no data line. The message
        names the file and the line (counted from 1, the header being line 1).

    Notes
    -----
    Blank lines are skipped. Header names may be quoted with double quotes or not, and are
    compared exactly after removing the quotes and surrounding spaces.
    """
    file, text = read_text(
        path,
        label=_LABEL,
        what="a Wine Quality file",
        separator="semicolon",
        expected="a UCI Wine Quality file (winequality-red.csv or winequality-white.csv)",
    )
    lines = text.splitlines()
    header_at = next((k for k, line in enumerate(lines) if line.strip()), None)
    if header_at is None:
        raise DpfedInputError(
            f"{_LABEL} {str(file)!r} is empty. Expected a header line of "
            f"{len(_COLUMNS)} quoted column names, then data lines."
        )
    header = [field.strip().strip('"').strip() for field in lines[header_at].split(";")]
    if tuple(header) != _COLUMNS:
        if len(header) != len(_COLUMNS):
            found = f"{len(header)} fields"
        else:
            k = next(i for i, (a, b) in enumerate(zip(header, _COLUMNS, strict=True)) if a != b)
            found = f"column {k + 1} named {header[k]!r} where {_COLUMNS[k]!r} was expected"
        raise DpfedInputError(
            f"{_where(file, header_at + 1)}: the header must name the {len(_COLUMNS)} columns "
            f"{'; '.join(_COLUMNS)} (semicolon-separated). Found {found}."
        )

    rows: list[list[float]] = []
    for k in range(header_at + 1, len(lines)):
        stripped = lines[k].strip()
        if not stripped:
            continue
        fields = stripped.split(";")
        if len(fields) != len(_COLUMNS):
            raise DpfedInputError(
                f"{_where(file, k + 1)}: expected {len(_COLUMNS)} semicolon-separated fields "
                f"(11 inputs, then quality). Found {len(fields)}."
            )
        values = [
            finite_value(text_value, where=_where(file, k + 1), column=column)
            for column, text_value in zip(_COLUMNS, fields, strict=True)
        ]
        if not float(values[-1]).is_integer():
            raise DpfedInputError(
                f"{_where(file, k + 1)}: {WINE_TARGET} must be an integer score. "
                f"Found {fields[-1].strip()!r}."
            )
        rows.append(values)
    if not rows:
        raise DpfedInputError(
            f"{_LABEL} {str(file)!r} holds a header but no data lines. Expected "
            f"lines of {len(_COLUMNS)} semicolon-separated numbers."
        )
    return from_rows(
        rows,
        name=name if name is not None else file.name.removesuffix(".csv"),
        feature_names=WINE_FEATURES,
        target_name=WINE_TARGET,
        source=f"UCI Wine Quality file {file} ({len(rows)} rows, 11 inputs, quality)",
    )
