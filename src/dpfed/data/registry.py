"""Named benchmark data sets and LIBSVM files behind one entry point, :func:`load_dataset`.

Named sets other than ``breast_cancer`` are read from a data folder given by the
``data_dir`` argument (``--data-dir`` on the command line) or the ``DPFED_DATA``
environment variable, laid out as ``{data_dir}/{name}/...`` (see :data:`KNOWN_DATASETS`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_binary_labels
from dpfed.data.adult import read_adult
from dpfed.data.dataset import (
    ENV_VAR,
    REGRESSION_FILES,
    Dataset,
    require_files,
    resolve_data_dir,
)
from dpfed.data.libsvm import read_libsvm
from dpfed.data.nips2003 import read_nips2003
from dpfed.data.regression import load_regression_dataset
from dpfed.data.specs import DATASET_SPECS, preprocessing_of

#: Name -> short description of every data set :func:`load_dataset` knows by name.
KNOWN_DATASETS: dict[str, str] = {
    "a9a": "UCI Adult as LIBSVM a9a: 32,561 train / 16,281 test rows, 123 binary features "
    "(files a9a/a9a, a9a/a9a.t)",
    "adult": "UCI Adult (Census Income): 32,561 train / 16,281 test rows, 105 dense columns "
    "(6 continuous scaled to [0, 1] by declared public bounds, 8 categorical one-hot on the "
    "documented categories), rows of norm <= 1 (files adult/adult.data, adult/adult.test)",
    "arcene": "NIPS 2003 Arcene, mass spectrometry: 100 train / 100 valid rows, 10,000 "
    "features (files arcene/arcene_{train,valid}.{data,labels})",
    "breast_cancer": "scikit-learn's Wisconsin breast cancer: 569 rows, 30 features, "
    "stratified 70/30 split, scaled to [-1, 1] by declared public bounds (no files needed)",
    "dexter": "NIPS 2003 Dexter, bag of words: 300 train rows split 200/100, 20,000 sparse "
    "features (files dexter/dexter_train.{data,labels})",
    "gisette": "NIPS 2003 Gisette, digits 4 vs 9: 6,000 train / 1,000 valid rows, 5,000 "
    "features (files gisette/gisette_{train,valid}.{data,labels})",
    "madelon": "NIPS 2003 Madelon, synthetic: 2,000 train / 600 valid rows, 500 features "
    "(files madelon/madelon_{train,valid}.{data,labels})",
    "wine-red": "UCI Wine Quality, red: 1,599 rows, 11 inputs, real target quality, unscaled "
    "and unsplit (file wine_quality/winequality-red.csv)",
    "wine-white": "UCI Wine Quality, white: 4,898 rows, 11 inputs, real target quality, "
    "unscaled and unsplit (file wine_quality/winequality-white.csv)",
    "abalone": "UCI Abalone: 4,177 rows, sex one-hot + 7 measurements, real target Rings, "
    "unscaled and unsplit (file abalone/abalone.data)",
}

_A9A_FEATURES = 123
_DEXTER_TEST = 100
_BREAST_CANCER_TEST_FRACTION = 0.3
_SEED = 0


def load_dataset(
    name_or_path: str | os.PathLike[str],
    data_dir: str | os.PathLike[str] | None = None,
    test: str | os.PathLike[str] | None = None,
) -> Dataset:
    """Load a named benchmark data set or a LIBSVM file.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        A key of :data:`KNOWN_DATASETS`, or the path of a LIBSVM training file (a known
        name wins over a file of the same name in the working directory).
    data_dir : str or os.PathLike or None, default None
        Folder holding the named sets (``{data_dir}/a9a/a9a``, ``{data_dir}/madelon/...``).
        ``None`` uses the ``DPFED_DATA`` environment variable. A relative path is taken
        relative to the current working directory. Not needed for ``breast_cancer`` or a file.
    test : str or os.PathLike or None, default None
        Optional LIBSVM test file; only with a file path as ``name_or_path``.

    Returns
    -------
    Dataset
        * ``a9a``: both official files, 123 columns each (CSR), labels in {-1, 1}.
        * ``adult``: both official UCI files, 105 dense columns scaled by declared public
          bounds, every row of norm <= 1, labels in {-1, 1} (see
          :func:`dpfed.data.adult.read_adult`).
        * ``arcene``, ``gisette``, ``madelon``: ``train`` as train and ``valid`` as test
          (dense).
        * ``dexter``: its 300 training rows, split stratified 200 train / 100 test with
          ``numpy.random.default_rng(0)`` (CSR, 20,000 columns).
        * ``breast_cancer``: stratified 70/30 split with ``numpy.random.default_rng(0)``,
          every column clipped to its declared public bounds and mapped to [-1, 1]
          (:data:`dpfed.data.specs.DATASET_SPECS`), labels in {-1, 1} (malignant -1,
          benign 1).
        * ``wine-red``, ``wine-white``, ``abalone``: regression sets, every row as
          ``X_train`` (dense, raw values) and the real target as ``y_train``; no test part.
          They are split per run and scaled by :mod:`dpfed.data.regression`
          (:func:`~dpfed.data.regression.load_regression_dataset` returns the same rows as a
          :class:`~dpfed.data.regression.RegressionData`).
        * a LIBSVM file: CSR, train and test padded to the larger column count of the two,
          labels as written.

        Every result's ``preprocessing`` says which scaling it had (no constant of any of
        them is computed from the rows: each row is preprocessed on its own).

    Raises
    ------
    DpfedInputError
        If the name is unknown and not an existing file, the data folder is needed but not
        given, or a file is missing or malformed.
    """
    if not isinstance(name_or_path, str | os.PathLike):
        raise DpfedInputError(
            f"name_or_path must be a data set name or a file path. Found {name_or_path!r}."
        )
    key = os.fspath(name_or_path)
    if key in KNOWN_DATASETS:
        if test is not None:
            raise DpfedInputError(
                f"test is only used with a LIBSVM train file; the data set {key!r} brings its "
                f"own test part. Found test={os.fspath(test)!r}."
            )
        if key == "breast_cancer":
            return _load_breast_cancer()
        base = resolve_data_dir(key, data_dir)
        if key == "a9a":
            return _load_a9a(base)
        if key == "adult":
            return _load_adult(base)
        if key == "dexter":
            return _load_dexter(base)
        if key in REGRESSION_FILES:
            return _load_regression(key, base)
        return _load_nips_train_valid(key, base)
    path = Path(key).expanduser()
    if path.is_file():
        return _load_libsvm_pair(path, test)
    known = ", ".join(sorted(KNOWN_DATASETS))
    why = "is a folder, not a file" if path.is_dir() else "is not an existing file"
    raise DpfedInputError(
        f"unknown data set {key!r}: it is not a known name and {why}. Expected one of "
        f"{known} (all but breast_cancer read from the folder given by --data-dir or the "
        f"{ENV_VAR} environment variable), or the path of a LIBSVM file."
    )


def _load_a9a(base: Path) -> Dataset:
    train, test = base / "a9a" / "a9a", base / "a9a" / "a9a.t"
    require_files("a9a", [train, test])
    X_train, y_train = read_libsvm(train, n_features=_A9A_FEATURES)
    X_test, y_test = read_libsvm(test, n_features=_A9A_FEATURES)
    return Dataset(
        name="a9a",
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        source=f"LIBSVM a9a: train {train}, test {test}",
        preprocessing=preprocessing_of("a9a"),
    )


def _load_adult(base: Path) -> Dataset:
    train, test = base / "adult" / "adult.data", base / "adult" / "adult.test"
    require_files("adult", [train, test])
    return read_adult(train, test)


def _load_regression(name: str, base: Path) -> Dataset:
    data = load_regression_dataset(name, base)
    return Dataset(
        name=name,
        X_train=data.X,
        y_train=data.y,
        X_test=None,
        y_test=None,
        source=f"{data.source}; unscaled, no test part (see dpfed.data.regression)",
        preprocessing=preprocessing_of(name),
    )


def _load_nips_train_valid(name: str, base: Path) -> Dataset:
    folder = base / name
    files = [
        folder / f"{name}_{split}.{ext}"
        for split in ("train", "valid")
        for ext in ("data", "labels")
    ]
    require_files(name, files)
    X_train, y_train = read_nips2003(folder, name, "train")
    X_test, y_test = read_nips2003(folder, name, "valid")
    if X_train.shape[1] != X_test.shape[1]:
        raise DpfedInputError(
            f"the train and valid files of {name!r} in {str(folder)!r} must have the same "
            f"number of columns. Found {X_train.shape[1]} and {X_test.shape[1]}."
        )
    return Dataset(
        name=name,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        source=f"NIPS 2003 {name}: train and valid splits from {folder}",
        preprocessing=preprocessing_of(name),
    )


def _load_dexter(base: Path) -> Dataset:
    folder = base / "dexter"
    require_files("dexter", [folder / "dexter_train.data", folder / "dexter_train.labels"])
    X, y = read_nips2003(folder, "dexter", "train")
    if X.shape[0] <= _DEXTER_TEST:
        raise DpfedInputError(
            f"dexter_train in {str(folder)!r} must hold more than {_DEXTER_TEST} rows to "
            f"split off {_DEXTER_TEST} test rows. Found {X.shape[0]}."
        )
    train_idx, test_idx = stratified_split(y, _DEXTER_TEST, np.random.default_rng(_SEED))
    return Dataset(
        name="dexter",
        X_train=X[train_idx],
        y_train=y[train_idx],
        X_test=X[test_idx],
        y_test=y[test_idx],
        source=(
            f"NIPS 2003 dexter: train split from {folder}, divided stratified into "
            f"{train_idx.size} train / {test_idx.size} test rows (default_rng({_SEED}))"
        ),
        preprocessing=preprocessing_of("dexter"),
    )


def _load_breast_cancer() -> Dataset:
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    X = np.asarray(bunch.data, dtype=np.float64)
    y = check_binary_labels("breast_cancer target", bunch.target)
    n_test = round(_BREAST_CANCER_TEST_FRACTION * y.size)
    train_idx, test_idx = stratified_split(y, n_test, np.random.default_rng(_SEED))
    spec = DATASET_SPECS["breast_cancer"]
    if tuple(bunch.feature_names) != spec.column_names:
        raise DpfedInputError(
            "scikit-learn's breast cancer features must be the 30 columns of the declared "
            f"bounds {spec.column_names}. Found {tuple(bunch.feature_names)}."
        )
    return Dataset(
        name="breast_cancer",
        X_train=spec.scale(X[train_idx]),
        y_train=y[train_idx],
        X_test=spec.scale(X[test_idx]),
        y_test=y[test_idx],
        source=(
            "sklearn.datasets.load_breast_cancer: stratified "
            f"{train_idx.size} train / {test_idx.size} test rows (default_rng({_SEED})), "
            "every column clipped to its declared public bounds and mapped to [-1, 1]"
        ),
        preprocessing=spec.record(),
    )


def _load_libsvm_pair(train: Path, test: str | os.PathLike[str] | None) -> Dataset:
    X_train, y_train = read_libsvm(train)
    X_test = y_test = None
    source = f"LIBSVM file {os.path.abspath(train)}"
    if test is not None:
        test_path = Path(test).expanduser()
        if not test_path.is_file():
            raise DpfedInputError(
                f"test file {os.fspath(test)!r} does not exist. Expected an existing LIBSVM file."
            )
        X_test, y_test = read_libsvm(test_path)
        width = max(X_train.shape[1], X_test.shape[1])
        X_train, X_test = _pad_columns(X_train, width), _pad_columns(X_test, width)
        source += f", test {os.path.abspath(test_path)}"
    return Dataset(
        name=train.name,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        source=source,
        preprocessing=preprocessing_of(train),
    )


def _pad_columns(X: sp.csr_matrix, width: int) -> sp.csr_matrix:
    """``X`` with all-zero columns appended up to ``width`` columns."""
    if X.shape[1] == width:
        return X
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width))


def stratified_split(
    y: np.ndarray, n_test: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Split row indices into train and test, keeping class proportions.

    Each class gets its proportional share of ``n_test`` (largest remainders decide the
    rounding); the rows of a class are drawn with ``rng.permutation``.

    Parameters
    ----------
    y : numpy.ndarray, shape (n_samples,)
        Class labels.
    n_test : int
        Number of test rows, ``0 < n_test < n_samples``.
    rng : numpy.random.Generator
        Source of randomness (e.g. ``numpy.random.default_rng(0)`` for a fixed split).

    Returns
    -------
    train_idx : numpy.ndarray of int, shape (n_samples - n_test,)
        Sorted row indices of the train part.
    test_idx : numpy.ndarray of int, shape (n_test,)
        Sorted row indices of the test part.
    """
    y = np.asarray(y).reshape(-1)
    n = y.size
    if not (isinstance(n_test, int | np.integer) and 0 < n_test < n):
        raise DpfedInputError(
            f"n_test must be an integer with 0 < n_test < {n} (the number of rows). "
            f"Found {n_test!r}."
        )
    classes, inverse = np.unique(y, return_inverse=True)
    counts = np.bincount(inverse, minlength=classes.size)
    ideal = n_test * counts / n
    take = np.floor(ideal).astype(np.int64)
    short = n_test - int(take.sum())
    order = np.argsort(-(ideal - take), kind="stable")
    take[order[:short]] += 1
    test_parts = []
    for k in range(classes.size):
        rows = np.flatnonzero(inverse == k)
        test_parts.append(rng.permutation(rows)[: take[k]])
    test_idx = np.sort(np.concatenate(test_parts))
    mask = np.ones(n, dtype=bool)
    mask[test_idx] = False
    return np.flatnonzero(mask), test_idx
