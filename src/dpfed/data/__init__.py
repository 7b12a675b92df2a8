"""Data layer: readers (LIBSVM, NIPS 2003, UCI Adult, Wine Quality, Abalone), the
named-data-set registry, the declared public bounds every named set is scaled by (no
constant is computed from the rows), vertical and horizontal partitioning among parties,
communication graphs, row-wise preprocessing, and the scaling and splits of the regression
sets."""

from __future__ import annotations

from dpfed.data.abalone import read_abalone
from dpfed.data.adult import read_adult
from dpfed.data.graphs import GRAPHS, graph_from_edges, make_graph, neighbours
from dpfed.data.libsvm import read_libsvm
from dpfed.data.nips2003 import read_nips2003
from dpfed.data.partition import even_split, horizontal_split, parse_split, vertical_split
from dpfed.data.preprocessing import (
    clip_rows,
    normalize_rows,
    row_norms,
    standardize_apply,
    standardize_fit,
)
from dpfed.data.registry import KNOWN_DATASETS, Dataset, load_dataset, stratified_split
from dpfed.data.regression import (
    REGRESSION_DATASETS,
    RegressionData,
    Scaling,
    load_regression_dataset,
    random_split,
    scale_to_range,
)
from dpfed.data.specs import DATASET_SPECS, preprocessing_of, scale_columns
from dpfed.data.wine import read_wine

__all__ = [
    "DATASET_SPECS",
    "GRAPHS",
    "KNOWN_DATASETS",
    "REGRESSION_DATASETS",
    "Dataset",
    "RegressionData",
    "Scaling",
    "clip_rows",
    "even_split",
    "graph_from_edges",
    "horizontal_split",
    "load_dataset",
    "load_regression_dataset",
    "make_graph",
    "neighbours",
    "normalize_rows",
    "parse_split",
    "preprocessing_of",
    "random_split",
    "read_abalone",
    "read_adult",
    "read_libsvm",
    "read_nips2003",
    "read_wine",
    "row_norms",
    "scale_columns",
    "scale_to_range",
    "standardize_apply",
    "standardize_fit",
    "stratified_split",
    "vertical_split",
]
