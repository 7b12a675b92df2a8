"""Reader for the UCI Adult (Census Income) files ``adult.data`` and ``adult.test``.

The encoding follows Chaudhuri, Monteleoni and Sarwate (JMLR 2011), as used by the
decentralized-learning experiments of Zhang and Zhu: categorical attributes one-hot encoded,
continuous attributes scaled to [0, 1], every row scaled to Euclidean norm at most 1, labels
in {-1, 1}. Every constant of that encoding is public and declared in
:data:`dpfed.data.specs.DATASET_SPECS` (the category lists of ``adult.names``, a range per
continuous attribute from its documented coding or census top-code, and a bound on the row
norm), so each row is encoded on its own: changing one record changes no other row's
features. See :func:`read_adult` for the exact rules.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.rows import clip_rows
from dpfed.data.dataset import Dataset
from dpfed.data.specs import DATASET_SPECS, scale_columns

#: The 14 attributes of a row, in file order (the 15th field is the income label).
ADULT_ATTRIBUTES: tuple[str, ...] = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
)

#: The 6 continuous attributes; the other 8 are categorical.
ADULT_CONTINUOUS: tuple[str, ...] = (
    "age",
    "fnlwgt",
    "education-num",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
)

MISSING = "?"
_N_FIELDS = len(ADULT_ATTRIBUTES) + 1
_LABELS = {">50K": 1.0, ">50K.": 1.0, "<=50K": -1.0, "<=50K.": -1.0}
_CONTINUOUS_IDX = tuple(ADULT_ATTRIBUTES.index(a) for a in ADULT_CONTINUOUS)
_CATEGORICAL_IDX = tuple(i for i in range(len(ADULT_ATTRIBUTES)) if i not in _CONTINUOUS_IDX)
_SPEC = DATASET_SPECS["adult"]
#: Attribute -> its documented categories in sorted (string) order, one indicator column each.
_KNOWN = {attribute: sorted(values) for attribute, values in _SPEC.categories.items()}
_N_COLUMNS = len(ADULT_CONTINUOUS) + sum(len(v) for v in _KNOWN.values())


@dataclass(frozen=True)
class _Parsed:
    """The raw content of one Adult file (``n`` data rows)."""

    path: Path
    numbers: dict[int, np.ndarray]  # attribute index -> (n,) float64
    categories: dict[int, list[str]]  # attribute index -> n stripped strings
    y: np.ndarray  # (n,) in {-1, 1}


def read_adult(train_path: str | os.PathLike[str], test_path: str | os.PathLike[str]) -> Dataset:
    """Read and preprocess the UCI Adult train and test files.

    Parameters
    ----------
    train_path : str or os.PathLike
        ``adult.data``: one row per line, 15 comma-separated fields (the 14 attributes of
        :data:`ADULT_ATTRIBUTES`, then the label ``>50K`` or ``<=50K``).
    test_path : str or os.PathLike
        ``adult.test``, same format; its labels carry a trailing period (``>50K.``).

    Returns
    -------
    Dataset
        ``name="adult"``, dense float64 ``X_train`` of shape (n_train, n_features) and
        ``X_test`` of shape (n_test, n_features), labels ``y_train`` (n_train,) and
        ``y_test`` (n_test,) in {-1.0, 1.0} (``>50K`` is +1, ``<=50K`` is -1).
        On the official files: 32,561 train and 16,281 test rows, 105 columns, 24.08 % (train)
        and 23.62 % (test) positive.

    Raises
    ------
    DpfedInputError
        If a file does not exist or cannot be read, holds no data row, or a line has the
        wrong number of fields, an empty field, a continuous value that is not a finite
        number, or an unknown label. The message names the file and the line.

    Notes
    -----
    Parsing: fields are separated by commas and stripped of surrounding spaces; blank lines
    and comment lines starting with ``|`` (the first line of ``adult.test``,
    ``|1x3 Cross validator``) are skipped; a trailing period on a label is ignored (in
    either file). Line numbers in messages count every line of the file from 1.

    Encoding, with constants declared in :data:`dpfed.data.specs.DATASET_SPECS` and none
    computed from the rows (train and test rows are encoded alike, each on its own):

    1. Columns follow the attribute order of :data:`ADULT_ATTRIBUTES`: a continuous
       attribute gives one column, a categorical one gives one indicator column per category
       listed for it in ``adult.names``, in sorted (string) order.
    2. Missing values ``?`` (in workclass, occupation and native-country) are not a
       category: a missing categorical value encodes to all zeros in that attribute's
       columns. Rows with missing values are kept. A value not in the documented list also
       encodes to all zeros. ``?`` in a continuous attribute is an error.
    3. Each continuous value is clipped to its attribute's declared range ``[lo, hi]`` and
       mapped to [0, 1] by ``(x - lo) / (hi - lo)``: age [17, 90], fnlwgt [0, 10^7],
       education-num [1, 16], capital-gain and capital-loss [0, 99999], hours-per-week
       [1, 99] (the sources are in the table).
    4. Every row is divided by ``sqrt(14)``, a public bound on its norm (6 continuous
       columns in [0, 1] and 8 categorical attributes with at most one indicator each),
       then clipped exactly with :func:`dpfed.core.rows.clip_rows` to norm at most 1 (which
       only corrects rounding by an ulp).

    On the official files there are 6 continuous columns and 99 indicator columns
    (workclass 8, education 16, marital-status 7, occupation 14, relationship 6, race 5,
    sex 2, native-country 41): 105 columns, the dimension reported by Chaudhuri et al.
    """
    train = _check_file("train_path", train_path)
    test = _check_file("test_path", test_path)
    tr = _parse_file(train)
    te = _parse_file(test)

    X_train = _encode(tr)
    X_test = _encode(te)
    return Dataset(
        name="adult",
        X_train=X_train,
        y_train=tr.y,
        X_test=X_test,
        y_test=te.y,
        source=(
            f"UCI Adult: train {train}, test {test}; {X_train.shape[1]} columns (continuous "
            "clipped to declared public bounds and scaled to [0, 1], categorical one-hot on "
            "the categories of adult.names, '?' and unlisted values all zeros); rows divided "
            f"by the public row-norm bound sqrt(14) = {_SPEC.row_norm:.6g}, then clipped to "
            "norm <= 1"
        ),
        preprocessing=_SPEC.record(),
    )


def _encode(parsed: _Parsed) -> np.ndarray:
    """The encoded rows of one file: each row from its own values and declared constants."""
    X = np.zeros((parsed.y.size, _N_COLUMNS))
    start = 0
    for j, attribute in enumerate(ADULT_ATTRIBUTES):
        if j in _CATEGORICAL_IDX:
            known = _KNOWN[attribute]
            _one_hot(X[:, start : start + len(known)], parsed.categories[j], known)
            start += len(known)
        else:
            k = _SPEC.column_names.index(attribute)
            X[:, start] = scale_columns(
                parsed.numbers[j][:, None], _SPEC.lower[k : k + 1], _SPEC.upper[k : k + 1]
            )[:, 0]
            start += 1
    X /= _SPEC.row_norm
    return clip_rows(X, 1.0)


def _check_file(name: str, path: str | os.PathLike[str]) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise DpfedInputError(f"{name} must be the path of an Adult file. Found {path!r}.")
    file = Path(path).expanduser()
    if not file.is_file():
        raise DpfedInputError(
            f"{name} {os.fspath(path)!r} is not an existing file. Expected the UCI Adult file "
            "(adult.data for train, adult.test for test)."
        )
    return file


def _where(path: Path, line: int) -> str:
    return f"Adult file {str(path)!r}, line {line}"


def _parse_file(path: Path) -> _Parsed:
    """Split ``path`` into fields and convert the continuous attributes and the label."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DpfedInputError(
            f"Adult file {str(path)!r} is not UTF-8 text (byte {exc.start}). Expected the "
            "comma-separated UCI Adult file."
        ) from None
    except OSError as exc:
        raise DpfedInputError(
            f"Adult file {str(path)!r} cannot be read: {exc.strerror or exc}."
        ) from None

    rows: list[list[str]] = []
    numbers: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("|"):
            continue
        fields = list(map(str.strip, stripped.split(",")))
        if len(fields) != _N_FIELDS:
            raise DpfedInputError(
                f"{_where(path, number)}: expected {_N_FIELDS} comma-separated fields (14 "
                f"attributes, then the label). Found {len(fields)}."
            )
        if "" in fields:
            k = fields.index("")
            what = ADULT_ATTRIBUTES[k] if k < len(ADULT_ATTRIBUTES) else "the label"
            raise DpfedInputError(
                f"{_where(path, number)}: field {k + 1} ({what}) is empty. Expected a value "
                f"(write {MISSING!r} for a missing categorical value)."
            )
        rows.append(fields)
        numbers.append(number)
    if not rows:
        raise DpfedInputError(
            f"Adult file {str(path)!r} holds no data rows. Expected lines of {_N_FIELDS} "
            "comma-separated fields."
        )
    lines = np.asarray(numbers, dtype=np.int64)
    columns = list(zip(*rows, strict=True))

    values: dict[int, np.ndarray] = {}
    for j in _CONTINUOUS_IDX:
        values[j] = _to_numbers(path, lines, ADULT_ATTRIBUTES[j], columns[j])

    labels = columns[-1]
    y = np.fromiter((_LABELS.get(v, 0.0) for v in labels), dtype=np.float64, count=len(labels))
    if not np.all(y):
        k = int(np.flatnonzero(y == 0)[0])
        raise DpfedInputError(
            f"{_where(path, int(lines[k]))}: the label must be '>50K' or '<=50K' (a trailing "
            f"'.' is allowed). Found {labels[k]!r}."
        )
    categories = {j: list(columns[j]) for j in _CATEGORICAL_IDX}
    return _Parsed(path=path, numbers=values, categories=categories, y=y)


