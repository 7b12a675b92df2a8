"""Reader of the UCI Abalone file ``abalone.data``.

Format (Nash et al., 1994): no header; one abalone per line, 9 comma-separated fields: sex
(``M``, ``F`` or ``I`` for infant), the 7 measurements of :data:`ABALONE_MEASUREMENTS`, and
``Rings`` (an integer; age is rings + 1.5 years).
"""

from __future__ import annotations

import os
from pathlib import Path

from dpfed._validation import DpfedInputError
from dpfed.data.tabular import RegressionData, finite_value, from_rows, read_text

__all__ = ["ABALONE_FEATURES", "ABALONE_MEASUREMENTS", "ABALONE_SEXES", "read_abalone"]

#: Sex codes, in the order of their indicator columns.
ABALONE_SEXES: tuple[str, ...] = ("M", "F", "I")
#: The 7 continuous measurements, in file order.
ABALONE_MEASUREMENTS: tuple[str, ...] = (
    "Length",
    "Diameter",
    "Height",
    "Whole weight",
    "Shucked weight",
    "Viscera weight",
    "Shell weight",
)
#: The 10 feature columns of :func:`read_abalone`.
ABALONE_FEATURES: tuple[str, ...] = (
    *(f"Sex={s}" for s in ABALONE_SEXES),
    *ABALONE_MEASUREMENTS,
)
_N_FIELDS = 1 + len(ABALONE_MEASUREMENTS) + 1
_LABEL = "Abalone file"


def _where(path: Path, line: int) -> str:
    return f"{_LABEL} {str(path)!r}, line {line}"


def read_abalone(path: str | os.PathLike[str], *, name: str = "abalone") -> RegressionData:
    """Read the Abalone data file.

    Parameters
    ----------
    path : str or os.PathLike
        ``abalone.data``.
    name : str, default "abalone"
        Name of the result.

    Returns
    -------
    RegressionData
        ``X`` of shape (n, 10), float64: three sex indicators (``Sex=M``, ``Sex=F``,
        ``Sex=I``, exactly one of them 1) then the 7 measurements; ``y`` of shape (n,), the
        rings as float64. On the official file n = 4,177.

    Raises
    ------
    DpfedInputError
        If the file does not exist or cannot be read, a line does not have 9 comma-separated
        fields, the sex is not ``M``, ``F`` or ``I``, a measurement is not a finite number,
        the rings are not a non-negative integer, or there is no data line. The message names
        the file and the line (counted from 1).

    Notes
    -----
    Fields are stripped of surrounding spaces; blank lines are skipped; the sex code is
    case-sensitive, as in the UCI description.
    """
    file, text = read_text(
        path,
        label=_LABEL,
        what="the Abalone file",
        separator="comma",
        expected="the UCI Abalone file abalone.data",
    )
    sex_column = {s: k for k, s in enumerate(ABALONE_SEXES)}
    rows: list[list[float]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        fields = [f.strip() for f in stripped.split(",")]
        if len(fields) != _N_FIELDS:
            raise DpfedInputError(
                f"{_where(file, number)}: expected {_N_FIELDS} comma-separated fields (sex, "
                f"7 measurements, rings). Found {len(fields)}."
            )
        if fields[0] not in sex_column:
            raise DpfedInputError(
                f"{_where(file, number)}: sex must be one of {', '.join(ABALONE_SEXES)}. "
                f"Found {fields[0]!r}."
            )
        row = [0.0] * len(ABALONE_SEXES)
        row[sex_column[fields[0]]] = 1.0
        row += [
            finite_value(text_value, where=_where(file, number), column=column)
            for column, text_value in zip((*ABALONE_MEASUREMENTS, "Rings"), fields[1:], strict=True)
        ]
        if not (row[-1] >= 0 and float(row[-1]).is_integer()):
            raise DpfedInputError(
                f"{_where(file, number)}: Rings must be a non-negative integer. "
                f"Found {fields[-1]!r}."
            )
        rows.append(row)
    if not rows:
        raise DpfedInputError(
            f"{_LABEL} {str(file)!r} holds no data lines. Expected lines of {_N_FIELDS} "
            "comma-separated fields."
        )
    return from_rows(
        rows,
        name=name,
        feature_names=ABALONE_FEATURES,
        target_name="Rings",
        source=(
            f"UCI Abalone file {file} ({len(rows)} rows; sex one-hot as "
            f"{', '.join(ABALONE_FEATURES[:3])}, 7 measurements; target Rings)"
        ),
    )
