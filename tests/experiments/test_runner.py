"""The shared runner of the reproductions: context, figures and summary, data, retries."""

from __future__ import annotations

import json
import math
import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.core.local import LocalSolveError
from dpfed.experiments.runner import (
    ATTEMPTS,
    RETRY_SEED_STEP,
    SUMMARY_FILES,
    Progress,
    Reproduction,
    data_folder,
    stopwatch,
    subsample,
    subsample_rows,
    with_retries,
    without_runs,
)

PNG = b"\x89PNG\r\n\x1a\nfake"


def test_stopwatch_counts_from_its_start():
    elapsed = stopwatch()
    first = elapsed()
    time.sleep(0.01)
    assert 0 <= first < elapsed()


def test_the_output_folder_is_checked_at_once_and_created_when_running(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with pytest.raises(DpfedInputError, match="not a folder"):
        Reproduction("test", not_a_folder, plots=False)
    run = Reproduction("test", tmp_path / "out", plots=False)
    assert not run.out.exists()
    with pytest.raises(RuntimeError, match="running"):
        run.writer  # noqa: B018
    steps = []
    with run.running(3) as same:
        assert same is run and run.out.is_dir()
        for k in range(3):
            run.step(f"run {k}")
            steps.append(k)
    run.step("after the block: no bar, no error")
    assert steps == [0, 1, 2] and run.writer.files == []


def test_a_missing_matplotlib_is_refused_before_anything_is_created(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(DpfedInputError, match=r"dpfed\[plot\]"):
        Reproduction("test", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    Reproduction("test", tmp_path / "out", plots=False)  # no figures, no matplotlib needed


def test_emit_draws_first_then_writes_the_json_and_the_png(tmp_path):
    run = Reproduction("test", tmp_path, plots=False)
    with run.running(0):
        payload = run.emit("fig", {"value": np.float64(0.5), "inf": math.inf}, lambda: PNG)
        assert payload == {"value": 0.5, "inf": math.inf, "png": "fig.png", "json": "fig.json"}
        assert list(payload)[-2:] == ["png", "json"]
        assert json.loads((tmp_path / "fig.json").read_text()) == {
            "value": 0.5,
            "inf": None,
            "png": "fig.png",
            "json": "fig.json",
        }
        assert (tmp_path / "fig.png").read_bytes() == PNG
        only_png = run.emit("other", {"a": 1}, lambda: PNG, names=("png",))
        assert only_png == {"a": 1, "png": "other.png"}

        def broken() -> bytes:
            raise RuntimeError("the figure failed")

        with pytest.raises(RuntimeError, match="figure failed"):
            run.emit("bad", {"a": 1}, broken)
    assert run.writer.files == ["fig.json", "fig.png", "other.json", "other.png"]
    assert not (tmp_path / "bad.json").exists()


def test_finish_writes_both_summary_files_last(tmp_path):
    run = Reproduction("test", tmp_path / "out", plots=False)
    with run.running(1):
        run.writer.write_text("figure.txt", "x")
    seen = {}

    def markdown(summary: dict) -> str:
        seen.update(summary)
        return "# Title\n"

    summary = run.finish({"quick": True, "notes": ["a note"], "value": math.nan}, markdown)
    assert list(summary) == ["out_dir", "quick", "notes", "value", "files", "seconds"]
    assert summary["files"] == ["figure.txt", *SUMMARY_FILES]
    assert summary["value"] is None and summary["seconds"] > 0
    assert math.isnan(seen["value"])  # the markdown sees the values before jsonable
    assert summary["out_dir"] == str((tmp_path / "out").resolve())
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary
    assert (tmp_path / "out" / "summary.md").read_text() == "# Title\n"


def test_data_folder_from_the_argument_or_the_environment(tmp_path, monkeypatch):
    kwargs = {"command": "test", "reads": "UCI Adult", "holding": "adult/adult.data"}
    monkeypatch.delenv("DPFED_DATA", raising=False)
    with pytest.raises(
        DpfedInputError,
        match=r"the test reproduction reads UCI Adult.*"
        r"DPFED_DATA.*adult/adult\.data",
    ):
        data_folder(None, **kwargs)
    monkeypatch.setenv("DPFED_DATA", str(tmp_path / "missing"))
    with pytest.raises(
        DpfedInputError,
        match=r"DPFED_DATA environment variable points at .*"
        r"not an existing folder",
    ):
        data_folder(None, **kwargs)
    with pytest.raises(DpfedInputError, match=r"--data-dir \(data_dir\) points at"):
        data_folder(tmp_path / "missing", **kwargs)
    monkeypatch.setenv("DPFED_DATA", str(tmp_path))
    assert data_folder(None, **kwargs) == tmp_path.resolve()
    (tmp_path / "sub").mkdir()
    assert data_folder(tmp_path / "sub" / ".." / "sub", **kwargs) == (tmp_path / "sub").resolve()


def test_subsample_keeps_every_row_or_a_sorted_draw():
    rng = np.random.default_rng(0)
    assert subsample(10, None, rng) is None and subsample(10, 10, rng) is None
    rows = subsample(100, 7, np.random.default_rng(3))
    assert rows.shape == (7,) and np.all(np.diff(rows) > 0) and rows.max() < 100
    assert np.array_equal(rows, subsample(100, 7, np.random.default_rng(3)))


@pytest.mark.parametrize("sparse", [False, True])
def test_subsample_rows_draws_train_then_test_rows_from_one_seed(sparse):
    X, Xt = np.arange(40.0).reshape(20, 2), np.arange(24.0).reshape(12, 2)
    y, yt = np.arange(20.0), np.arange(12.0)
    if sparse:
        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
    same = subsample_rows(X, y, Xt, yt, max_train_rows=None, max_test_rows=50, seed=0)
    assert same[0] is X and same[2] is Xt and same[4] is None
    Xs, ys, Xts, yts, step = subsample_rows(X, y, Xt, yt, max_train_rows=5, max_test_rows=4, seed=2)
    rng = np.random.default_rng(2)
    rows = np.sort(rng.choice(20, size=5, replace=False))
    test_rows = np.sort(rng.choice(12, size=4, replace=False))
    assert np.array_equal(ys, rows) and np.array_equal(yts, test_rows)
    dense = Xs.toarray() if sparse else Xs
    dense_test = Xts.toarray() if sparse else Xts
    assert np.array_equal(dense[:, 0], 2 * rows)
    assert np.array_equal(dense_test[:, 1], 2 * test_rows + 1)
    assert step == "rows subsampled to 5 train / 4 test (default_rng(2), quick mode)"


def test_with_retries_shifts_the_seed_after_a_failed_local_solve():
    seeds = []

    def flaky(seed: int) -> str:
        seeds.append(seed)
        if len(seeds) < 3:
            raise LocalSolveError(f"no convergence at {seed}")
        return f"model {seed}"

    done = with_retries(flaky, 7)
    assert seeds == [7, 7 + RETRY_SEED_STEP, 7 + 2 * RETRY_SEED_STEP]
    assert done.result == f"model {7 + 2 * RETRY_SEED_STEP}" and done.error is None
    assert done.seed_used == 7 + 2 * RETRY_SEED_STEP and done.seconds >= 0
    assert [a["seed"] for a in done.attempts] == seeds[:2]
    assert done.attempts[0]["error"] == "no convergence at 7"


def test_with_retries_gives_up_after_its_attempts_and_once_without_retry():
    calls = []

    def never(seed: int) -> None:
        calls.append(seed)
        raise LocalSolveError(f"failed at {seed}")

    done = with_retries(never, 0)
    assert len(calls) == ATTEMPTS and done.result is None and done.seed_used is None
    assert done.error == f"failed at {(ATTEMPTS - 1) * RETRY_SEED_STEP}"
    calls.clear()
    once = with_retries(never, 5, retry=False)
    assert calls == [5] and once.error == "failed at 5" and len(once.attempts) == 1
    with pytest.raises(ValueError, match="not a solve"):
        with_retries(lambda s: (_ for _ in ()).throw(ValueError("not a solve")), 0)


def test_without_runs():
    assert without_runs({"a": 1, "runs": {"x": 2}, "b": 3}) == {"a": 1, "b": 3}


def test_progress_is_silent_unless_asked_for_on_a_terminal(capsys):
    for enabled in (False, True):  # standard error is not a terminal under pytest
        bar = Progress(2, enabled, "test")
        bar.step("one")
        bar.close()
    assert capsys.readouterr() == ("", "")
