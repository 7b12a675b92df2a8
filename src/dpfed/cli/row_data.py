"""The data options of the commands whose parties hold rows (``dpfed train consensus``,
``dpfed train decentralized``, every generated command): a data set cut into parts of rows,
each row scaled to norm 1 as the row protocols' sensitivity bounds assume."""

from __future__ import annotations

import argparse
import os
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.cli.common import output_path
from dpfed.core.rows import normalize_rows
from dpfed.data import Dataset, horizontal_split, load_dataset
from dpfed.data.specs import ROW_NOTE
from dpfed.parameters import parse_float, parse_int

__all__ = ["add_row_data_arguments", "load_parts", "row_preprocessing"]


def add_row_data_arguments(p: argparse.ArgumentParser) -> None:
    """The data set, its test file, the partition and the output file."""
    p.add_argument("--data", required=True, help="data set name (adult, a9a, ...) or LIBSVM file")
    p.add_argument("--test", help="LIBSVM test file (with a file given to --data)")
    p.add_argument("--data-dir", help="folder of named data sets (default: $DPFED_DATA)")
    p.add_argument(
        "--uneven",
        type=parse_float,
        help="Dirichlet concentration for uneven part sizes (default: even sizes)",
    )
    p.add_argument("--split-seed", type=parse_int, default=0, help="seed of the row partition")
    p.add_argument("--out", type=output_path("file"), required=True, help="result JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def load_parts(args: argparse.Namespace, count: int) -> tuple[Dataset, list[tuple[Any, Any]], Any]:
    """The data set, its rows (of norm 1) cut into ``count`` parts, and the test rows."""
    if args.test and not os.path.isfile(args.data):
        raise DpfedInputError(
            f"--test goes with a LIBSVM file given to --data. Found --data {args.data!r}."
        )
    data = load_dataset(args.data, args.data_dir, test=args.test)
    # rows of norm 1: the sensitivity bounds of the row protocols assume norm <= 1
    X = normalize_rows(data.X_train)
    X_test = normalize_rows(data.X_test) if data.X_test is not None else None
    index = horizontal_split(X.shape[0], count, uneven=args.uneven, rng=args.split_seed)
    return data, [(X[i], data.y_train[i]) for i in index], X_test


def row_preprocessing(data: Dataset) -> dict[str, Any]:
    """The data set's preprocessing, then the row normalisation of :func:`load_parts`."""
    return data.preprocessing | {"before_training": ROW_NOTE}
