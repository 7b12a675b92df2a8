"""A loaded data set, and where named data sets' files are found.

Named sets other than ``breast_cancer`` are read from a data folder given by the ``data_dir``
argument (``--data-dir`` on the command line) or the ``DPFED_DATA`` environment variable, laid
out as ``{data_dir}/{name}/...``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError

#: The environment variable naming the data folder.
ENV_VAR = "DPFED_DATA"

#: Regression sets -> the file they need (read by dpfed.data.wine / dpfed.data.abalone).
REGRESSION_FILES = {
    "wine-red": "wine_quality/winequality-red.csv",
    "wine-white": "wine_quality/winequality-white.csv",
    "abalone": "abalone/abalone.data",
}


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A data set with a train part and an optional test part.

    Attributes
    ----------
    name : str
        Registry name, or the train file's name for a LIBSVM file.
    X_train : numpy.ndarray or scipy.sparse.csr_matrix, shape (n_train, n_features)
        Training features, float64.
    y_train : numpy.ndarray, shape (n_train,)
        Training labels.
    X_test : numpy.ndarray or scipy.sparse.csr_matrix or None, shape (n_test, n_features)
        Test features, same kind and column count as ``X_train``; ``None`` if there is none.
    y_test : numpy.ndarray or None, shape (n_test,)
        Test labels; ``None`` if there is no test part.
    source : str
        Where the data came from (files, or the scikit-learn loader) and how it was split.
    preprocessing : dict
        JSON-able description of the scaling applied (:func:`dpfed.data.specs.preprocessing_of`):
        ``scaling`` is ``"declared public bounds"`` (with where they are documented),
        ``"as published"`` or ``"none"`` (rows used as given); ``"not recorded"`` if the
        constructor was not told.

    Notes
    -----
    Equality and hashing are by identity (the fields hold arrays).
    """

    name: str
    X_train: np.ndarray | sp.csr_matrix
    y_train: np.ndarray
    X_test: np.ndarray | sp.csr_matrix | None
    y_test: np.ndarray | None
    source: str
    preprocessing: dict[str, Any] = field(default_factory=lambda: {"scaling": "not recorded"})

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return int(self.X_train.shape[1])

    def __repr__(self) -> str:
        test = "None" if self.X_test is None else f"{self.X_test.shape}"
        kind = "sparse" if sp.issparse(self.X_train) else "dense"
        return (
            f"Dataset(name={self.name!r}, X_train={self.X_train.shape} {kind}, "
            f"X_test={test}, source={self.source!r})"
        )


def layout(name: str) -> str:
    """The files a named set needs, relative to the data folder."""
    if name == "a9a":
        return "a9a/a9a and a9a/a9a.t"
    if name == "adult":
        return "adult/adult.data and adult/adult.test"
    if name == "dexter":
        return "dexter/dexter_train.data and dexter/dexter_train.labels"
    if name in REGRESSION_FILES:
        return REGRESSION_FILES[name]
    return f"{name}/{name}_train.data, .labels and {name}/{name}_valid.data, .labels"


def resolve_data_dir(name: str, data_dir: str | os.PathLike[str] | None) -> Path:
    """The data folder, from the argument or ``DPFED_DATA``, as an absolute path."""
    if data_dir is None:
        env = os.environ.get(ENV_VAR, "")
        if not env.strip():
            raise DpfedInputError(
                f"data set {name!r} is read from files, but no data folder was given. "
                f"Pass --data-dir DIR (data_dir=...) or set the {ENV_VAR} environment "
                f"variable to a folder holding {layout(name)}."
            )
        base, origin = Path(env), f"the {ENV_VAR} environment variable"
    else:
        base, origin = Path(data_dir), "--data-dir (data_dir)"
    base = Path(os.path.abspath(base.expanduser()))
    if not base.is_dir():
        raise DpfedInputError(
            f"{origin} points at {str(base)!r}, which is not an existing folder. Expected a "
            f"folder holding {layout(name)}."
        )
    return base


def require_files(name: str, files: list[Path]) -> None:
    """Raise naming the first missing file of a named set."""
    for file in files:
        if not file.is_file():
            raise DpfedInputError(
                f"data set {name!r} needs the file {str(file)!r}, which does not exist. "
                f"Put the files there, or point --data-dir or {ENV_VAR} at a folder holding "
                f"{layout(name)}."
            )
