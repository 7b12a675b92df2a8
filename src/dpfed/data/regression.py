r"""Regression data sets (Wine Quality red and white, Abalone), their scaling and random splits.

The DP Bayesian linear regression experiments of Heikkilä et al. (NeurIPS 2017) use three UCI
regression sets. Each is read into a :class:`RegressionData` (raw values), scaled with
:func:`scale_to_range` to the paper's range of length 10 by declared public bounds, and split
per run with :func:`random_split`:

* ``wine-red``: ``wine_quality/winequality-red.csv``, 1,599 rows, 11 features, 500 test rows;
* ``wine-white``: ``wine_quality/winequality-white.csv``, 4,898 rows, 11 features, 1,000 test
  rows;
* ``abalone``: ``abalone/abalone.data``, 4,177 rows, 10 features (sex one-hot), 1,000 test
  rows.

Scaling by declared public bounds
---------------------------------
The paper scales "each data dimension to have a range of length 10" and assumes the data to
be zero-centred; its released code subtracts the column mean and divides by the column range
(max - min) of the whole data set, constants computed from every row, which the differentially
private algorithm does not protect (changing one record would change every other record's
scaled values). :func:`scale_to_range` uses constants that read no row instead: every column
(features and target) has a declared public range ``[lo, hi]`` in
:data:`dpfed.data.specs.DATASET_SPECS`, taken from the data set's documentation and domain
limits (e.g. wine quality on its 0-10 scale; abalone lengths in mm / 200). Values are clipped
to the range, centred at its midpoint and scaled to length 10, so every scaled value lies in
[-5, 5] and the bounds +-7.5 the DP algorithm assumes hold by construction. Each row is scaled
on its own, so the DP guarantee of the learning step is a guarantee about the raw records.
Because the declared ranges are wider than the data, a scaled column spans less than 10 and is
not zero-centred (the model has no intercept); :func:`dpfed.protocols.bayes_linreg.fit_dp_linreg`
therefore
centres the rows by differentially private column means by default, released and accounted
with the rest of its budget (:mod:`dpfed.protocols.bayes_linreg.centring`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dpfed._validation import DpfedInputError, check_positive
from dpfed.data.abalone import read_abalone
from dpfed.data.dataset import require_files, resolve_data_dir
from dpfed.data.specs import DATASET_SPECS, scale_columns
from dpfed.data.tabular import RegressionData
from dpfed.data.wine import read_wine

__all__ = [
    "REGRESSION_DATASETS",
    "RegressionData",
    "Scaling",
    "load_regression_dataset",
    "random_split",
    "scale_to_range",
]


@dataclass(frozen=True)
class _Entry:
    files: tuple[str, ...]
    test_size: int
    description: str


#: Name -> files, the paper's test-set size and a description.
REGRESSION_DATASETS: dict[str, _Entry] = {
    "wine-red": _Entry(
        ("wine_quality/winequality-red.csv",),
        500,
        "UCI Wine Quality, red: 1,599 rows, 11 physico-chemical inputs, target quality "
        "(file wine_quality/winequality-red.csv)",
    ),
    "wine-white": _Entry(
        ("wine_quality/winequality-white.csv",),
        1000,
        "UCI Wine Quality, white: 4,898 rows, 11 physico-chemical inputs, target quality "
        "(file wine_quality/winequality-white.csv)",
    ),
    "abalone": _Entry(
        ("abalone/abalone.data",),
        1000,
        "UCI Abalone: 4,177 rows, sex one-hot (M, F, I) + 7 measurements, target Rings "
        "(file abalone/abalone.data)",
    ),
}


@dataclass(frozen=True, eq=False)
class Scaling:
    r"""The affine map of :func:`scale_to_range`: ``scaled = (clip(raw) - offset) * factor``.

    Attributes
    ----------
    offset_X : numpy.ndarray, shape (n_features,)
        Midpoints of the declared feature ranges.
    factor_X : numpy.ndarray, shape (n_features,)
        ``length / (hi - lo)`` per column.
    offset_y, factor_y : float
        The same for the target.
    length : float
        Length of every declared range after scaling (10 in the paper).
    center : str
        What ``offset`` is: ``"midpoint of the declared bounds"``.
    notes : tuple of str
        How the constants were chosen (declared public bounds, no statistic of the rows).
    lower, upper : numpy.ndarray or None, shape (n_features + 1,)
        The declared bounds of the features, then the target (values are clipped to them).
    """

    offset_X: np.ndarray
    factor_X: np.ndarray
    offset_y: float
    factor_y: float
    length: float
    center: str
    notes: tuple[str, ...] = field(default=())
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None

    def target_to_raw_scale(self, value: float) -> float:
        """A distance on the scaled target (e.g. an MAE) in the target's original units."""
        return float(value) / self.factor_y if self.factor_y > 0 else float("nan")


