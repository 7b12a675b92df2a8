"""The DCA scaling run: the paper's table, the timing helper and the quick reproduction."""

from __future__ import annotations

import json

import pytest

from dpfed import DpfedInputError
from dpfed.experiments.dca_scaling import (
    PAPER_SPARK_SECONDS,
    choose_workers,
    paper_seconds,
    run_dca_scaling,
    time_secure_sum,
)


def test_the_papers_table():
    assert len(PAPER_SPARK_SECONDS) == 16
    assert paper_seconds(10000, 1000) == 101.2
    assert paper_seconds(100000, 10000) == 1592.29
    assert paper_seconds(100, 10) == 1.72 and paper_seconds(100000, 10) == 8.58
    assert paper_seconds(100, 10000) == 15.30
    assert paper_seconds(10000, 1000, compute_nodes=5) is None
    assert paper_seconds(500, 10) is None


def test_small_cells_run_in_one_process():
    assert choose_workers(10000, 1000, 10) == 1
    assert choose_workers(100000, 10000, 10) >= 1


def test_time_secure_sum_reports_a_checked_cell():
    cell = time_secure_sum(200, 30, 4, tolerated=1, drop=1, repeats=2, workers=1)
    assert len(cell["seconds"]) == 2 and cell["median"] > 0
    assert cell["dropped"] == 1 and cell["paper_seconds"] is None and cell["ratio"] is None
    assert cell["keystream_bytes"] == 8 * 3 * 199 * 30
    assert cell["check"]["in_noise_stds"] < 6
    for key in ("values", "noise_seeding", "noise_sampling", "encode", "masks", "sums", "wall"):
        assert key in cell["timing"]
    with pytest.raises(DpfedInputError, match="workers"):
        time_secure_sum(10, 3, workers=0)


def test_quick_reproduction_writes_its_files(tmp_path):
    summary = run_dca_scaling(tmp_path / "out", quick=True, workers=1)
    assert summary["quick"] and len(summary["cells"]) == 4
    assert all(c["ratio"] > 0 for c in summary["cells"])
    payload = json.loads((tmp_path / "out" / "dca_scaling.json").read_text())
    assert payload["plan"]["compute_nodes"] == 10 and "Spark" in payload["comparison"]
    assert summary["files"][-2:] == ["summary.md", "summary.json"]
