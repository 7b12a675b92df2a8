"""The vertical reproduction (``dpfed reproduce vertical``): outputs, atomicity, skips.

The runs need a9a under ``$DPFED_DATA``; they are skipped otherwise. Failure semantics under
test: every file is written atomically, so after a failure midway the output folder holds
only complete files (those of the experiments finished before the failure) and no temporary
file, and ``summary.md`` / ``summary.json`` (written last) are absent.
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from dpfed._validation import DpfedInputError
from dpfed.core.threads import limit_blas_threads
from dpfed.experiments import plotting
from dpfed.experiments import vertical as repro
from dpfed.experiments.runner import Reproduction
from dpfed.privacy.accounting import corollary1_epsilon

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
A9A_HINT = (
    "a9a not found under $DPFED_DATA: set DPFED_DATA to a folder holding a9a/a9a and "
    "a9a/a9a.t (LIBSVM binary data sets, "
    "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a)"
)


def _data_dir_with_a9a() -> Path:
    value = os.environ.get("DPFED_DATA", "")
    base = Path(value) if value else None
    if (
        base is None
        or not (base / "a9a" / "a9a").is_file()
        or not (base / "a9a" / "a9a.t").is_file()
    ):
        pytest.skip(A9A_HINT)
    return base


def _only_a9a(tmp_path: Path) -> Path:
    """A data folder holding only a9a (a symlink to the real one)."""
    base = _data_dir_with_a9a()
    data = tmp_path / "data"
    data.mkdir()
    (data / "a9a").symlink_to((base / "a9a").resolve(), target_is_directory=True)
    return data


_QUICK_PLAN = repro.quick_plan


def _tiny_plan() -> repro.ReproductionPlan:
    return dataclasses.replace(
        _QUICK_PLAN(),
        figure2=("arcene", "gisette"),
        iterations=2,
        sgd_epochs=2,
        noise_iterations=2,
        frontier_epsilons=(4.0,),
        frontier_seeds=(0,),
        max_train_rows=600,
        max_test_rows=300,
        noise_levels={"a9a": (10.0,)},
    )


def _leftovers(folder: Path) -> list[str]:
    return sorted(
        p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp")
    )


def _check_png(path: Path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000, path
    assert data[:8] == PNG_MAGIC, path


def _finite(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    base = _data_dir_with_a9a()
    out = tmp_path_factory.mktemp("repro")
    result = repro.run_vertical_reproduction(out, data_dir=base, quick=True)
    return out, result


def test_quick_run_writes_every_file(quick_run):
    out, result = quick_run
    names = set(result["files"])
    expected = {
        "figure1_a9a.png",
        "figure1_a9a.json",
        "figure3_a9a.png",
        "figure3_a9a.json",
        "frontier_a9a.png",
        "frontier_a9a.json",
        "summary.md",
        "summary.json",
    }
    assert expected <= names
    for name in names:
        assert (out / name).is_file(), name
        if name.endswith(".png"):
            _check_png(out / name)
    assert _leftovers(out) == []
    summary_md = (out / "summary.md").read_text()
    for name in names:
        if name.endswith(".png"):
            assert name in summary_md
    assert json.loads((out / "summary.json").read_text())["files"] == result["files"]


def test_quick_run_json_has_finite_key_numbers(quick_run):
    out, result = quick_run
    fig1 = json.loads((out / "figure1_a9a.json").read_text())
    assert {"figure", "dataset", "runs", "final", "baselines", "png"} <= set(fig1)
    assert set(fig1["runs"]) == {"admm", "sgd", "admm_noisy", "sgd_noisy"}
    for key, run in fig1["runs"].items():
        assert len(run["history"]) == fig1["epochs"], key
        for entry in run["history"]:
            assert _finite(entry["train_objective"]) and _finite(entry["test_log_loss"]), key
    for base in fig1["baselines"].values():
        assert _finite(base["test_log_loss"]) and 0 <= base["test_accuracy"] <= 1
    assert fig1["dataset"]["lam"] == 1e-4 and fig1["dataset"]["split"] == [66, 57]

    fig3 = json.loads((out / "figure3_a9a.json").read_text())
    assert fig3["levels"], "figure 3 needs noise levels"
    assert "not privacy guarantees" in fig3["paper_epsilon_note"]
    for row in fig3["levels"]:
        assert _finite(row["noise_sigma"]) and _finite(row["paper_epsilon_step_max"])
        assert _finite(row["log10_paper_epsilon"]) and _finite(row["test_log_loss"])
        assert row["certified"] is False and row["paper_epsilon_reason"]
        if row["paper_epsilon"] is not None:
            assert row["log10_paper_epsilon"] == pytest.approx(
                math.log10(row["paper_epsilon"]), rel=1e-9
            )
    for run in fig3["runs"].values():
        if run["privacy"]["mechanism"] == "paper":
            assert run["privacy"]["epsilon"] is None and "not a guarantee" in run["label"]
    # more noise, smaller per-iteration epsilon
    steps = [
        r["paper_epsilon_step_max"] for r in sorted(fig3["levels"], key=lambda r: r["noise_sigma"])
    ]
    assert steps == sorted(steps, reverse=True)
    assert "not privacy guarantees" in (out / "summary.md").read_text()

    frontier = json.loads((out / "frontier_a9a.json").read_text())
    assert "smallest_epsilon_beating_local_only" in frontier
    for row in frontier["rows"]:
        assert row["min"] <= row["median"] <= row["max"]
        assert all(_finite(v) for v in row["test_log_loss"])
        assert row["epsilon_spent_max"] <= row["epsilon"] * (1 + 1e-6)
    key = result["key_numbers"]
    assert _finite(key["final_test_log_loss"]["a9a"]["admm"])
    assert _finite(key["frontier"]["a9a"]["local_only"])


def _record_steps(monkeypatch) -> list[str]:
    """The progress bar's steps of the next runs, in the order they are taken."""
    steps: list[str] = []
    monkeypatch.setattr(Reproduction, "step", lambda self, description: steps.append(description))
    return steps


