"""Row norms, row normalisation and clipping, and dense standardisation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpfed import DpfedInputError
from dpfed.data import (
    clip_rows,
    normalize_rows,
    row_norms,
    standardize_apply,
    standardize_fit,
)

X_DENSE = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [1.0, 2.0, 2.0]])


def test_row_norms_dense_and_sparse() -> None:
    expected = [5.0, 0.0, 0.1, 3.0]
    np.testing.assert_allclose(row_norms(X_DENSE), expected)
    np.testing.assert_allclose(row_norms(sp.csr_matrix(X_DENSE)), expected)


@pytest.mark.parametrize("kind", ["dense", "csr", "csc"])
def test_normalize_rows(kind: str) -> None:
    X = X_DENSE if kind == "dense" else sp.csr_matrix(X_DENSE).asformat(kind)
    out = normalize_rows(X)
    assert sp.issparse(out) == (kind != "dense")
    if kind != "dense":
        assert out.format == kind
    np.testing.assert_allclose(row_norms(out), [1.0, 0.0, 1.0, 1.0])
    dense_out = out.toarray() if sp.issparse(out) else out
    np.testing.assert_allclose(dense_out[0], [0.6, 0.8, 0.0])
    np.testing.assert_array_equal(dense_out[1], 0.0)


def test_normalize_rows_does_not_modify_input_and_accepts_ints() -> None:
    X = np.array([[3, 4], [0, 2]])
    out = normalize_rows(X)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(X, [[3, 4], [0, 2]])


@pytest.mark.parametrize("kind", ["dense", "csr", "coo"])
def test_clip_rows(kind: str) -> None:
    X = X_DENSE if kind == "dense" else sp.csr_matrix(X_DENSE).asformat(kind)
    before = X.copy()
    out = clip_rows(X, 2.0)
    assert type(out) is type(X)
    dense_out = out.toarray() if sp.issparse(out) else out
    np.testing.assert_allclose(row_norms(out), [2.0, 0.0, 0.1, 2.0])
    np.testing.assert_allclose(dense_out[0], [1.2, 1.6, 0.0])
    np.testing.assert_array_equal(dense_out[2], X_DENSE[2])
    after = X.toarray() if sp.issparse(X) else X
    np.testing.assert_array_equal(after, before.toarray() if sp.issparse(before) else before)


@pytest.mark.parametrize("bound", [0, -1.0, float("nan"), float("inf"), "x"])
def test_clip_rows_bad_bound(bound: object) -> None:
    with pytest.raises(DpfedInputError, match="bound"):
        clip_rows(X_DENSE, bound)  # type: ignore[arg-type]


@pytest.mark.parametrize("func", [row_norms, normalize_rows, lambda X: clip_rows(X, 1.0)])
def test_non_finite_input_is_rejected(func) -> None:  # type: ignore[no-untyped-def]
    X = X_DENSE.copy()
    X[2, 1] = np.nan
    with pytest.raises(DpfedInputError, match=r"finite.*\(2, 1\)"):
        func(X)
    with pytest.raises(DpfedInputError, match="finite"):
        func(sp.csr_matrix(X))


def test_needs_2d() -> None:
    with pytest.raises(DpfedInputError, match="2-D"):
        row_norms(np.ones(3))


def test_overflowing_norm_is_an_error() -> None:
    with pytest.raises(DpfedInputError, match="row 0"):
        clip_rows(np.array([[1e200, 1e200]]), 1.0)


def test_standardize_fit_and_apply() -> None:
    X = np.array([[1.0, 5.0, 2.0], [3.0, 5.0, 4.0], [5.0, 5.0, 9.0]])
    mean, scale = standardize_fit(X)
    np.testing.assert_allclose(mean, [3.0, 5.0, 5.0])
    assert scale[1] == 1.0  # constant column
    Z = standardize_apply(X, mean, scale)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Z.std(axis=0), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(Z[:, 1], 0.0)


def test_standardize_rejects_sparse_and_bad_statistics() -> None:
    with pytest.raises(DpfedInputError, match="dense"):
        standardize_fit(sp.csr_matrix(X_DENSE))
    mean, scale = standardize_fit(X_DENSE)
    with pytest.raises(DpfedInputError, match="dense"):
        standardize_apply(sp.csr_matrix(X_DENSE), mean, scale)
    with pytest.raises(
        DpfedInputError, match=r"mean must have one entry per feature, shape \(3,\)"
    ):
        standardize_apply(X_DENSE, mean[:2], scale)
    bad = scale.copy()
    bad[1] = 0.0
    with pytest.raises(DpfedInputError, match=r"scale must be positive.*feature 1"):
        standardize_apply(X_DENSE, mean, bad)
    with pytest.raises(DpfedInputError, match="0 rows"):
        standardize_fit(np.zeros((0, 3)))


_finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=80, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 8), st.integers(1, 12)), elements=_finite),
    st.floats(1e-3, 1e3),
    st.booleans(),
)
def test_clip_rows_property(X: np.ndarray, bound: float, sparse: bool) -> None:
    source = sp.csr_matrix(X) if sparse else X
    out = clip_rows(source, bound)
    norms_in, norms_out = row_norms(source), row_norms(out)
    assert np.all(norms_out <= bound)
    dense_out = out.toarray() if sparse else out
    below = norms_in <= bound
    np.testing.assert_array_equal(dense_out[below], X[below])
    # Clipped rows keep their direction: out = c * X with 0 < c < 1.
    above = ~below
    if above.any():
        c = norms_out[above] / norms_in[above]
        np.testing.assert_allclose(dense_out[above], X[above] * c[:, None], rtol=1e-12, atol=0)
        np.testing.assert_allclose(norms_out[above], bound, rtol=1e-12)
