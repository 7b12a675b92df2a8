"""The intercept column of the horizontal protocols' rows (:mod:`dpfed.core.rows`)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.core.rows import clip_rows, model_rows, row_norms, split_intercept, with_intercept


@pytest.mark.parametrize("sparse", [False, True])
def test_the_intercept_column_keeps_rows_within_the_unit_ball_and_splits_back(sparse):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4)) * rng.uniform(0.0, 3.0, size=(50, 1))
    X = sp.csr_matrix(X) if sparse else X
    rows = model_rows(X, bounded=True, fit_intercept=True, scale=0.3)
    assert rows.shape == (50, 5) and sp.issparse(rows) == sparse
    assert np.all(row_norms(rows) <= 1.0)
    dense = rows.toarray() if sparse else rows
    np.testing.assert_allclose(dense[:, -1], 0.3)
    w = rng.normal(size=5)
    coef, intercept = split_intercept(w, fit_intercept=True, scale=0.3)
    clipped = clip_rows(X, 1.0)
    np.testing.assert_allclose(
        np.asarray(clipped @ coef).ravel() + intercept,
        np.asarray(rows @ w).ravel(),
        rtol=0,
        atol=1e-12,
    )
    assert split_intercept(w, fit_intercept=False) == (pytest.approx(w), 0.0)
    assert model_rows(X, bounded=False, fit_intercept=False) is X


@pytest.mark.parametrize("scale", [0.0, 1.0, -0.5, 2.0])
def test_an_intercept_scale_outside_the_open_unit_interval_is_refused(scale):
    with pytest.raises(DpfedInputError, match="intercept_scale"):
        with_intercept(np.ones((2, 2)), scale)