def _declared_bounds(
    data: RegressionData,
    bounds: Sequence[tuple[float, float]] | None,
    target_bounds: tuple[float, float] | None,
) -> tuple[list[tuple[float, ...]], str, dict | None]:
    """The declared ``(lo, hi)`` of every feature then the target, where they come from, and
    the data set's record of them (``None`` for bounds given by the caller)."""
    if (bounds is None) != (target_bounds is None):
        raise DpfedInputError(
            "bounds and target_bounds go together: give both (declared ranges of every "
            "feature and of the target) or neither (the declared bounds of the named data "
            f"set). Found bounds={bounds!r}, target_bounds={target_bounds!r}."
        )
    if bounds is None:
        spec = DATASET_SPECS.get(data.name)
        if spec is None or spec.target is None:
            known = ", ".join(k for k, v in DATASET_SPECS.items() if v.target is not None)
            raise DpfedInputError(
                f"no public bounds are declared for data set {data.name!r} (declared: "
                f"{known}). Pass bounds=[(lo, hi), ...] and target_bounds=(lo, hi) from the "
                "data's documentation or domain knowledge, never from the data themselves."
            )
        if spec.column_names != tuple(data.feature_names):
            raise DpfedInputError(
                f"the declared bounds of {data.name!r} are for the columns "
                f"{spec.column_names}. Found columns {tuple(data.feature_names)}."
            )
        pairs = [(b.lo, b.hi) for b in (*spec.columns, spec.target)]
        where = f"the declared public bounds of dpfed.data.specs.DATASET_SPECS[{data.name!r}]"
        record = spec.record()
    else:
        pairs = [*(tuple(b) for b in bounds), tuple(target_bounds)]
        where = "declared public bounds given by the caller"
        record = None
    if any(len(p) != 2 for p in pairs) or len(pairs) != data.n_features + 1:
        raise DpfedInputError(
            f"bounds must give one (lo, hi) pair per feature column ({data.n_features}) and "
            f"target_bounds one for the target. Found {len(pairs) - 1} feature bounds."
        )
    return pairs, where, record


def _preprocessing_record(
    data: RegressionData, lower: np.ndarray, upper: np.ndarray, record: dict | None, half: float
) -> dict:
    """The scaled data's ``preprocessing``: the bounds' record (the caller's bounds column
    by column when there is none) and the output range."""
    if record is None:
        record = {
            "scaling": "declared public bounds",
            "bounds": "given by the caller",
            "columns": dict(
                zip(
                    (*data.feature_names, data.target_name),
                    ([lo, hi] for lo, hi in zip(lower.tolist(), upper.tolist(), strict=True)),
                    strict=True,
                )
            ),
        }
    return record | {"output_range": [-half, half], "center": "midpoint of the declared bounds"}


