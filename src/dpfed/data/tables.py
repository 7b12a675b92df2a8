r"""An organisation's own table: a CSV with a header (or a Parquet file, with the ``parquet``
extra) and an ID column, read through a schema.

A bank and a shop do not hold column ranges of one shared file: each holds its own table,
keyed by its own customer IDs, with its own column names and categorical values as strings.
This module turns such a table into the numeric rows a protocol trains on, with every
constant of the preprocessing taken from a **schema** the party declares, never from the rows
(a constant read from the private rows would make every other row's features depend on one
record, and no epsilon would cover it; see :mod:`dpfed.data.specs`).

**The schema** (TOML, one per party)::

    label = "income"          # the label holder only: the label column
    positive = ">50K"         # and its positive value (every other value is negative)

    [columns.age]
    bounds = [17, 90]         # numeric: a public range; values are clipped to it and
                              # mapped onto [0, 1]
    [columns.workclass]
    categories = ["Private", "Self-emp-not-inc", "Federal-gov"]   # one-hot, in this order
    other = true              # optional: unknown values go to an explicit `workclass=other`
                              # column; without it an unknown value is refused

Every column a party contributes is declared; other columns of the file are ignored (and so
is the ID column, which only aligns rows). :func:`draft_schema` writes a first draft from a
file, with a loud header: bounds and categories read from the data are *not* public until a
person has replaced or confirmed them from documentation.

**Refusals, by name**: a duplicate or empty ID, a schema column the file lacks, a non-numeric
value in a numeric column, an unknown category (unless ``other = true``), a label value that
is neither positive nor expected, and, across parties, two parties declaring the same column
(:func:`check_disjoint`).
"""

from __future__ import annotations

import csv
import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.data.specs import scale_columns

__all__ = [
    "CategoricalColumn",
    "NumericColumn",
    "PartyTable",
    "TableSchema",
    "check_disjoint",
    "draft_schema",
    "load_schema",
    "read_table",
]

#: The range every numeric column is mapped onto.
OUTPUT_RANGE = (0.0, 1.0)

#: The suffix of a categorical column's "other" indicator.
OTHER = "other"


@dataclass(frozen=True)
class NumericColumn:
    """A numeric column with its public range ``[lower, upper]`` (``lower < upper``)."""

    name: str
    lower: float
    upper: float

    @property
    def features(self) -> tuple[str, ...]:
        return (self.name,)


@dataclass(frozen=True)
class CategoricalColumn:
    """A categorical column one-hot encoded over its public ``categories`` (in order), with
    an explicit ``NAME=other`` indicator for unknown values when ``other`` (else they are
    refused)."""

    name: str
    categories: tuple[str, ...]
    other: bool = False

    @property
    def features(self) -> tuple[str, ...]:
        names = tuple(f"{self.name}={c}" for c in self.categories)
        return names + ((f"{self.name}={OTHER}",) if self.other else ())


Column = NumericColumn | CategoricalColumn


@dataclass(frozen=True)
class TableSchema:
    """What a party contributes: its columns (in the schema's order) and, for the label
    holder, the label column and its positive value."""

    columns: tuple[Column, ...]
    label: str | None = None
    positive: str | None = None
    source: str = ""

    @property
    def feature_names(self) -> tuple[str, ...]:
        """The encoded columns' names, in order (a categorical column gives one per value)."""
        return tuple(f for c in self.columns for f in c.features)

    def record(self) -> dict[str, Any]:
        """The JSON-able description of the preprocessing (for a result)."""
        out: dict[str, Any] = {
            "scaling": "declared public bounds (a party schema)",
            "schema": self.source,
            "output_range": list(OUTPUT_RANGE),
            "clipping": "numeric values outside their bounds are clipped to them",
            "columns": {
                c.name: (
                    [c.lower, c.upper]
                    if isinstance(c, NumericColumn)
                    else {"categories": list(c.categories), "other": c.other}
                )
                for c in self.columns
            },
        }
        if self.label is not None:
            out["label"] = {"column": self.label, "positive": self.positive}
        return out