def _to_numbers(
    path: Path, lines: np.ndarray, attribute: str, column: tuple[str, ...]
) -> np.ndarray:
    """One continuous column as float64, naming the first bad entry's line."""
    try:
        out = np.asarray(column).astype(np.float64)
    except ValueError:
        # NumPy and Python disagree on a few spellings; Python's float() decides.
        bad = next((k for k, text in enumerate(column) if not _is_number(text)), -1)
        if bad < 0:
            out = np.array([float(text) for text in column], dtype=np.float64)
    else:
        bad = -1
    if bad < 0:
        finite = np.isfinite(out)
        if finite.all():
            return out
        bad = int(np.flatnonzero(~finite)[0])
    hint = (
        " (missing values are only allowed in categorical attributes)"
        if column[bad] == MISSING
        else ""
    )
    raise DpfedInputError(
        f"{_where(path, int(lines[bad]))}: {attribute} must be a finite number{hint}. "
        f"Found {column[bad]!r}."
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _one_hot(out: np.ndarray, values: list[str], known: list[str]) -> None:
    """Set the indicator columns of ``known`` in the zero block ``out``, shape (n, len(known)).

    ``?`` and values not in ``known`` leave their row all zero.
    """
    if not known:
        return
    index = {category: k for k, category in enumerate(known)}
    distinct, inverse = np.unique(np.asarray(values), return_inverse=True)
    codes = np.array([index.get(str(v), -1) for v in distinct], dtype=np.intp)[inverse.ravel()]
    rows = np.flatnonzero(codes >= 0)
    out[rows, codes[rows]] = 1.0
