"""Tests for dpfed._io: atomic outputs that never replace anything but a regular file."""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest

from dpfed._io import output_refusal, write_json_atomic
from dpfed._validation import DpfedInputError


def test_a_regular_file_is_replaced_and_missing_folders_are_made_and_said(tmp_path, capsys):
    target = tmp_path / "a" / "b" / "r.json"
    write_json_atomic(target, {"x": float("inf")})
    assert json.loads(target.read_text()) == {"x": "inf"}
    assert "made the folder" in capsys.readouterr().err
    write_json_atomic(target, {"x": 1})
    assert json.loads(target.read_text()) == {"x": 1}
    assert capsys.readouterr().err == ""  # the folder exists now: nothing to say
    assert sorted(p.name for p in target.parent.iterdir()) == ["r.json"]


def test_non_regular_targets_are_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to("/dev/null")
    for path, says in [
        (fifo, "a FIFO"),
        ("/dev/null", "a character device"),
        (link, "a character device"),
        (tmp_path / "x" / ".." / "pipe", "FIFO"),
        (tmp_path, "a folder"),
        ("/proc/self/r.json", "/proc"),
    ]:
        assert says in output_refusal(path)
        with pytest.raises(DpfedInputError, match="cannot write the output"):
            write_json_atomic(path, {})
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert output_refusal(tmp_path / "new.json") is None


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    target.write_text('{"old": true}\n')

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("dpfed._io.os.replace", full)  # the temporary is written, then fails
    with pytest.raises(OSError, match="No space"):
        write_json_atomic(target, {"new": True})
    assert target.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