def _where(source: str, name: str) -> str:
    return f"{source}: [columns.{name}]" if source else f"[columns.{name}]"


def _column(name: str, table: Any, source: str) -> Column:
    where = _where(source, name)
    if not isinstance(table, Mapping):
        raise DpfedInputError(f"{where} must be a table. Found {table!r}.")
    keys = set(table)
    if "bounds" in keys and "categories" in keys:
        raise DpfedInputError(f"{where} must have bounds or categories, not both.")
    if "bounds" in keys:
        unknown = sorted(keys - {"bounds"})
        if unknown:
            raise DpfedInputError(f"{where} has unknown keys {unknown}. Expected bounds.")
        bounds = table["bounds"]
        ok = (
            isinstance(bounds, list)
            and len(bounds) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in bounds)
        )
        if not ok or not (
            math.isfinite(bounds[0]) and math.isfinite(bounds[1]) and bounds[0] < bounds[1]
        ):
            raise DpfedInputError(
                f"{where}.bounds must be [lower, upper], finite numbers with lower < upper. "
                f"Found {bounds!r}."
            )
        return NumericColumn(name, float(bounds[0]), float(bounds[1]))
    if "categories" in keys:
        unknown = sorted(keys - {"categories", "other"})
        if unknown:
            raise DpfedInputError(
                f"{where} has unknown keys {unknown}. Expected categories (and other)."
            )
        categories = table["categories"]
        if (
            not isinstance(categories, list)
            or not categories
            or not all(isinstance(v, str) and v for v in categories)
        ):
            raise DpfedInputError(
                f"{where}.categories must be a non-empty list of non-empty strings. Found "
                f"{categories!r}."
            )
        if len(set(categories)) != len(categories):
            raise DpfedInputError(f"{where}.categories lists a value twice: {categories!r}.")
        other = table.get("other", False)
        if not isinstance(other, bool):
            raise DpfedInputError(f"{where}.other must be true or false. Found {other!r}.")
        if other and OTHER in categories:
            raise DpfedInputError(
                f"{where}: other = true adds the column {name}={OTHER}, but {OTHER!r} is "
                "already a category."
            )
        return CategoricalColumn(name, tuple(categories), other)
    raise DpfedInputError(
        f"{where} must declare bounds = [lower, upper] (numeric) or categories = [...] "
        "(categorical)."
    )


