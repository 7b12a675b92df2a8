"""Data layer: readers (LIBSVM, NIPS 2003), the named-data-set registry, vertical
partitioning among parties, and row-wise preprocessing."""

from __future__ import annotations

from dpfed.data.libsvm import read_libsvm
from dpfed.data.nips2003 import read_nips2003
from dpfed.data.partition import even_split, parse_split, vertical_split
from dpfed.data.preprocessing import (
    clip_rows,
    normalize_rows,
    row_norms,
    standardize_apply,
    standardize_fit,
)
from dpfed.data.registry import KNOWN_DATASETS, Dataset, load_dataset, stratified_split

__all__ = [
    "KNOWN_DATASETS",
    "Dataset",
    "clip_rows",
    "even_split",
    "load_dataset",
    "normalize_rows",
    "parse_split",
    "read_libsvm",
    "read_nips2003",
    "row_norms",
    "standardize_apply",
    "standardize_fit",
    "stratified_split",
    "vertical_split",
]
