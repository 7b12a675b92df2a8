"""Checkpoints: round trip, atomic replacement, and refusal of what is not a checkpoint."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.runtime import checkpoint as checkpoint_module
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint

META = {
    "round": 3,
    "finished": False,
    "rho": 0.25,
    "name": "bänk",
    "none": None,
    "rng": {"bit_generator": "PCG64", "state": {"state": 2**127 + 12345, "inc": 7}},
    "history": [{"round": 1, "residuals": {"primal": 1.5, "dual": 1e-300}}, [1, [2, [3]]]],
    "empty": {},
}


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "model": rng.normal(size=7),
        "matrix": rng.normal(size=(3, 4)),
        "ints": np.arange(-5, 5, dtype=np.int64),
        "bytes": np.frombuffer(b"\x00\xffpayload", dtype=np.uint8),
        "empty": np.zeros(0),
        "empty2d": np.zeros((0, 3), dtype=np.int32),
        "scalar": np.array(np.pi),
        "inbox/party1": rng.normal(size=4),
    }


def _assert_same(arrays, expected):
    assert set(arrays) == set(expected)
    for key, value in expected.items():
        assert arrays[key].dtype == value.dtype, key
        assert arrays[key].shape == value.shape, key
        assert np.array_equal(arrays[key], value), key


def test_round_trip_keeps_arrays_and_nested_meta_exactly(tmp_path):
    path = tmp_path / "deep" / "folder" / "state.npz"  # parents are created
    assert save_checkpoint(path, _arrays(), META) == path
    arrays, meta = load_checkpoint(path)
    _assert_same(arrays, _arrays())
    assert meta == META
    assert os.listdir(path.parent) == ["state.npz"]


def test_empty_checkpoint_round_trips(tmp_path):
    path = save_checkpoint(str(tmp_path / "state.npz"), {}, {})
    assert load_checkpoint(path) == ({}, {})


def test_saving_again_replaces_the_previous_state(tmp_path):
    path = tmp_path / "state.npz"
    save_checkpoint(path, _arrays(), META)
    save_checkpoint(path, {"only": np.ones(2)}, {"round": 4})
    arrays, meta = load_checkpoint(path)
    _assert_same(arrays, {"only": np.ones(2)})
    assert meta == {"round": 4}
    assert os.listdir(tmp_path) == ["state.npz"]


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_failed_write_leaves_the_old_checkpoint_and_no_temporary_file(tmp_path, monkeypatch, error):
    path = tmp_path / "state.npz"
    save_checkpoint(path, _arrays(), META)
    before = path.read_bytes()
    real_savez = np.savez

    def failing_savez(handle, **payload):
        real_savez(handle, **payload)  # the whole file is written ...
        handle.seek(handle.tell() // 2)  # ... then cut off half way
        handle.truncate()
        raise error

    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(type(error)):
        save_checkpoint(path, {"model": np.zeros(7)}, {"round": 99})
    monkeypatch.undo()

    assert os.listdir(tmp_path) == ["state.npz"]
    assert path.read_bytes() == before
    arrays, meta = load_checkpoint(path)
    _assert_same(arrays, _arrays())
    assert meta == META


def test_failed_rename_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "state.npz"
    save_checkpoint(path, {"a": np.ones(1)}, {"v": 1})

    def failing_replace(src, dst):
        raise PermissionError("rename refused")

    monkeypatch.setattr(checkpoint_module.os, "replace", failing_replace)
    with pytest.raises(PermissionError):
        save_checkpoint(path, {"a": np.zeros(1)}, {"v": 2})
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["state.npz"]
    assert load_checkpoint(path)[1] == {"v": 1}


def test_meta_that_is_not_json_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "state.npz"
    with pytest.raises(TypeError):
        save_checkpoint(path, {}, {"bad": object()})
    assert os.listdir(tmp_path) == []


def test_reserved_key_is_refused(tmp_path):
    with pytest.raises(DpfedInputError, match="__meta__"):
        save_checkpoint(tmp_path / "state.npz", {"__meta__": np.zeros(1)}, {})
    assert not (tmp_path / "state.npz").exists()
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_fsync_writes_a_loadable_checkpoint_and_syncs_file_and_folder(tmp_path, monkeypatch):
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd):
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(checkpoint_module.os, "fsync", counting_fsync)
    path = save_checkpoint(tmp_path / "state.npz", _arrays(), META, fsync=True)
    assert len(synced) == 2  # the data, then the folder holding the new name
    arrays, meta = load_checkpoint(path)
    _assert_same(arrays, _arrays())
    assert meta == META
    assert os.listdir(tmp_path) == ["state.npz"]


def test_without_fsync_nothing_is_synced(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint_module.os, "fsync", lambda fd: pytest.fail("fsync called"))
    save_checkpoint(tmp_path / "state.npz", {"a": np.ones(1)}, {})


def test_missing_checkpoint_is_refused(tmp_path):
    with pytest.raises(DpfedInputError, match="does not exist"):
        load_checkpoint(tmp_path / "absent.npz")


def test_text_file_is_refused(tmp_path):
    path = tmp_path / "state.npz"
    path.write_text("not a checkpoint\n")
    with pytest.raises(DpfedInputError, match="not a dpfed checkpoint"):
        load_checkpoint(path)


def test_folder_is_refused(tmp_path):
    with pytest.raises(DpfedInputError, match="not a dpfed checkpoint"):
        load_checkpoint(tmp_path)


def test_npz_without_metadata_is_refused(tmp_path):
    path = tmp_path / "state.npz"
    np.savez(path, model=np.zeros(3))
    with pytest.raises(DpfedInputError, match="no metadata"):
        load_checkpoint(path)


def test_pickled_arrays_are_not_loaded(tmp_path):
    path = tmp_path / "state.npz"
    np.savez(path, evil=np.array([{"a": 1}], dtype=object), __meta__=np.frombuffer(b"{}", np.uint8))
    with pytest.raises(DpfedInputError, match="not a dpfed checkpoint"):
        load_checkpoint(path)


@pytest.mark.parametrize("kind", ["npy", "truncated", "empty", "bad-json", "not-utf8"])
def test_other_non_checkpoint_files_are_refused(tmp_path, kind):
    path = tmp_path / "state.npz"
    if kind == "npy":
        with path.open("wb") as handle:
            np.save(handle, np.arange(3))
    elif kind in ("bad-json", "not-utf8"):
        raw = b"{not json" if kind == "bad-json" else b"\xff\xfe"
        with path.open("wb") as handle:
            np.savez(handle, __meta__=np.frombuffer(raw, dtype=np.uint8))
    else:
        save_checkpoint(path, _arrays(), META)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if kind == "truncated" else b"")
    with pytest.raises(DpfedInputError, match="not a dpfed checkpoint"):
        load_checkpoint(path)


@pytest.mark.parametrize("name", ["file", "allow_pickle"])
def test_arrays_named_like_savez_arguments_round_trip(tmp_path, name):
    path = tmp_path / "state.npz"
    save_checkpoint(path, {name: np.arange(3)}, {})
    arrays, _ = load_checkpoint(path)
    _assert_same(arrays, {name: np.arange(3)})
