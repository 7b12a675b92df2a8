"""load_dataset: named sets (synthetic layouts and the real files), LIBSVM paths, errors."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed import DpfedInputError
from dpfed.data import KNOWN_DATASETS, Dataset, load_dataset, stratified_split


def _real_data_dir(name: str, needed: list[str]) -> Path:
    value = os.environ.get("DPFED_DATA", "")
    if not value or not all((Path(value) / rel).is_file() for rel in needed):
        pytest.skip(
            f"{name} not found under $DPFED_DATA (set DPFED_DATA to a folder holding "
            f"{' and '.join(needed)})"
        )
    return Path(value)


def _nips_files(name: str, splits: tuple[str, ...]) -> list[str]:
    return [f"{name}/{name}_{s}.{ext}" for s in splits for ext in ("data", "labels")]


def _write_nips(base: Path, name: str, split: str, X: np.ndarray, y: np.ndarray) -> None:
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    rows = ("".join(f"{int(v)} " for v in row) for row in X)
    (folder / f"{name}_{split}.data").write_text("\n".join(rows) + "\n")
    (folder / f"{name}_{split}.labels").write_text("".join(f"{int(v)}\n" for v in y))


# --- breast_cancer (no files) -------------------------------------------------------


def test_breast_cancer_needs_no_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPFED_DATA", raising=False)
    ds = load_dataset("breast_cancer")
    assert ds.name == "breast_cancer" and ds.n_features == 30
    assert ds.X_train.shape == (398, 30) and ds.X_test.shape == (171, 30)
    assert set(np.unique(ds.y_train)) == {-1.0, 1.0} == set(np.unique(ds.y_test))
    # Stratified: 212 malignant (-1) / 357 benign (+1) overall.
    assert int((ds.y_test == -1).sum()) == 64 and int((ds.y_train == -1).sum()) == 148
    # scaled by declared public bounds into [-1, 1], not standardised with train statistics
    for X in (ds.X_train, ds.X_test):
        assert X.min() >= -1.0 and X.max() <= 1.0
    assert ds.preprocessing["scaling"] == "declared public bounds"
    assert ds.preprocessing["output_range"] == [-1.0, 1.0]
    assert "load_breast_cancer" in ds.source and "declared public bounds" in ds.source


def test_breast_cancer_split_is_deterministic_and_leaves_global_state_alone() -> None:
    state = np.random.get_state()[1].copy()  # noqa: NPY002 - checking it is left alone
    a, b = load_dataset("breast_cancer"), load_dataset("breast_cancer")
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)


def test_dataset_is_frozen_with_short_repr() -> None:
    ds = load_dataset("breast_cancer")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.name = "x"  # type: ignore[misc]
    assert "(398, 30)" in repr(ds) and len(repr(ds)) < 400
    assert isinstance(ds, Dataset)


# --- errors ----------------------------------------------------------------------------


def test_unknown_name_lists_known_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DpfedInputError) as info:
        load_dataset("mnist")
    message = str(info.value)
    assert "'mnist'" in message and "--data-dir" in message and "DPFED_DATA" in message
    assert all(name in message for name in KNOWN_DATASETS)


def test_folder_is_not_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(DpfedInputError, match="is a folder"):
        load_dataset(str(tmp_path))


def test_known_name_without_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPFED_DATA", raising=False)
    with pytest.raises(DpfedInputError, match=r"--data-dir.*DPFED_DATA.*a9a/a9a and a9a/a9a\.t"):
        load_dataset("a9a")


def test_data_dir_that_is_not_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DpfedInputError, match="not an existing folder") as info:
        load_dataset("madelon", data_dir=missing)
    assert str(missing) in str(info.value)
    monkeypatch.setenv("DPFED_DATA", str(missing))
    with pytest.raises(DpfedInputError, match="DPFED_DATA environment variable points at"):
        load_dataset("madelon")


@pytest.mark.parametrize(
    ("name", "missing"),
    [
        ("a9a", "a9a/a9a"),
        ("madelon", "madelon/madelon_train.data"),
        ("gisette", "gisette/gisette_train.data"),
        ("dexter", "dexter/dexter_train.data"),
    ],
)
def test_known_name_with_missing_files(tmp_path: Path, name: str, missing: str) -> None:
    with pytest.raises(DpfedInputError, match="does not exist") as info:
        load_dataset(name, data_dir=tmp_path)
    message = str(info.value)
    assert str(tmp_path / missing) in message
    assert "--data-dir" in message and "DPFED_DATA" in message


def test_test_file_only_with_a_path(tmp_path: Path) -> None:
    with pytest.raises(DpfedInputError, match="only used with a LIBSVM train file"):
        load_dataset("breast_cancer", test=tmp_path / "x")


# --- synthetic layouts ----------------------------------------------------------------


def test_a9a_layout_gets_123_columns(tmp_path: Path) -> None:
    (tmp_path / "a9a").mkdir()
    (tmp_path / "a9a" / "a9a").write_text("-1 3:1 123:1 \n+1 1:1 \n")
    (tmp_path / "a9a" / "a9a.t").write_text("+1 2:1 \n")
    ds = load_dataset("a9a", data_dir=tmp_path)
    assert ds.X_train.shape == (2, 123) and ds.X_test.shape == (1, 123)
    assert sp.issparse(ds.X_train)
    np.testing.assert_array_equal(ds.y_train, [-1.0, 1.0])


def test_nips_layout_train_valid(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    _write_nips(tmp_path, "madelon", "train", rng.integers(0, 999, (6, 4)), np.array([1, -1] * 3))
    _write_nips(tmp_path, "madelon", "valid", rng.integers(0, 999, (2, 4)), np.array([1, -1]))
    ds = load_dataset("madelon", data_dir=tmp_path)
    assert ds.X_train.shape == (6, 4) and ds.X_test.shape == (2, 4)
    assert isinstance(ds.X_train, np.ndarray)


def test_nips_train_and_valid_widths_must_agree(tmp_path: Path) -> None:
    _write_nips(tmp_path, "arcene", "train", np.ones((2, 4)), np.array([1, -1]))
    _write_nips(tmp_path, "arcene", "valid", np.ones((2, 5)), np.array([1, -1]))
    with pytest.raises(DpfedInputError, match="Found 4 and 5"):
        load_dataset("arcene", data_dir=tmp_path)


def test_relative_data_dir_from_env_uses_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_nips(tmp_path / "stuff", "arcene", "train", np.ones((2, 3)), np.array([1, -1]))
    _write_nips(tmp_path / "stuff", "arcene", "valid", np.ones((2, 3)), np.array([1, -1]))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPFED_DATA", "stuff")
    ds = load_dataset("arcene")
    assert ds.X_train.shape == (2, 3)
    assert str(tmp_path / "stuff" / "arcene") in ds.source


def test_dexter_layout_is_split_200_100_style(tmp_path: Path) -> None:
    folder = tmp_path / "dexter"
    folder.mkdir()
    n = 150
    (folder / "dexter_train.data").write_text("".join(f"{i % 50 + 1}:{i + 1} \n" for i in range(n)))
    y = np.where(np.arange(n) < 60, 1, -1)
    (folder / "dexter_train.labels").write_text("".join(f"{v}\n" for v in y))
    a = load_dataset("dexter", data_dir=tmp_path)
    b = load_dataset("dexter", data_dir=tmp_path)
    assert a.X_train.shape == (50, 20000) and a.X_test.shape == (100, 20000)
    assert int((a.y_test == 1).sum()) == 40  # 100 * 60 / 150
    np.testing.assert_array_equal(a.X_test.toarray(), b.X_test.toarray())
    # Train and test rows together are the original rows.
    values = np.concatenate([a.X_train.data, a.X_test.data])
    np.testing.assert_array_equal(np.sort(values), np.arange(1, n + 1))


# --- LIBSVM file paths ----------------------------------------------------------------


def test_libsvm_path_with_test_file_pads_columns(tmp_path: Path) -> None:
    train, test = tmp_path / "tr.svm", tmp_path / "te.svm"
    train.write_text("1 1:1 3:2\n-1 2:1\n")
    test.write_text("1 5:1\n")
    ds = load_dataset(str(train), test=str(test))
    assert ds.X_train.shape == (2, 5) and ds.X_test.shape == (1, 5)
    assert ds.name == "tr.svm" and str(test) in ds.source
    ds2 = load_dataset(train)
    assert ds2.X_train.shape == (2, 3) and ds2.X_test is None and ds2.y_test is None


def test_libsvm_missing_test_file(tmp_path: Path) -> None:
    train = tmp_path / "tr.svm"
    train.write_text("1 1:1\n")
    with pytest.raises(DpfedInputError, match="does not exist") as info:
        load_dataset(str(train), test=str(tmp_path / "missing.t"))
    assert "missing.t" in str(info.value)


# --- stratified_split -----------------------------------------------------------------


def test_stratified_split_counts_and_determinism() -> None:
    y = np.array([0] * 7 + [1] * 3)
    tr, te = stratified_split(y, 4, np.random.default_rng(0))
    assert te.size == 4 and tr.size == 6
    assert np.intersect1d(tr, te).size == 0 and np.union1d(tr, te).size == 10
    assert np.all(np.diff(tr) > 0) and np.all(np.diff(te) > 0)
    assert np.bincount(y[te]).tolist() == [3, 1]  # ideal 2.8 / 1.2, largest remainder
    _, te2 = stratified_split(y, 4, np.random.default_rng(0))
    np.testing.assert_array_equal(te, te2)


@pytest.mark.parametrize("n_test", [0, 10, -1, 2.5])
def test_stratified_split_bad_n_test(n_test: object) -> None:
    with pytest.raises(DpfedInputError, match="n_test"):
        stratified_split(np.zeros(10), n_test, np.random.default_rng(0))  # type: ignore[arg-type]


# --- real data (skipped without $DPFED_DATA) -----------------------------------------


def test_real_a9a() -> None:
    base = _real_data_dir("a9a", ["a9a/a9a", "a9a/a9a.t"])
    ds = load_dataset("a9a", data_dir=base)
    assert ds.X_train.shape == (32561, 123) and ds.X_test.shape == (16281, 123)
    assert int((ds.y_train == 1).sum()) == 7841 and int((ds.y_test == 1).sum()) == 3846


def test_real_madelon_from_env() -> None:
    _real_data_dir("madelon", _nips_files("madelon", ("train", "valid")))
    ds = load_dataset("madelon")
    assert ds.X_train.shape == (2000, 500) and ds.X_test.shape == (600, 500)


def test_real_arcene() -> None:
    base = _real_data_dir("arcene", _nips_files("arcene", ("train", "valid")))
    ds = load_dataset("arcene", data_dir=base)
    assert ds.X_train.shape == (100, 10000) and ds.X_test.shape == (100, 10000)


def test_real_dexter_split() -> None:
    base = _real_data_dir("dexter", _nips_files("dexter", ("train",)))
    ds = load_dataset("dexter", data_dir=base)
    assert ds.X_train.shape == (200, 20000) and ds.X_test.shape == (100, 20000)
    assert int((ds.y_train == 1).sum()) == 100 and int((ds.y_test == 1).sum()) == 50
    assert ds.X_train.nnz + ds.X_test.nnz == 28218
