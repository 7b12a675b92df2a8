"""``dpfed reproduce bayes-linreg`` (Heikkilä et al. 2017, figure 2).

Needs the Wine Quality and Abalone files under ``$DPFED_DATA``; skipped otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dpfed.experiments import bayes_linreg as repro

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _data_dir() -> Path:
    base = Path(
        os.environ.get("DPFED_DATA") or Path(__file__).parents[2] / ".." / "shared" / "data"
    )
    needed = (
        "wine_quality/winequality-red.csv",
        "wine_quality/winequality-white.csv",
        "abalone/abalone.data",
    )
    if not all((base / rel).is_file() for rel in needed):
        pytest.skip(
            "Wine Quality / Abalone not found under $DPFED_DATA (set DPFED_DATA to a "
            "folder holding wine_quality/ and abalone/)"
        )
    return base


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, reproduce):
    out = tmp_path_factory.mktemp("repro_bayes")
    return out, reproduce("bayes-linreg", out, _data_dir())


def test_quick_run_writes_every_file(quick_run):
    out, summary = quick_run
    assert summary["files"] == [
        "bayes_linreg.json",
        "bayes_linreg.png",
        "summary.md",
        "summary.json",
    ]
    for name in summary["files"]:
        assert (out / name).is_file(), name
    png = (out / "bayes_linreg.png").read_bytes()
    assert len(png) > 1000 and png[:8] == PNG_MAGIC
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]
    text = (out / "summary.md").read_text()
    assert "indistinguishable" in text and "projection beats no projection at ε = 1" in text
    assert "declared public range" in text
    assert "Centring by DP column means" in text


def test_quick_run_results(quick_run):
    out, summary = quick_run
    plan = repro.quick_plan()
    fig = json.loads((out / "bayes_linreg.json").read_text())
    for ds in plan.datasets:
        assert len(fig["mae"][ds]["nonprivate"]) == plan.runs
        for key in ("trusted", "distributed", "trusted_proj", "distributed_proj", "input"):
            assert sorted(fig["mae"][ds][key]) == sorted(f"{e:g}" for e in plan.epsilons)
            for values in fig["mae"][ds][key].values():
                assert len(values) == plan.runs
                assert all(math.isfinite(v) and v > 0 for v in values)
        m = summary["medians"][ds]
        assert m["nonprivate"]["q25"] <= m["nonprivate"]["median"] <= m["nonprivate"]["q75"]
        # privacy costs accuracy: no private median beats the non-private one by much
        assert m["trusted_proj"]["1"]["median"] > 0.95 * m["nonprivate"]["median"]
    ind = summary["indistinguishable"]
    assert ind["n_tests"] == 2 * len(plan.datasets) * len(plan.epsilons)
    assert isinstance(ind["indistinguishable"], bool)
    assert all(0 <= t["p_value"] <= t["p_holm"] <= 1 for t in ind["tests"])
    assert summary["plan"]["centre"] is True
    for key in ("trusted", "distributed", "input"):
        report = fig["privacy"]["wine-red"][key]["1"]
        assert report["centre"] is True and len(report["releases"]) == 2
        assert report["releases"][0]["what"] == "column sums (the DP means of the centring)"
    report = fig["privacy"]["abalone"]["distributed_proj"]["1"]
    assert "column sums" in report["releases"][0]["what"]
    assert report["epsilon_accounted"] <= 1.0 + 1e-9
    gain = summary["projection_at_epsilon1"]
    assert len(gain["rows"]) == 2 * len(plan.datasets)
    assert all(isinstance(r["projection_beats"], bool) for r in gain["rows"])
    assert summary["cache"]["searches"] == 2 * len(plan.datasets) * len(plan.epsilons)


@pytest.mark.skipif(
    not os.environ.get("DPFED_REPRODUCE"),
    reason="the plan on an executor: set DPFED_REPRODUCE=1; CI checks executors on other plans",
)
@pytest.mark.networked
def test_the_cells_on_an_executor_give_the_same_reproduction(quick_run, tmp_path, without_timings):
    out, _ = quick_run
    with ProcessPoolExecutor(
        max_workers=2, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        repro.run_bayes_linreg_reproduction(
            tmp_path / "pool", data_dir=_data_dir(), quick=True, executor=pool
        )
    for name in ("summary.json", "bayes_linreg.json"):
        parallel = json.loads((tmp_path / "pool" / name).read_text())
        assert without_timings(parallel) == without_timings(json.loads((out / name).read_text())), (
            name
        )


def test_holm_adjust():
    assert repro.holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert repro.holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_missing_data_is_a_clear_input_error(check_missing_data):
    check_missing_data(
        repro.run_bayes_linreg_reproduction,
        "bayes-linreg",
        r"wine_quality[/\\]winequality-red\.csv",
    )


def test_no_centre_runs_the_papers_algorithm(tmp_path):
    plan = repro.BayesLinregPlan(
        quick=True,
        datasets=("wine-red",),
        epsilons=(1.0,),
        runs=2,
        methods=("nonprivate", "trusted"),
        threshold_repeats=1,
        centre=False,
    )
    summary = repro.run_bayes_linreg_reproduction(tmp_path / "out", data_dir=_data_dir(), plan=plan)
    assert summary["plan"]["centre"] is False
    fig = json.loads((tmp_path / "out" / "bayes_linreg.json").read_text())
    report = fig["privacy"]["wine-red"]["trusted"]["1"]
    assert report["centre"] is False and len(report["releases"]) == 1
    assert "No centring" in (tmp_path / "out" / "summary.md").read_text()


def test_failure_midway_leaves_no_summary(tmp_path, monkeypatch):
    base = _data_dir()

    def broken(*args, **kwargs):
        raise RuntimeError("simulated crash before the figure")

    monkeypatch.setattr(repro, "_indistinguishability", broken)
    plan = repro.BayesLinregPlan(
        quick=True,
        datasets=("wine-red",),
        epsilons=(1.0,),
        runs=2,
        methods=("nonprivate", "trusted"),
        threshold_repeats=1,
    )
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="simulated crash"):
        repro.run_bayes_linreg_reproduction(out, data_dir=base, plan=plan)
    assert list(out.iterdir()) == []


@pytest.mark.skipif(
    not os.environ.get("DPFED_REPRODUCE"),
    reason="the plan's extreme budgets on red wine: set DPFED_REPRODUCE=1; CI runs the quick run",
)
@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("DPFED_SLOW"),
    reason="the smallest and largest budgets on one data set take half a minute; set DPFED_SLOW=1",
)
def test_full_plan_on_red_wine(tmp_path):
    """The full plan's 25 runs at its two extreme budgets (the middle four are checked by the
    full reproduction under DPFED_REPRODUCE=1)."""
    full = repro.full_plan()
    plan = dataclasses.replace(
        full, datasets=("wine-red",), epsilons=(full.epsilons[0], full.epsilons[-1])
    )
    summary = repro.run_bayes_linreg_reproduction(tmp_path / "out", data_dir=_data_dir(), plan=plan)
    assert summary["indistinguishable"]["n_tests"] == 4
    assert summary["indistinguishable"]["indistinguishable"] is True
    assert summary["projection_at_epsilon1"]["all_beat"] is True


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("DPFED_REPRODUCE"),
    reason="the full experiment takes about 5 minutes on 2 cores; set DPFED_REPRODUCE=1",
)
def test_full_reproduction(tmp_path):
    summary = repro.run_bayes_linreg_reproduction(tmp_path / "out", data_dir=_data_dir())
    assert summary["indistinguishable"]["n_tests"] == 36
    assert summary["indistinguishable"]["indistinguishable"] is True
    assert summary["projection_at_epsilon1"]["all_beat"] is True


def _indist_with_one_rejection() -> dict:
    tests = [
        {"dataset": "wine-red", "projection": True, "epsilon": 31.6, "reject": True},
        {"dataset": "abalone", "projection": False, "epsilon": 1.0, "reject": False},
    ]
    return {"tests": tests, "n_rejected": 1, "indistinguishable": False}


def test_a_rejection_that_does_not_replicate_on_fresh_runs_does_not_decide():
    plan = repro.quick_plan()
    calls = []

    def same(cells):
        calls.extend(cells)
        rng = np.random.default_rng(1)
        ta = rng.normal(0.5, 0.01, 40)
        return [(list(ta), list(ta + rng.normal(0.0, 0.01, 40))) for _ in cells]

    out = repro._replicate(_indist_with_one_rejection(), plan, same)
    assert calls == [("wine-red", True, 31.6)]  # only the rejected cell is run again
    assert out["n_replicated"] == 0 and out["indistinguishable"] is True
    assert out["replications"][0]["runs"] == 40


def test_a_rejection_that_replicates_decides():
    plan = repro.quick_plan()

    def worse(cells):
        rng = np.random.default_rng(1)
        ta = rng.normal(0.5, 0.01, 40)
        return [(list(ta), list(ta + 0.05 + rng.normal(0.0, 0.001, 40))) for _ in cells]

    out = repro._replicate(_indist_with_one_rejection(), plan, worse)
    assert out["n_replicated"] == 1 and out["indistinguishable"] is False