def test_serial_steps_follow_the_runs_in_order_and_match_the_count(tmp_path, monkeypatch):
    data = _only_a9a(tmp_path)
    monkeypatch.setattr(repro, "quick_plan", _tiny_plan)
    steps = _record_steps(monkeypatch)
    repro.run_vertical_reproduction(tmp_path / "out", data_dir=data, quick=True)
    assert steps == [
        "figure 1 a9a: ADMM",
        "figure 1 a9a: SGD lr=1",
        "figure 1 a9a: ADMM σ=10",
        "figure 1 a9a: SGD σ=10",
        "figure 1 a9a: baselines",
        "figure 3 a9a: no noise",
        "figure 3 a9a: σ=10",
        "frontier a9a: ε=4 seed 0",
    ]
    plan = _tiny_plan()
    assert len(steps) == repro._count_runs(plan, repro._DataCache(data, plan))


@pytest.mark.networked
def test_runs_on_a_process_pool_give_the_files_of_the_serial_run(
    quick_run, tmp_path, monkeypatch, without_timings
):
    """Every run goes to another process (so it must pickle), as on Ray with one BLAS thread
    per worker; the JSON files equal the serial run's but for the wall-clock seconds."""
    out, serial = quick_run
    base = _data_dir_with_a9a()
    steps = _record_steps(monkeypatch)
    pool = ProcessPoolExecutor(
        max_workers=2,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=limit_blas_threads,
    )
    with pool:
        result = repro.run_vertical_reproduction(
            tmp_path / "pool", data_dir=base, quick=True, executor=pool
        )
    assert without_timings(result) == without_timings(serial)
    names = sorted(p.name for p in out.glob("*.json"))
    assert "summary.json" in names and len(names) > 1
    assert names == sorted(p.name for p in (tmp_path / "pool").glob("*.json"))
    for name in names:
        assert without_timings(
            json.loads((tmp_path / "pool" / name).read_text())
        ) == without_timings(json.loads((out / name).read_text())), name
    plan = repro.quick_plan()
    assert len(set(steps)) == len(steps) == repro._count_runs(plan, repro._DataCache(base, plan))


