r"""Declared public bounds of the named data sets, and the scaling that uses only them.

Every differential privacy guarantee dpfed reports is about one record of the training data.
It holds for the features a protocol is given, so the preprocessing that produces those
features must not read the private rows: if a constant of the scaling (a column mean, a
min/max, the largest row norm) were computed from the training data, changing one record
would change every other record's features, and the guarantee would silently assume those
constants are public. This module is the one place where the constants of dpfed's named data
sets are declared, each with where it comes from:

* a :class:`ColumnBound` gives a column's public range ``[lo, hi]`` and its ``basis`` (the
  attribute's coding in the data set's documentation, a physical or legal limit, a census
  top-code, or a declared cap chosen generously from domain knowledge, never from the data's
  own minimum or maximum);
* a :class:`DatasetSpec` collects a data set's bounds, the output range its columns are mapped
  to and, for Adult, the documented category lists and the public bound on the row norm;
* :func:`scale_columns` clips every value to its bounds and maps the bounds affinely onto the
  output range. The map uses the declared constants only, so each row's result depends on
  that row alone (row-local preprocessing).

:func:`preprocessing_of` describes, for a data set name or a file, which preprocessing its
loader applies; loaded data sets carry that description (``Dataset.preprocessing``,
``RegressionData.preprocessing``) and every ``result.json`` of a named data set repeats it
under ``preprocessing``.

Sets without a row of this table are used as published: ``a9a`` (binary indicators),
the NIPS 2003 sets (the challenge's integer features) and LIBSVM files (rows as written). The
protocols bound row norms themselves, row by row (:mod:`dpfed.core.rows`). Declared bounds
are the supported route for a user's own data too; a scaling fitted on the private data would
have to be estimated with differential privacy and accounted, which dpfed does not do.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError

__all__ = [
    "DATASET_SPECS",
    "ROW_NOTE",
    "ColumnBound",
    "DatasetSpec",
    "parties_preprocessing",
    "preprocessing_of",
    "scale_columns",
]

DECLARED = "declared public bounds"
#: What the horizontal protocols do to every row before training (``before_training``).
ROW_NOTE = "every row divided by its own l2 norm (row-local)"
_TABLE = "dpfed.data.specs.DATASET_SPECS"


@dataclass(frozen=True)
class ColumnBound:
    """The declared public range of one column.

    Attributes
    ----------
    column : str
        Column name, as the reader names it.
    lo, hi : float
        The range, ``lo < hi``; values outside are clipped to it.
    basis : str
        Where the range comes from.
    """

    column: str
    lo: float
    hi: float
    basis: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise DpfedInputError(
                f"the bounds of column {self.column!r} must be finite with lo < hi. "
                f"Found [{self.lo!r}, {self.hi!r}]."
            )


@dataclass(frozen=True)
class DatasetSpec:
    """The declared preprocessing constants of one named data set.

    Attributes
    ----------
    name : str
        Registry name.
    columns : tuple of ColumnBound
        The bounded feature columns, in the reader's column order (Adult: its continuous
        attributes only; the indicator columns need no bounds).
    output : tuple of float
        ``(a, b)``: the range every bounded column is mapped to (``[lo, hi] -> [a, b]``).
    documentation : str
        Where the attributes and their coding are documented.
    target : ColumnBound or None
        The target's range (regression sets), mapped like the features.
    row_norm : float or None
        A public bound on every row's norm after the column scaling; rows are divided by it.
    categories : mapping of str to tuple of str
        Documented category lists of the categorical attributes (Adult).
    notes : tuple of str
        Further rules of the preprocessing, for the record.
    """

    name: str
    columns: tuple[ColumnBound, ...]
    output: tuple[float, float]
    documentation: str
    target: ColumnBound | None = None
    row_norm: float | None = None
    categories: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        """Names of the bounded feature columns."""
        return tuple(b.column for b in self.columns)

    @property
    def lower(self) -> np.ndarray:
        """Lower bounds of the feature columns, shape (n_columns,)."""
        return np.array([b.lo for b in self.columns], dtype=np.float64)

    @property
    def upper(self) -> np.ndarray:
        """Upper bounds of the feature columns, shape (n_columns,)."""
        return np.array([b.hi for b in self.columns], dtype=np.float64)

    def scale(self, X: np.ndarray) -> np.ndarray:
        """The feature columns ``X`` (n, n_columns) clipped and mapped onto :attr:`output`."""
        return scale_columns(X, self.lower, self.upper, self.output)

    def record(self, **extra: Any) -> dict[str, Any]:
        """The JSON-able description of this preprocessing (``Dataset.preprocessing``)."""
        out: dict[str, Any] = {
            "scaling": DECLARED,
            "bounds": self.documentation,
            "table": f"{_TABLE}[{self.name!r}]",
            "output_range": list(self.output),
            "clipping": "values outside a column's bounds are clipped to them",
            "columns": {b.column: [b.lo, b.hi] for b in self.columns},
        }
        if self.target is not None:
            out["target"] = {self.target.column: [self.target.lo, self.target.hi]}
        if self.row_norm is not None:
            out["row_scaling"] = (
                f"every row divided by {self.row_norm:.6g}, a public bound on its norm, then "
                "clipped to norm <= 1"
            )
        if self.notes:
            out["notes"] = list(self.notes)
        return out | extra


def scale_columns(
    X: np.ndarray,
    lower: Sequence[float] | np.ndarray,
    upper: Sequence[float] | np.ndarray,
    output: tuple[float, float] = (0.0, 1.0),
) -> np.ndarray:
    r"""Clip every column to declared bounds and map the bounds onto ``output``.

    Column :math:`j` becomes :math:`a + (b - a)\,(\mathrm{clip}(x, l_j, u_j) - l_j) / (u_j - l_j)`
    with ``output = (a, b)``: it uses the declared constants only, so every row is scaled on
    its own.

    Parameters
    ----------
    X : numpy.ndarray, shape (n_samples, n_columns)
        Finite values.
    lower, upper : sequence of float, shape (n_columns,)
        Declared bounds, ``lower < upper``.
    output : tuple of float, default (0.0, 1.0)
        ``(a, b)`` with ``a < b``.

    Returns
    -------
    numpy.ndarray, shape (n_samples, n_columns)
        A new float64 array with every value in ``[a, b]``.

    Raises
    ------
    DpfedInputError
        If the shapes disagree, a value is not finite, or a bound is not ``lower < upper``.
    """
    X = np.array(X, dtype=np.float64, copy=True)
    lo = np.asarray(lower, dtype=np.float64).reshape(-1)
    hi = np.asarray(upper, dtype=np.float64).reshape(-1)
    if X.ndim != 2 or lo.shape != (X.shape[1],) or hi.shape != lo.shape:
        raise DpfedInputError(
            "X must be a 2-D array with one lower and one upper bound per column. Found X of "
            f"shape {X.shape}, {lo.size} lower and {hi.size} upper bounds."
        )
    if not np.all(np.isfinite(X)):
        raise DpfedInputError("X must hold finite values only. Found NaN or infinity.")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
        k = int(np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi) & (lo < hi)))[0])
        raise DpfedInputError(
            f"every column's bounds must be finite with lower < upper. Found [{lo[k]}, "
            f"{hi[k]}] for column {k}."
        )
    a, b = (float(v) for v in output)
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise DpfedInputError(f"output must be a range (a, b) with a < b. Found {output!r}.")
    np.clip(X, lo, hi, out=X)
    X -= lo
    X *= (b - a) / (hi - lo)
    X += a
    # a + (b - a) * 1 may round past b by an ulp
    return np.clip(X, a, b, out=X)


# -- the table ------------------------------------------------------------------------------

_ADULT_DOC = (
    "UCI Adult (adult.names, Kohavi and Becker 1996: attribute codings and category lists, "
    "extraction rule AAGE>16 && AGI>100 && AFNLWGT>1 && HRSWK>0) and the public-use CPS "
    "top-codes"
)

#: Category lists of the 8 categorical Adult attributes, as documented in ``adult.names``.
ADULT_CATEGORIES: dict[str, tuple[str, ...]] = {
    "workclass": (
        "Private",
        "Self-emp-not-inc",
        "Self-emp-inc",
        "Federal-gov",
        "Local-gov",
        "State-gov",
        "Without-pay",
        "Never-worked",
    ),
    "education": (
        "Bachelors",
        "Some-college",
        "11th",
        "HS-grad",
        "Prof-school",
        "Assoc-acdm",
        "Assoc-voc",
        "9th",
        "7th-8th",
        "12th",
        "Masters",
        "1st-4th",
        "10th",
        "Doctorate",
        "5th-6th",
        "Preschool",
    ),
    "marital-status": (
        "Married-civ-spouse",
        "Divorced",
        "Never-married",
        "Separated",
        "Widowed",
        "Married-spouse-absent",
        "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support",
        "Craft-repair",
        "Other-service",
        "Sales",
        "Exec-managerial",
        "Prof-specialty",
        "Handlers-cleaners",
        "Machine-op-inspct",
        "Adm-clerical",
        "Farming-fishing",
        "Transport-moving",
        "Priv-house-serv",
        "Protective-serv",
        "Armed-Forces",
    ),
    "relationship": (
        "Wife",
        "Own-child",
        "Husband",
        "Not-in-family",
        "Other-relative",
        "Unmarried",
    ),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native-country": (
        "United-States",
        "Cambodia",
        "England",
        "Puerto-Rico",
        "Canada",
        "Germany",
        "Outlying-US(Guam-USVI-etc)",
        "India",
        "Japan",
        "Greece",
        "South",
        "China",
        "Cuba",
        "Iran",
        "Honduras",
        "Philippines",
        "Italy",
        "Poland",
        "Jamaica",
        "Vietnam",
        "Mexico",
        "Portugal",
        "Ireland",
        "France",
        "Dominican-Republic",
        "Laos",
        "Ecuador",
        "Taiwan",
        "Haiti",
        "Columbia",
        "Hungary",
        "Guatemala",
        "Nicaragua",
        "Scotland",
        "Thailand",
        "Yugoslavia",
        "El-Salvador",
        "Trinadad&Tobago",
        "Peru",
        "Hong",
        "Holand-Netherlands",
    ),
}

_ADULT = DatasetSpec(
    name="adult",
    columns=(
        ColumnBound(
            "age",
            17.0,
            90.0,
            "adult.names: rows were extracted with AAGE>16 (age >= 17); the public-use "
            "CPS files of 1988-2001 top-code age at 90",
        ),
        ColumnBound(
            "fnlwgt",
            0.0,
            1e7,
            "adult.names: a CPS sampling weight (AFNLWGT>1) with no documented cap; "
            "declared cap 10,000,000, deliberately generous",
        ),
        ColumnBound(
            "education-num",
            1.0,
            16.0,
            "adult.names: numeric code of the 16 education levels (1 = Preschool, 16 = Doctorate)",
        ),
        ColumnBound(
            "capital-gain",
            0.0,
            99999.0,
            "non-negative dollars, top-coded at 99999 in the census income data",
        ),
        ColumnBound(
            "capital-loss",
            0.0,
            99999.0,
            "non-negative dollars; no separate cap documented, declared the same "
            "5-digit top-code as capital-gain",
        ),
        ColumnBound(
            "hours-per-week",
            1.0,
            99.0,
            "adult.names: extracted with HRSWK>0 (>= 1 hour); the CPS top-codes usual "
            "weekly hours at 99",
        ),
    ),
    output=(0.0, 1.0),
    documentation=_ADULT_DOC,
    # 6 continuous columns in [0, 1] and 8 one-hot blocks with at most one 1 each
    row_norm=math.sqrt(14.0),
    categories=ADULT_CATEGORIES,
    notes=(
        "categorical attributes one-hot on the category lists of adult.names (in sorted "
        "order); '?' and values not in those lists encode to all zeros",
        "row norm bound sqrt(14): 6 continuous columns in [0, 1] plus 8 categorical "
        "attributes with at most one indicator each",
    ),
)

_BC_DOC = (
    "scikit-learn's Wisconsin Diagnostic Breast Cancer (UCI wdbc.names, Street, Wolberg and "
    "Mangasarian 1993): feature definitions; size bounds declared for the digitised images"
)

#: The 10 nuclear measures of the breast cancer data: (name, lo, hi, basis). Every image
#: reports a measure's mean, its standard error and its "worst" value (the mean of the three
#: largest), giving 30 columns.
_BC_RADIUS = 50.0
_BC_MEASURES: tuple[tuple[str, float, float, str], ...] = (
    (
        "radius",
        0.0,
        _BC_RADIUS,
        "mean distance from the centre to the contour, in pixels; declared cap: a nucleus "
        "radius below 50 pixels in the study's digitised images",
    ),
    (
        "texture",
        0.0,
        127.5,
        "standard deviation of grey levels, at most half the 0-255 range of 8-bit grey levels",
    ),
    (
        "perimeter",
        0.0,
        4.0 * math.pi * _BC_RADIUS,
        "contour length in pixels: twice the circumference of the largest declared nucleus "
        "(compactness <= 3 below)",
    ),
    (
        "area",
        0.0,
        math.pi * _BC_RADIUS**2,
        "pixels inside the contour: the disc of the largest declared radius",
    ),
    (
        "smoothness",
        0.0,
        1.0,
        "local variation of radius lengths relative to the radius: declared [0, 1]",
    ),
    (
        "compactness",
        0.0,
        3.0,
        "perimeter^2 / area - 1, normalised to 0 for a circle (isoperimetric inequality: >= 0); "
        "declared cap 3, a contour twice as long as the circle of the same area",
    ),
    (
        "concavity",
        0.0,
        2.0,
        "depth of the concave portions relative to the radius: declared cap 2 (a nucleus' "
        "diameter)",
    ),
    ("concave points", 0.0, 1.0, "concave portions as a fraction of the contour points: [0, 1]"),
    (
        "symmetry",
        0.0,
        1.0,
        "relative length difference of chords on either side of the major axis: [0, 1]",
    ),
    (
        "fractal dimension",
        0.0,
        1.0,
        "'coastline approximation' - 1: a plane curve's dimension lies in [1, 2]",
    ),
)


def _breast_cancer_columns() -> tuple[ColumnBound, ...]:
    mean = [ColumnBound(f"mean {m}", lo, hi, basis) for m, lo, hi, basis in _BC_MEASURES]
    error = [
        ColumnBound(
            f"{m} error",
            0.0,
            (hi - lo) / 2.0,
            f"standard error of the {m} of an image's nuclei: at most half the "
            f"measure's range [{lo:g}, {hi:g}] (the largest standard deviation of "
            "values in a range)",
        )
        for m, lo, hi, _ in _BC_MEASURES
    ]
    worst = [
        ColumnBound(f"worst {m}", lo, hi, f"mean of the three largest {m} values: {basis}")
        for m, lo, hi, basis in _BC_MEASURES
    ]
    return (*mean, *error, *worst)


_BREAST_CANCER = DatasetSpec(
    name="breast_cancer",
    columns=_breast_cancer_columns(),
    output=(-1.0, 1.0),
    documentation=_BC_DOC,
    notes=(
        "every column mapped to [-1, 1], the midpoint of its declared range to 0 (the papers' "
        "models have no intercept)",
    ),
)

_WINE_DOC = (
    "UCI Wine Quality (Cortez et al., Decision Support Systems 47(4), 2009: units of the 11 "
    "inputs, quality on a 0-10 scale), EU/OIV oenological limits and physical limits"
)
_WINE_COLUMNS: tuple[ColumnBound, ...] = (
    ColumnBound(
        "fixed acidity", 0.0, 20.0, "g(tartaric acid)/dm3; wines hold a few g/dm3, declared cap 20"
    ),
    ColumnBound(
        "volatile acidity",
        0.0,
        2.0,
        "g(acetic acid)/dm3; the EU maximum is 20 meq/l (1.2 g/dm3) for red wine, declared cap 2",
    ),
    ColumnBound(
        "citric acid", 0.0, 2.0, "g/dm3; the EU maximum content is 1 g/dm3, declared cap 2"
    ),
    ColumnBound(
        "residual sugar",
        0.0,
        100.0,
        "g/dm3; twice the EU 'sweet' threshold (45 g/dm3), declared cap 100",
    ),
    ColumnBound(
        "chlorides", 0.0, 1.0, "g(sodium chloride)/dm3; declared cap 1, the order of the OIV limit"
    ),
    ColumnBound("free sulfur dioxide", 0.0, 500.0, "mg/dm3; at most the total sulfur dioxide"),
    ColumnBound(
        "total sulfur dioxide",
        0.0,
        500.0,
        "mg/dm3; EU maxima are 150-400 mg/dm3 by wine type, declared cap 500",
    ),
    ColumnBound(
        "density",
        0.9,
        1.1,
        "g/cm3; between strong water-ethanol mixtures (ethanol 0.79) and sugar-rich "
        "musts, declared [0.9, 1.1]",
    ),
    ColumnBound("pH", 2.0, 5.0, "wine is acidic: declared [2, 5]"),
    ColumnBound(
        "sulphates",
        0.0,
        3.0,
        "g(potassium sulphate)/dm3; OIV limits are 1-2 g/dm3 by wine type, declared cap 3",
    ),
    ColumnBound(
        "alcohol",
        0.0,
        20.0,
        "% vol.; EU wine is at most 15 % vol. (20 % by derogation), declared [0, 20]",
    ),
)
_WINE_TARGET = ColumnBound(
    "quality", 0.0, 10.0, "sensory score on the documented 0-10 scale (Cortez et al. 2009)"
)

_REGRESSION_NOTE = (
    "every column (features and target) centred at the midpoint of its declared range and "
    "scaled to a range of length 10, so every scaled value lies in [-5, 5] and the assumed "
    "bounds +-7.5 of the DP Bayesian linear regression hold by construction"
)

_ABALONE_DOC = (
    "UCI Abalone (abalone.names, Nash et al. 1994: lengths in mm and weights in grams, both "
    "divided by 200 in the file; sex M/F/I; age = Rings + 1.5 years)"
)
_ABALONE_COLUMNS: tuple[ColumnBound, ...] = (
    *(
        ColumnBound(f"Sex={s}", 0.0, 1.0, "one-hot indicator of the documented sex code")
        for s in ("M", "F", "I")
    ),
    ColumnBound(
        "Length",
        0.0,
        1.0,
        "longest shell measurement in mm / 200 (abalone.names); declared: shells "
        "shorter than 200 mm",
    ),
    ColumnBound(
        "Diameter", 0.0, 1.0, "mm / 200, perpendicular to the length, so at most the length"
    ),
    ColumnBound("Height", 0.0, 1.0, "mm / 200 with meat in shell; declared at most 200 mm"),
    ColumnBound(
        "Whole weight", 0.0, 10.0, "grams / 200; declared cap 2 kg for an abalone under 200 mm"
    ),
    ColumnBound("Shucked weight", 0.0, 10.0, "grams / 200, part of the whole weight"),
    ColumnBound("Viscera weight", 0.0, 10.0, "grams / 200, part of the whole weight"),
    ColumnBound("Shell weight", 0.0, 10.0, "grams / 200 after drying, part of the whole weight"),
)
_ABALONE_TARGET = ColumnBound("Rings", 0.0, 40.0, "growth rings (age - 1.5 years); declared cap 40")

#: Name -> declared public bounds and output range of every named data set that is scaled.
DATASET_SPECS: dict[str, DatasetSpec] = {
    "adult": _ADULT,
    "breast_cancer": _BREAST_CANCER,
    "wine-red": DatasetSpec(
        "wine-red",
        _WINE_COLUMNS,
        (-5.0, 5.0),
        _WINE_DOC,
        target=_WINE_TARGET,
        notes=(_REGRESSION_NOTE,),
    ),
    "wine-white": DatasetSpec(
        "wine-white",
        _WINE_COLUMNS,
        (-5.0, 5.0),
        _WINE_DOC,
        target=_WINE_TARGET,
        notes=(_REGRESSION_NOTE,),
    ),
    "abalone": DatasetSpec(
        "abalone",
        _ABALONE_COLUMNS,
        (-5.0, 5.0),
        _ABALONE_DOC,
        target=_ABALONE_TARGET,
        notes=(_REGRESSION_NOTE,),
    ),
}

#: Named sets used as published (no scaling by dpfed), and what "as published" means.
AS_PUBLISHED: dict[str, str] = {
    "a9a": "LIBSVM a9a as published: 123 binary indicators (Platt's quantisation of UCI Adult, "
    "fixed before publication; dpfed computes nothing from the rows)",
    "arcene": "NIPS 2003 challenge features as published (integers 0-999)",
    "dexter": "NIPS 2003 challenge features as published (word counts)",
    "gisette": "NIPS 2003 challenge features as published (integers 0-999)",
    "madelon": "NIPS 2003 challenge features as published (integers 0-999)",
}

_RAW_REGRESSION = (
    "raw values as read (load_dataset); dpfed train bayes-linreg and the reproduction scale "
    "them by the declared public bounds of {table}[{name!r}]"
)
_AS_GIVEN = (
    "rows used as given: scale them by public constants before (or account for any scaling "
    "fitted on the data); the protocols bound each row's norm on their own"
)


def preprocessing_of(name_or_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Which preprocessing :func:`dpfed.data.load_dataset` applies to a data set.

    Needs no data files: the description depends on the name only.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        A registry name (a string, as :func:`~dpfed.data.load_dataset` takes it) or the path
        of a LIBSVM file (a path object is always a file).

    Returns
    -------
    dict
        JSON-able: ``scaling`` (``"declared public bounds"``, ``"as published"`` or
        ``"none"``) and where the constants come from (``bounds``, ``table``, ``columns``,
        ...), or a ``note``.
    """
    if not isinstance(name_or_path, str):
        return {"scaling": "none", "note": _AS_GIVEN}
    key = name_or_path
    if key in ("wine-red", "wine-white", "abalone"):
        return {"scaling": "none", "note": _RAW_REGRESSION.format(table=_TABLE, name=key)}
    if key in DATASET_SPECS:
        return DATASET_SPECS[key].record()
    if key in AS_PUBLISHED:
        return {"scaling": "as published", "note": AS_PUBLISHED[key]}
    return {"scaling": "none", "note": _AS_GIVEN}


def parties_preprocessing(parties: Iterable[Any]) -> dict[str, Any]:
    """The ``preprocessing`` of a networked job's result, from its parties' ``data`` names.

    Parameters
    ----------
    parties : iterable
        Objects with ``name``, ``data`` and ``role`` (a job file's parties); parties with a
        role (a consensus server, secure-sum compute nodes) hold no training rows and are
        left out.

    Returns
    -------
    dict
        :func:`preprocessing_of` of the data set every data-holding party names, or
        ``{"scaling": "per party", "parties": {name: ...}}`` when they name different ones.
    """
    holders = [(p.name, p.data) for p in parties if not getattr(p, "role", "")]
    names = {data for _, data in holders}
    if len(names) == 1:
        return preprocessing_of(names.pop())
    return {
        "scaling": "per party",
        "parties": {name: preprocessing_of(data) for name, data in holders},
    }