def scale_to_range(
    data: RegressionData,
    *,
    length: float = 10.0,
    bounds: Sequence[tuple[float, float]] | None = None,
    target_bounds: tuple[float, float] | None = None,
) -> tuple[RegressionData, Scaling]:
    r"""Scale every column (features and target) by declared public bounds to a range of
    length ``length``, centred at the bounds' midpoint.

    For a column :math:`v` with declared range :math:`[l, u]`,

    .. math::

        v' = (\mathrm{clip}(v, l, u) - \tfrac12 (l + u)) \frac{L}{u - l},

    so every scaled value lies in :math:`[-L/2, L/2]` whatever the data. The constants do not
    depend on the rows: each row is scaled on its own, and changing one record changes no
    other row. This replaces the paper's whole-data mean and range, which a differentially
    private algorithm does not protect.

    Parameters
    ----------
    data : RegressionData
        Raw data, shapes ``X`` (n, d) and ``y`` (n,).
    length : float, default 10.0
        :math:`L > 0`.
    bounds : sequence of (float, float) or None, default None
        Declared ``(lo, hi)`` of every feature column. ``None`` with ``target_bounds=None``:
        the table :data:`dpfed.data.specs.DATASET_SPECS` entry named ``data.name`` (whose
        column names must match ``data.feature_names``).
    target_bounds : (float, float) or None, default None
        Declared ``(lo, hi)`` of the target; given together with ``bounds``.

    Returns
    -------
    scaled : RegressionData
        The same rows, scaled; ``source`` and ``preprocessing`` say how.
    scaling : Scaling
        The offsets and factors used, and the declared bounds.

    Raises
    ------
    DpfedInputError
        If ``length`` is not positive, the data are empty, only one of ``bounds`` and
        ``target_bounds`` is given, no bounds are declared for ``data.name``, or the bounds
        do not fit the columns (one ``lo < hi`` pair per column).
    """
    length = check_positive("length", length)
    if data.n_samples == 0:
        raise DpfedInputError(f"data set {data.name!r} holds no rows. Expected at least one.")
    pairs, where, record = _declared_bounds(data, bounds, target_bounds)
    lower = np.array([p[0] for p in pairs], dtype=np.float64)
    upper = np.array([p[1] for p in pairs], dtype=np.float64)
    half = length / 2.0
    full = np.column_stack([data.X, data.y])
    scaled = scale_columns(full, lower, upper, (-half, half))
    offset = 0.5 * (lower + upper)
    factor = length / (upper - lower)
    note = (
        f"every column is clipped to {where}, centred at the bounds' midpoint and scaled to a "
        f"range of length {length:g} (values in [{-half:g}, {half:g}]); no constant is "
        "computed from the rows, so each row is scaled on its own"
    )
    scaling = Scaling(
        offset_X=offset[:-1].copy(),
        factor_X=factor[:-1].copy(),
        offset_y=float(offset[-1]),
        factor_y=float(factor[-1]),
        length=length,
        center="midpoint of the declared bounds",
        notes=(note,),
        lower=lower,
        upper=upper,
    )
    out = RegressionData(
        name=data.name,
        X=np.ascontiguousarray(scaled[:, :-1]),
        y=np.ascontiguousarray(scaled[:, -1]),
        feature_names=data.feature_names,
        target_name=data.target_name,
        source=f"{data.source}; {note}",
        preprocessing=_preprocessing_record(data, lower, upper, record, half),
    )
    return out, scaling


def random_split(
    n: int, n_test: int, rng: np.random.Generator, *, n_train: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Draw disjoint random train and test row indices.

    Parameters
    ----------
    n : int
        Number of rows.
    n_test : int
        Number of test rows, ``0 < n_test < n``.
    rng : numpy.random.Generator
        Source of the permutation.
    n_train : int or None, default None
        Number of training rows (``None``: all rows not in the test set).

    Returns
    -------
    train_idx : numpy.ndarray of int, shape (n_train,)
        Sorted training row indices.
    test_idx : numpy.ndarray of int, shape (n_test,)
        Sorted test row indices.

    Raises
    ------
    DpfedInputError
        If the sizes do not fit in ``n`` rows.
    """
    if not isinstance(rng, np.random.Generator):
        raise DpfedInputError(f"rng must be a numpy.random.Generator. Found {rng!r}.")
    if not (isinstance(n_test, int | np.integer) and 0 < n_test < n):
        raise DpfedInputError(
            f"n_test must be an integer with 0 < n_test < {n} (the number of rows). "
            f"Found {n_test!r}."
        )
    rest = n - int(n_test)
    if n_train is None:
        n_train = rest
    if not (isinstance(n_train, int | np.integer) and 0 < n_train <= rest):
        raise DpfedInputError(
            f"n_train must be an integer with 0 < n_train <= {rest} (rows left after the "
            f"{n_test} test rows). Found {n_train!r}."
        )
    order = rng.permutation(n)
    test_idx = np.sort(order[: int(n_test)])
    train_idx = np.sort(order[int(n_test) : int(n_test) + int(n_train)])
    return train_idx, test_idx


def load_regression_dataset(
    name: str, data_dir: str | os.PathLike[str] | None = None
) -> RegressionData:
    """Read one of :data:`REGRESSION_DATASETS` (raw, unscaled).

    Parameters
    ----------
    name : {"wine-red", "wine-white", "abalone"}
    data_dir : str or os.PathLike or None, default None
        Folder holding ``wine_quality/`` and ``abalone/`` (``None``: the ``DPFED_DATA``
        environment variable).

    Returns
    -------
    RegressionData
        See :func:`dpfed.data.wine.read_wine` and :func:`dpfed.data.abalone.read_abalone`.

    Raises
    ------
    DpfedInputError
        If the name is unknown, no data folder is given, or a file is missing or malformed.
    """
    if name not in REGRESSION_DATASETS:
        known = ", ".join(REGRESSION_DATASETS)
        raise DpfedInputError(f"unknown regression data set {name!r}. Expected one of {known}.")
    base = resolve_data_dir(name, data_dir)
    files = [base / rel for rel in REGRESSION_DATASETS[name].files]
    require_files(name, files)
    if name == "abalone":
        return read_abalone(files[0])
    return read_wine(files[0], name=name)