def test_failure_midway_leaves_only_complete_files(tmp_path, monkeypatch):
    data = _only_a9a(tmp_path)
    monkeypatch.setattr(repro, "quick_plan", _tiny_plan)

    def broken(*args, **kwargs):
        raise RuntimeError("simulated crash after figure 1")

    monkeypatch.setattr(repro, "noise_levels_experiment", broken)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="simulated crash"):
        repro.run_vertical_reproduction(out, data_dir=data, quick=True)
    names = sorted(p.name for p in out.iterdir())
    # figure 1 finished before the crash and is complete; nothing after it, no summary
    assert names == ["figure1_a9a.json", "figure1_a9a.png"]
    json.loads((out / "figure1_a9a.json").read_text())
    _check_png(out / "figure1_a9a.png")


def test_missing_data_sets_are_skipped_with_a_note(tmp_path, monkeypatch):
    data = _only_a9a(tmp_path)
    monkeypatch.setattr(repro, "quick_plan", _tiny_plan)
    result = repro.run_vertical_reproduction(tmp_path / "out", data_dir=data, quick=True)
    assert set(result["skipped"]) == {"arcene", "gisette"}
    assert "not found" in result["skipped"]["gisette"]
    assert not any(name.startswith("figure2") for name in result["files"])
    summary_md = (tmp_path / "out" / "summary.md").read_text()
    assert "Skipped" in summary_md and "gisette" in summary_md


def test_no_data_folder_is_an_input_error(tmp_path, monkeypatch):
    monkeypatch.delenv("DPFED_DATA", raising=False)
    with pytest.raises(DpfedInputError, match="DPFED_DATA"):
        repro.run_vertical_reproduction(tmp_path / "out", quick=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DpfedInputError, match="holds none of"):
        repro.run_vertical_reproduction(tmp_path / "out", data_dir=empty, quick=True)
    assert not (tmp_path / "out").exists()


def test_missing_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(DpfedInputError, match=r'pip install "dpfed\[plot\]"'):
        plotting.require_matplotlib()
    with pytest.raises(DpfedInputError, match=r"dpfed\[plot\]"):
        repro.run_vertical_reproduction(tmp_path / "out", data_dir=tmp_path, quick=True)
    assert not (tmp_path / "out").exists()


@pytest.mark.networked
def test_importing_experiments_does_not_import_matplotlib():
    code = (
        "import sys, dpfed, dpfed.experiments, dpfed.experiments.plotting; "
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_log10_corollary1_matches_the_formula_and_survives_overflow():
    for eps, steps in ((0.5, 10), (3.0, 20), (40.0, 5)):
        expected = corollary1_epsilon(eps, steps, 5e-6)
        got = repro._log10_advanced_composition([eps] * steps, 5e-6)
        assert got == pytest.approx(math.log10(expected), rel=1e-12)
    huge = repro._log10_advanced_composition([2000.0] * 20, 5e-6)
    assert math.isfinite(huge) and huge == pytest.approx(
        (2000.0 + math.log(20 * 2000.0)) / math.log(10.0), rel=1e-9
    )


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("DPFED_REPRODUCE"),
    reason="the full reproduction takes 2 minutes of a 15-minute CI; the quick "
    "plan runs in CI; set DPFED_REPRODUCE=1 to run it",
)
def test_full_reproduction(tmp_path):
    base = _data_dir_with_a9a()
    result = repro.run_vertical_reproduction(tmp_path, data_dir=base, quick=False)
    assert not result["quick"]
    fig1 = json.loads((tmp_path / "figure1_a9a.json").read_text())
    # ADMM and SGD reach about the same test log loss on a9a (the paper's figure 1)
    finals = fig1["final"]
    assert finals["admm"]["test_log_loss"] < fig1["baselines"]["local_only"]["test_log_loss"]
    assert abs(finals["admm"]["test_log_loss"] - finals["sgd"]["test_log_loss"]) < 0.02
    rows = json.loads((tmp_path / "frontier_a9a.json").read_text())["rows"]
    assert [r["epsilon"] for r in rows] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    for name in result["files"]:
        assert (tmp_path / name).is_file()
