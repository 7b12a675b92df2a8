"""New rows named for a prediction, resolved at a party's own site."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.data import load_dataset
from dpfed.data.prediction import prediction_rows, row_digests


def test_a_named_sets_part_is_its_preprocessed_rows():
    dataset = load_dataset("breast_cancer")
    rows = prediction_rows("breast_cancer:test", n_features=30)
    np.testing.assert_array_equal(rows, dataset.X_test)
    rows = prediction_rows("breast_cancer:train", n_features=30)
    np.testing.assert_array_equal(rows, dataset.X_train)


def test_files_npy_csv_and_libsvm(tmp_path):
    X = np.arange(12.0).reshape(4, 3)
    np.save(tmp_path / "rows.npy", X)
    np.savetxt(tmp_path / "rows.csv", X, delimiter=",")
    np.testing.assert_array_equal(prediction_rows(str(tmp_path / "rows.npy"), n_features=3), X)
    # relative to the job file's folder
    np.testing.assert_array_equal(prediction_rows("rows.csv", n_features=3, base=tmp_path), X)
    (tmp_path / "rows.svm").write_text("1 1:0.5 3:2\n-1 2:1\n")
    rows = prediction_rows(str(tmp_path / "rows.svm"), n_features=5)  # padded to the model
    assert sp.issparse(rows) and rows.shape == (2, 5)
    np.testing.assert_array_equal(rows.toarray()[0], [0.5, 0, 2, 0, 0])


def test_bad_rows_are_refused_naming_them(tmp_path):
    np.save(tmp_path / "wide.npy", np.ones((2, 4)))
    with pytest.raises(DpfedInputError, match="has 4 columns; the model was trained on 3"):
        prediction_rows(str(tmp_path / "wide.npy"), n_features=3)
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.nan, 0.0]]))
    with pytest.raises(DpfedInputError, match="not finite"):
        prediction_rows(str(tmp_path / "nan.npy"), n_features=3)
    (tmp_path / "wide.svm").write_text("1 7:1\n")
    with pytest.raises(DpfedInputError, match="uses column 7; the model has 3"):
        prediction_rows(str(tmp_path / "wide.svm"), n_features=3)
    with pytest.raises(DpfedInputError, match="breast_cancer:test or breast_cancer:train"):
        prediction_rows("breast_cancer:valid", n_features=30)
    with pytest.raises(DpfedInputError, match=r"an existing file\. Found 'nowhere\.csv'"):
        prediction_rows("nowhere.csv", n_features=3)


def test_equal_rows_have_equal_digests_dense_or_sparse():
    X = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0], [0.0, 0.0, 0.0], [-0.0, 1.5, 0.0]])
    dense = row_digests(X)
    assert dense == row_digests(sp.csr_matrix(X))  # the same rows, stored sparse
    assert dense[0] == dense[3]  # -0.0 is 0.0
    assert len(set(dense[:3])) == 3
    # an explicit zero or unsorted, duplicated entries of a sparse row change nothing
    odd = sp.csr_matrix(
        (np.array([0.0, 1.0, 0.5]), np.array([2, 1, 1]), np.array([0, 3])), shape=(1, 3)
    )
    assert row_digests(odd) == [dense[0]]
    # a value one ulp away, or the same values in a wider row, is another row
    assert row_digests(np.array([[0.0, np.nextafter(1.5, 2.0), 0.0]])) != [dense[0]]
    assert row_digests(np.array([[0.0, 1.5, 0.0, 0.0]])) != [dense[0]]
