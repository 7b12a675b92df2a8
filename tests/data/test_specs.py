"""Declared public bounds: the table, the clip-and-map scaling, and the preprocessing records."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.data.abalone import ABALONE_FEATURES
from dpfed.data.adult import ADULT_ATTRIBUTES, ADULT_CONTINUOUS
from dpfed.data.specs import (
    DATASET_SPECS,
    ColumnBound,
    DatasetSpec,
    parties_preprocessing,
    preprocessing_of,
    scale_columns,
)
from dpfed.data.wine import WINE_FEATURES, WINE_TARGET


def test_scale_columns_clips_then_maps_the_bounds_onto_the_output():
    X = np.array([[0.0, 5.0], [10.0, -3.0], [20.0, 1.0]])
    out = scale_columns(X, [0.0, -1.0], [10.0, 1.0])
    np.testing.assert_allclose(out, [[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    out = scale_columns(X, [0.0, -1.0], [10.0, 1.0], (-5.0, 5.0))
    np.testing.assert_allclose(out, [[-5.0, 5.0], [5.0, -5.0], [5.0, 5.0]])
    # a row's result depends on that row only
    np.testing.assert_array_equal(scale_columns(X[1:2], [0.0, -1.0], [10.0, 1.0]), [[1.0, 0.0]])
    assert X[0, 1] == 5.0  # the input is left alone


@pytest.mark.parametrize(
    ("X", "lower", "upper", "output", "match"),
    [
        (np.zeros((2, 2)), [0.0], [1.0], (0.0, 1.0), "one lower and one upper bound"),
        (np.zeros((2, 1)), [1.0], [1.0], (0.0, 1.0), r"lower < upper.*\[1.0, 1.0\]"),
        (np.zeros((2, 1)), [0.0], [np.inf], (0.0, 1.0), "finite"),
        (np.full((2, 1), np.nan), [0.0], [1.0], (0.0, 1.0), "finite values"),
        (np.zeros((2, 1)), [0.0], [1.0], (1.0, 0.0), "output must be a range"),
    ],
)
def test_scale_columns_refuses_bad_bounds(X, lower, upper, output, match):
    with pytest.raises(DpfedInputError, match=match):
        scale_columns(X, lower, upper, output)


def test_column_bound_needs_lo_below_hi():
    with pytest.raises(DpfedInputError, match=r"'x' must be finite with lo < hi"):
        ColumnBound("x", 2.0, 1.0, "nowhere")


def test_every_declared_bound_has_a_basis_and_a_range():
    for name, spec in DATASET_SPECS.items():
        assert spec.name == name and spec.documentation
        for bound in (*spec.columns, *((spec.target,) if spec.target else ())):
            assert bound.lo < bound.hi and len(bound.basis) > 10, (name, bound.column)
        assert len(set(spec.column_names)) == len(spec.columns)


def test_tables_match_the_readers_columns():
    adult = DATASET_SPECS["adult"]
    assert adult.column_names == ADULT_CONTINUOUS
    categorical = tuple(a for a in ADULT_ATTRIBUTES if a not in ADULT_CONTINUOUS)
    assert tuple(adult.categories) == categorical
    assert sum(len(v) for v in adult.categories.values()) == 99
    assert adult.row_norm == pytest.approx(np.sqrt(len(ADULT_ATTRIBUTES)))
    for name in ("wine-red", "wine-white"):
        assert DATASET_SPECS[name].column_names == WINE_FEATURES
        assert DATASET_SPECS[name].target.column == WINE_TARGET
        assert (DATASET_SPECS[name].target.lo, DATASET_SPECS[name].target.hi) == (0.0, 10.0)
    assert DATASET_SPECS["abalone"].column_names == ABALONE_FEATURES
    from sklearn.datasets import load_breast_cancer

    assert DATASET_SPECS["breast_cancer"].column_names == tuple(load_breast_cancer().feature_names)


def test_records_say_which_preprocessing_and_are_json():
    adult = preprocessing_of("adult")
    assert adult["scaling"] == "declared public bounds" and "adult.names" in adult["bounds"]
    assert adult["columns"]["education-num"] == [1.0, 16.0]
    assert adult["columns"]["capital-gain"] == [0.0, 99999.0]
    assert adult["columns"]["hours-per-week"] == [1.0, 99.0]
    assert "sqrt" not in adult["row_scaling"] and "3.74166" in adult["row_scaling"]
    assert preprocessing_of("breast_cancer")["output_range"] == [-1.0, 1.0]
    for name in ("a9a", "madelon", "arcene", "dexter", "gisette"):
        assert preprocessing_of(name)["scaling"] == "as published"
    for name in ("wine-red", "abalone"):  # load_dataset gives raw values
        assert preprocessing_of(name)["scaling"] == "none"
    assert preprocessing_of("some/file.svm")["scaling"] == "none"
    assert "as given" in preprocessing_of(Path("adult"))["note"]  # a path is a file
    for name in (*DATASET_SPECS, "a9a", "x.svm"):
        json.dumps(preprocessing_of(name))


def test_parties_preprocessing_one_record_or_per_party():
    party = SimpleNamespace
    same = [
        party(name="a", data="adult", role=""),
        party(name="b", data="adult", role=""),
        party(name="s", data="x.svm", role="server"),
    ]
    assert parties_preprocessing(same) == preprocessing_of("adult")
    mixed = [party(name="a", data="adult", role=""), party(name="b", data="b.svm", role="")]
    record = parties_preprocessing(mixed)
    assert record["scaling"] == "per party"
    assert record["parties"]["b"]["scaling"] == "none"


def test_spec_scale_and_record():
    spec = DatasetSpec(
        "toy", (ColumnBound("a", 0.0, 2.0, "declared for the test"),), (-1.0, 1.0), "nowhere"
    )
    np.testing.assert_allclose(spec.scale(np.array([[0.0], [1.0], [5.0]])), [[-1], [0], [1]])
    assert spec.record(extra=1) | {} == spec.record() | {"extra": 1}
