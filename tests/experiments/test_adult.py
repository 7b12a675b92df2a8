"""UCI Adult for the horizontal reproductions: the data folder's checks, the parts."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.experiments.adult import adult_folder, load_adult_parts


def test_adult_folder_names_the_missing_file(tmp_path):
    with pytest.raises(DpfedInputError, match=r"the demo reproduction needs .*adult\.data"):
        adult_folder(tmp_path, "demo")
    (tmp_path / "adult").mkdir()
    (tmp_path / "adult" / "adult.data").write_text("")
    with pytest.raises(DpfedInputError, match=r"adult\.test"):
        adult_folder(tmp_path, "demo")
    (tmp_path / "adult" / "adult.test").write_text("")
    assert adult_folder(tmp_path, "demo") == tmp_path.resolve()


def test_quick_parts_are_subsampled_unit_rows_split_evenly(adult_dir):
    data = load_adult_parts(adult_dir, parties=4, max_train_rows=1000, max_test_rows=500, seed=0)
    info = data.describe()
    assert info["n_train"] == 1000 and info["n_test"] == 500 and info["parties"] == 4
    assert info["rows_per_party"] == [250] * 4 and info["n_features"] == 105
    assert info["preprocessing"].startswith(
        "rows subsampled to 1000 train / 500 test (default_rng(0), quick mode); "
    )
    X, y = data.stacked()
    assert X.shape == (1000, 105) and set(np.unique(y)) <= {-1.0, 1.0}
    assert np.allclose(np.linalg.norm(X, axis=1), 1.0)
    again = load_adult_parts(adult_dir, parties=4, max_train_rows=1000, max_test_rows=500, seed=0)
    assert np.array_equal(again.stacked()[0], X)