def load_schema(path: str | os.PathLike[str]) -> TableSchema:
    """Read a party's schema file (module docstring).

    Raises
    ------
    DpfedInputError
        For a missing or invalid file, naming the key and what was expected.
    """
    source = str(path)
    try:
        doc = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise DpfedInputError(f"schema file {source!r} does not exist.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DpfedInputError(f"schema file {source!r} is not valid TOML: {exc}") from None
    return schema_from_dict(doc, source)


def schema_from_dict(doc: Mapping[str, Any], source: str = "") -> TableSchema:
    """A :class:`TableSchema` from a parsed schema document."""
    unknown = sorted(set(doc) - {"label", "positive", "columns"})
    if unknown:
        raise DpfedInputError(
            f"{source or 'the schema'} has unknown keys {unknown}. Expected label, positive "
            "and [columns.NAME] tables."
        )
    label, positive = doc.get("label"), doc.get("positive")
    if (label is None) != (positive is None):
        raise DpfedInputError(
            f"{source or 'the schema'}: label and positive go together (the label holder "
            f"names its label column and its positive value). Found label={label!r}, "
            f"positive={positive!r}."
        )
    for key, value in (("label", label), ("positive", positive)):
        if value is not None and not (isinstance(value, str) and value):
            raise DpfedInputError(
                f"{source or 'the schema'}: {key} must be a non-empty string. Found {value!r}."
            )
    columns = doc.get("columns", {})
    if not isinstance(columns, Mapping) or not columns:
        raise DpfedInputError(
            f"{source or 'the schema'} must declare at least one [columns.NAME] table."
        )
    if label is not None and label in columns:
        raise DpfedInputError(
            f"{source or 'the schema'}: the label {label!r} cannot also be a feature column."
        )
    return TableSchema(
        tuple(_column(str(n), t, source) for n, t in columns.items()), label, positive, source
    )


@dataclass(frozen=True, eq=False)
class PartyTable:
    """A party's table read through its schema.

    Attributes
    ----------
    ids : tuple of str
        The rows' IDs, in the file's order (unique).
    X : numpy.ndarray, shape (n_rows, n_features)
        The encoded columns (:attr:`TableSchema.feature_names`), float64, numeric ones in
        :data:`OUTPUT_RANGE`.
    y : numpy.ndarray or None, shape (n_rows,)
        +1 for the positive label, -1 otherwise (the label holder only).
    schema : TableSchema
    clipped : dict of str to int
        Per numeric column, how many values lay outside its bounds (clipped).
    """

    ids: tuple[str, ...]
    X: np.ndarray
    y: np.ndarray | None
    schema: TableSchema
    clipped: dict[str, int]

    @property
    def feature_names(self) -> tuple[str, ...]:
        return self.schema.feature_names

    def take(self, ids: Sequence[str]) -> PartyTable:
        """The rows of ``ids``, in that order (e.g. an intersection's agreed order).

        Raises
        ------
        DpfedInputError
            If an ID is not in the table.
        """
        index = {v: i for i, v in enumerate(self.ids)}
        missing = [v for v in ids if v not in index]
        if missing:
            raise DpfedInputError(
                f"{len(missing)} ID(s) are not in the table, e.g. {missing[0]!r}."
            )
        rows = np.array([index[v] for v in ids], dtype=np.intp)
        return PartyTable(
            tuple(ids),
            self.X[rows],
            None if self.y is None else self.y[rows],
            self.schema,
            self.clipped,
        )


def _number(value: str, column: str, line: int, path: str) -> float:
    try:
        out = float(value)
    except ValueError:
        out = math.nan
    if not math.isfinite(out):
        raise DpfedInputError(
            f"{path}, line {line}: column {column!r} is numeric in the schema, but holds "
            f"{value!r}. Expected a finite number."
        )
    return out


#: File name endings read as Parquet (with pyarrow, the ``parquet`` extra); anything else is CSV.
PARQUET_SUFFIXES = (".parquet", ".pq")


def _text(value: Any) -> str:
    """A Parquet cell as the text a CSV would hold (a float in its shortest round-trip form,
    a missing value empty)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").strip()
    if isinstance(value, float):
        return repr(value)
    return str(value).strip()


def _read_parquet(path: str | os.PathLike[str]) -> tuple[list[str], list[list[str]]]:
    """The column names and rows of a Parquet file, every value as text (:func:`_text`), so
    that a Parquet table is read through its schema exactly as the same CSV is."""
    where = str(path)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DpfedInputError(
            f"table {where!r} is a Parquet file, which needs pyarrow: "
            'pip install "dpfed[parquet]" (or save it as CSV).'
        ) from None
    if not os.path.isfile(path):
        raise DpfedInputError(f"table {where!r} does not exist.")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow's errors (ArrowInvalid, OSError) for a bad file
        raise DpfedInputError(
            f"table {where!r} is not a Parquet file pyarrow can read: {exc}"
        ) from None
    header = [str(h).strip() for h in table.column_names]
    columns = [[_text(v) for v in table.column(k).to_pylist()] for k in range(len(header))]
    return header, [list(row) for row in zip(*columns, strict=True)]


def _read_rows(path: str | os.PathLike[str]) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of a table: Parquet by its name's ending, else CSV. Messages
    count lines as a CSV does (the header is line 1, so a Parquet file's row k, from 0, is
    line k + 2)."""
    if str(path).lower().endswith(PARQUET_SUFFIXES):
        header, rows = _read_parquet(path)
    else:
        header, rows = _read_csv(path)
    if len(set(header)) != len(header):
        twice = sorted({h for h in header if header.count(h) > 1})
        raise DpfedInputError(f"table {str(path)!r} names the column(s) {twice} twice.")
    return header, rows


def _read_csv(path: str | os.PathLike[str]) -> tuple[list[str], list[list[str]]]:
    """The header and the non-blank rows of a CSV, values stripped of surrounding spaces."""
    where = str(path)
    try:
        with open(path, newline="") as handle:
            reader = csv.reader(handle)
            header = [h.strip() for h in next(reader)]
            rows = [[v.strip() for v in row] for row in reader if any(v.strip() for v in row)]
    except FileNotFoundError:
        raise DpfedInputError(f"table {where!r} does not exist.") from None
    except StopIteration:
        raise DpfedInputError(f"table {where!r} is empty: expected a header row.") from None
    for k, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise DpfedInputError(
                f"{where}, line {k}: {len(row)} values for {len(header)} columns."
            )
    return header, rows


def _unique_ids(values: Sequence[str], id_column: str, where: str) -> tuple[str, ...]:
    seen: dict[str, int] = {}
    for k, value in enumerate(values, start=2):
        if not value:
            raise DpfedInputError(f"{where}, line {k}: the ID ({id_column!r}) is empty.")
        if value in seen:
            raise DpfedInputError(
                f"{where}, line {k}: the ID {value!r} appears twice (first on line "
                f"{seen[value]}); IDs must be unique."
            )
        seen[value] = k
    return tuple(values)


def _encode(column: Column, raw: Sequence[str], where: str) -> tuple[np.ndarray, int]:
    """One schema column's encoded block, shape (n_rows, its features), and how many values
    were clipped."""
    if isinstance(column, NumericColumn):
        values = np.array(
            [_number(v, column.name, k, where) for k, v in enumerate(raw, start=2)],
            dtype=np.float64,
        )
        clipped = int(np.sum((values < column.lower) | (values > column.upper)))
        block = scale_columns(values.reshape(-1, 1), [column.lower], [column.upper], OUTPUT_RANGE)
        return block, clipped
    code = {c: j for j, c in enumerate(column.categories)}
    width = len(column.categories) + int(column.other)
    onehot = np.zeros((len(raw), width))
    for i, v in enumerate(raw):
        j = code.get(v)
        if j is None:
            if not column.other:
                raise DpfedInputError(
                    f"{where}, line {i + 2}: column {column.name!r} holds {v!r}, which is not "
                    f"one of its categories {list(column.categories)}. Add it to the schema, "
                    f"or set other = true to map unknown values to {column.name}={OTHER}."
                )
            j = width - 1
        onehot[i, j] = 1.0
    return onehot, 0


def read_table(
    path: str | os.PathLike[str],
    *,
    id_column: str,
    schema: TableSchema,
    labels: bool | None = None,
) -> PartyTable:
    """Read a CSV with a header through ``schema``.

    Parameters
    ----------
    path : path-like
        A comma-separated file with a header row; values are stripped of surrounding spaces.
        A name ending in ``.parquet`` or ``.pq`` is read as Parquet (needs pyarrow, the
        ``parquet`` extra), every value taken as the text a CSV would hold.
    id_column : str
        The column of row IDs (strings; unique and non-empty).
    schema : TableSchema
    labels : bool or None
        Whether to read the schema's label column (default: when the schema names one). Rows
        to predict have no labels: pass False.

    Returns
    -------
    PartyTable

    Raises
    ------
    DpfedInputError
        Naming the file, the line and the value: a missing column, an empty or duplicate ID,
        a non-numeric value in a numeric column, an unknown category.
    """
    where = str(path)
    read_labels = schema.label is not None if labels is None else bool(labels)
    if read_labels and schema.label is None:
        raise DpfedInputError(f"{schema.source or 'the schema'} names no label column.")
    header, rows = _read_rows(path)
    needed = [id_column, *(c.name for c in schema.columns)]
    if read_labels:
        needed.append(str(schema.label))
    missing = [n for n in needed if n not in header]
    if missing:
        raise DpfedInputError(
            f"table {where!r} lacks the column(s) {missing} (the ID column and every column "
            f"of {schema.source or 'the schema'}). Its header is {header}."
        )
    at = {h: i for i, h in enumerate(header)}
    ids = _unique_ids([row[at[id_column]] for row in rows], id_column, where)
    blocks, clipped = [], {}
    for column in schema.columns:
        block, n_clipped = _encode(column, [row[at[column.name]] for row in rows], where)
        blocks.append(block)
        if isinstance(column, NumericColumn):
            clipped[column.name] = n_clipped
    y = None
    if read_labels:
        y = np.array(
            [1.0 if row[at[str(schema.label)]] == schema.positive else -1.0 for row in rows]
        )
    return PartyTable(ids, np.hstack(blocks), y, schema, clipped)


def check_disjoint(schemas: Mapping[str, TableSchema]) -> None:
    """Refuse two parties declaring the same column (each column belongs to one party).

    Raises
    ------
    DpfedInputError
        Naming the column and both parties.
    """
    owner: dict[str, str] = {}
    for party, schema in schemas.items():
        names = [c.name for c in schema.columns]
        if schema.label is not None:
            names.append(schema.label)
        for name in names:
            if name in owner:
                raise DpfedInputError(
                    f"parties {owner[name]!r} and {party!r} both declare the column {name!r}: "
                    "each column belongs to one party (rename one, or leave it out of one "
                    "schema)."
                )
            owner[name] = party


#: How many distinct values make a column categorical in a draft (more: numeric if it can be,
#: else left out with a comment).
DRAFT_MAX_CATEGORIES = 50

DRAFT_HEADER = """\
# DRAFT SCHEMA, READ FROM THE DATA: NOT PUBLIC UNTIL A PERSON HAS REVIEWED IT.
#
# Every bound and category list below was computed from the rows of {path!s}.
# A constant read from the private rows is itself a disclosure: the data's own minimum and
# maximum, or its rarest category, can be one person's value, and no epsilon covers it.
# Before this file is used, replace each bound by a public range (the column's documented
# coding, a legal or physical limit, a generous cap from domain knowledge) and each category
# list by the documented list, then delete this header.
"""


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def draft_schema(
    path: str | os.PathLike[str],
    *,
    id_column: str,
    label: str | None = None,
    positive: str | None = None,
) -> str:
    """A draft schema (TOML text) of the CSV at ``path``, every constant read from the data,
    under :data:`DRAFT_HEADER`.

    A column whose values all parse as numbers is numeric with its observed range; one with
    at most :data:`DRAFT_MAX_CATEGORIES` distinct values otherwise is categorical; any other
    column is left out with a comment. ``id_column`` (and ``label``) are not features.

    Raises
    ------
    DpfedInputError
        For a missing file or column.
    """
    where = str(path)
    header, rows = _read_rows(path)
    for name in (id_column, label):
        if name is not None and name not in header:
            raise DpfedInputError(
                f"table {where!r} has no column {name!r}. Its header is {header}."
            )
    if (label is None) != (positive is None):
        raise DpfedInputError("label and positive go together.")
    lines = [DRAFT_HEADER.format(path=where)]
    if label is not None and positive is not None:
        lines += [f"label = {_toml_string(label)}", f"positive = {_toml_string(positive)}", ""]
    for j, name in enumerate(header):
        if name in (id_column, label):
            continue
        values = [row[j] for row in rows if j < len(row) and row[j] != ""]
        numbers = []
        for v in values:
            try:
                numbers.append(float(v))
            except ValueError:
                break
        if values and len(numbers) == len(values) and all(map(math.isfinite, numbers)):
            lo, hi = min(numbers), max(numbers)
            if lo == hi:
                hi = lo + 1.0
            lines += [
                f"[columns.{_toml_string(name)}]",
                f"bounds = [{lo!r}, {hi!r}]   # READ FROM THE DATA: replace",
                "",
            ]
            continue
        distinct = sorted(set(values))
        if 0 < len(distinct) <= DRAFT_MAX_CATEGORIES:
            listed = ", ".join(_toml_string(v) for v in distinct)
            lines += [
                f"[columns.{_toml_string(name)}]",
                f"categories = [{listed}]   # READ FROM THE DATA: replace",
                "",
            ]
            continue
        lines += [
            f"# {name}: {len(distinct)} distinct values, neither numeric nor a short "
            "category list: left out",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"
