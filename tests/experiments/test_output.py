"""Shared output of the reproductions: atomic files, JSON-safe values, the summary files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.experiments.output import (
    finish_markdown,
    fmt,
    jsonable,
    open_output,
    output_folder,
    write_summary,
)


def test_jsonable_makes_strict_json():
    value = {"a": np.float64("inf"), "b": (1, np.int64(2)), "c": np.arange(2), "d": math.nan}
    assert jsonable(value) == {"a": None, "b": [1, 2], "c": [0, 1], "d": None}
    json.dumps(jsonable(value), allow_nan=False)


def test_fmt():
    assert fmt(None) == "n/a"
    assert fmt(True) == "yes" and fmt(False) == "no"
    assert fmt(math.inf) == "inf"
    assert fmt(0.123456) == "0.1235" and fmt(0.123456, 2) == "0.12"
    assert fmt(7) == "7"


def test_output_folder_is_checked_and_created_on_open(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with pytest.raises(DpfedInputError, match="not a folder"):
        output_folder(not_a_folder)
    out = output_folder(tmp_path / "a" / "b")
    assert not out.exists()
    writer = open_output(out)
    assert out.is_dir() and writer.out_dir == out and writer.files == []


def test_write_summary_completes_and_writes_both_files_last(tmp_path):
    writer = open_output(tmp_path / "out")
    writer.write_text("figure.txt", "x")

    def markdown(summary: dict) -> str:
        return finish_markdown(["# Title", f"{summary['seconds'] >= 0}"], summary)

    summary = write_summary(writer, {"quick": True, "notes": ["a note"], "value": math.nan},
                            started=0.0, markdown=markdown)
    assert summary["files"] == ["figure.txt", "summary.md", "summary.json"]
    assert summary["value"] is None and summary["seconds"] > 0
    assert list(summary) == ["out_dir", "quick", "notes", "value", "files", "seconds"]
    assert summary["out_dir"] == str((tmp_path / "out").resolve())
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary
    text = (tmp_path / "out" / "summary.md").read_text()
    assert text == ("# Title\nTrue\n\n## Notes\n\n- a note\n\n## Files\n\n- `figure.txt`\n"
                    "- `summary.md`\n- `summary.json`\n")


def test_finish_markdown_without_notes():
    text = finish_markdown(["# T"], {"notes": [], "files": ["a"]})
    assert text == "# T\n\n## Files\n\n- `a`\n"
