"""Output of the reproductions: atomic files, JSON-safe values."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.experiments.output import ArtifactWriter, jsonable, open_output, output_folder


def test_jsonable_makes_strict_json():
    value = {"a": np.float64("inf"), "b": (1, np.int64(2)), "c": np.arange(2), "d": math.nan}
    assert jsonable(value) == {"a": None, "b": [1, 2], "c": [0, 1], "d": None}
    json.dumps(jsonable(value), allow_nan=False)


def test_output_folder_is_checked_and_created_on_open(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with pytest.raises(DpfedInputError, match="not a folder"):
        output_folder(not_a_folder)
    out = output_folder(tmp_path / "a" / "b")
    assert not out.exists()
    writer = open_output(out)
    assert out.is_dir() and writer.out_dir == out and writer.files == []


def test_the_writer_remembers_each_file_once_in_order(tmp_path):
    writer = ArtifactWriter(tmp_path)
    writer.write_json("b.json", {"x": np.float32(0.5)})
    writer.write_text("a.md", "text")
    writer.write_json("b.json", {"x": 1})
    assert writer.files == ["b.json", "a.md"]
    assert json.loads((tmp_path / "b.json").read_text()) == {"x": 1}
    assert (tmp_path / "a.md").read_text() == "text"


def test_crash_while_writing_leaves_no_temporary_file(tmp_path, monkeypatch):
    writer = ArtifactWriter(tmp_path)

    def no_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(OSError, match="disk full"):
        writer.write_json("x.json", {"a": 1})
    assert list(tmp_path.iterdir()) == []
