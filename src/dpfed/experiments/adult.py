"""UCI Adult as the horizontal reproductions (decentralized, consensus) use it: rows scaled to
unit norm, split evenly among the parties."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.rows import normalize_rows
from dpfed.data import horizontal_split, load_dataset
from dpfed.experiments.runner import data_folder, subsample_rows

__all__ = ["ADULT_SOURCE", "AdultParts", "adult_folder", "load_adult_parts"]

ADULT_SOURCE = (
    "UCI Machine Learning Repository, Adult (Census Income), "
    "https://archive.ics.uci.edu/dataset/2/adult (files adult.data and adult.test)"
)


@dataclass
class AdultParts:
    """Adult with unit rows, split evenly among parties (nodes or clients)."""

    parts: list[tuple[np.ndarray, np.ndarray]]
    X_test: np.ndarray
    y_test: np.ndarray
    preprocessing: str
    source: str

    def describe(self) -> dict:
        """Name, sizes, rows per party, preprocessing and source, for the JSON files."""
        return {
            "name": "adult",
            "n_train": int(sum(X.shape[0] for X, _ in self.parts)),
            "n_test": int(self.X_test.shape[0]),
            "n_features": int(self.X_test.shape[1]),
            "parties": len(self.parts),
            "rows_per_party": [int(X.shape[0]) for X, _ in self.parts],
            "preprocessing": self.preprocessing,
            "source": self.source,
        }

    def stacked(self) -> tuple[np.ndarray, np.ndarray]:
        """Every party's rows and labels, stacked in party order."""
        return (np.vstack([X for X, _ in self.parts]), np.concatenate([y for _, y in self.parts]))


def adult_folder(data_dir: str | os.PathLike[str] | None, command: str) -> Path:
    """The data folder holding ``adult/adult.data`` and ``adult/adult.test``.

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        The folder, or ``None`` for the ``DPFED_DATA`` environment variable.
    command : str
        The reproduction, for the messages.

    Raises
    ------
    DpfedInputError
        Naming the missing folder or file.
    """
    base = data_folder(
        data_dir,
        command=command,
        reads="UCI Adult",
        holding=f"adult/adult.data and adult/adult.test ({ADULT_SOURCE})",
    )
    for name in ("adult.data", "adult.test"):
        path = base / "adult" / name
        if not path.is_file():
            raise DpfedInputError(
                f"the {command} reproduction needs {str(path)!r}, which was not found. "
                f"Expected adult/adult.data and adult/adult.test under {str(base)!r} "
                f"({ADULT_SOURCE})."
            )
    return base


def load_adult_parts(
    base: Path,
    *,
    parties: int,
    max_train_rows: int | None = None,
    max_test_rows: int | None = None,
    seed: int = 0,
) -> AdultParts:
    """Adult, (subsampled,) rows scaled to unit norm, split evenly with ``rng=seed``."""
    ds = load_dataset("adult", base)
    X, y, Xt, yt, subsampled = subsample_rows(
        np.asarray(ds.X_train, float),
        np.asarray(ds.y_train, float),
        np.asarray(ds.X_test, float),
        np.asarray(ds.y_test, float),
        max_train_rows=max_train_rows,
        max_test_rows=max_test_rows,
        seed=seed,
    )
    steps = [subsampled] if subsampled else []
    X, Xt = normalize_rows(X), normalize_rows(Xt)
    steps.append(
        "one-hot categorical and [0, 1]-scaled continuous attributes (dpfed reader), "
        "then every row scaled to unit l2 norm (normalize_rows)"
    )
    index = horizontal_split(X.shape[0], parties, rng=seed)
    steps.append(f"rows split evenly among {parties} parties (horizontal_split, rng={seed})")
    return AdultParts(
        parts=[(X[i], y[i]) for i in index],
        X_test=Xt,
        y_test=yt,
        preprocessing="; ".join(steps),
        source=getattr(ds, "source", ADULT_SOURCE),
    )
