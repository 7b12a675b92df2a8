"""The consensus experiment (``dpfed reproduce consensus``, DP consensus ADMM of paper 002).

Needs UCI Adult under ``$DPFED_DATA``; skipped otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import pytest

from dpfed.experiments import consensus as repro

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, adult_dir, reproduce):
    out = tmp_path_factory.mktemp("repro_cons")
    return out, reproduce("consensus", out, adult_dir)


def test_cli_quick_run_writes_every_file(quick_run):
    out, summary = quick_run
    assert summary["files"] == ["consensus.json", "consensus.png", "summary.md", "summary.json"]
    for name in summary["files"]:
        assert (out / name).is_file(), name
    png = (out / "consensus.png").read_bytes()
    assert len(png) > 1000 and png[:8] == PNG_MAGIC
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]
    text = (out / "summary.md").read_text()
    assert "no experiments" in text and "ε = 1" in text


def test_quick_run_json_keys(quick_run):
    out, summary = quick_run
    plan = repro.quick_plan()
    fig = json.loads((out / "consensus.json").read_text())
    assert {"levels", "nonprivate", "centralized", "runs", "plan"} <= set(fig)
    assert [lv["epsilon"] for lv in fig["levels"]] == list(plan.epsilons)
    for lv in fig["levels"]:
        assert _finite(lv["noise_multiplier"]) and lv["noise_multiplier"] > 0
        assert lv["epsilon_spent"] <= lv["epsilon"] * (1 + 1e-6)
        assert len(lv["test_accuracy_mean"]) == plan.iterations
        acc = lv["accuracy"]
        assert acc["min"] <= acc["mean"] <= acc["max"]
    # more budget, less noise
    zs = [lv["noise_multiplier"] for lv in fig["levels"]]
    assert zs == sorted(zs, reverse=True)
    assert 0.5 < fig["centralized"]["test_accuracy"] <= 1.0
    h = summary["headlines"]
    assert {
        "epsilon1_accuracy",
        "target_met_mean",
        "target_met_every_seed",
        "noise_multiplier",
        "nonprivate_accuracy",
        "centralized_accuracy",
    } <= set(h)
    assert _finite(h["epsilon1_accuracy"]["mean"]) and _finite(h["epsilon1_accuracy"]["min"])
    assert isinstance(h["target_met_mean"], bool)
    assert isinstance(h["target_met_every_seed"], bool)


def test_missing_data_is_a_clear_input_error(check_missing_data):
    check_missing_data(repro.run_consensus_reproduction, "consensus", r"adult[/\\]adult\.data")


def test_failure_midway_leaves_no_summary(tmp_path, monkeypatch, adult_dir):
    base = adult_dir

    def broken(*args, **kwargs):
        raise RuntimeError("simulated crash before the figure")

    monkeypatch.setattr(repro, "_centralized", broken)
    monkeypatch.setattr(
        repro,
        "quick_plan",
        lambda: repro.ConsensusPlan(
            quick=True,
            clients=4,
            lam=1e-5,
            rho=0.015,
            iterations=2,
            epsilons=(5.0,),
            seeds=(0,),
            max_train_rows=400,
            max_test_rows=200,
        ),
    )
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="simulated crash"):
        repro.run_consensus_reproduction(out, data_dir=base, quick=True)
    assert list(out.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("DPFED_REPRODUCE"),
    reason="the full plan's epsilon-1 level takes half a minute; CI checks the "
    "same figure on one seed (tests/protocols/consensus/test_driver.py); "
    "set DPFED_REPRODUCE=1",
)
def test_full_consensus(tmp_path, adult_dir, monkeypatch):
    """The full plan on all of Adult at its one level the target is about, epsilon 1 (the
    other levels' runs are independent of it, take four fifths of the time and are checked
    nowhere; the quick run covers a plan of several levels)."""
    base = adult_dir
    full = repro.full_plan()
    assert 1.0 in full.epsilons
    monkeypatch.setattr(repro, "full_plan", lambda: dataclasses.replace(full, epsilons=(1.0,)))
    summary = repro.run_consensus_reproduction(tmp_path / "out", data_dir=base)
    assert [level["epsilon"] for level in summary["levels"]] == [1.0]
    headlines = summary["headlines"]
    acc = headlines["epsilon1_accuracy"]
    assert acc["n"] == 3
    # on all of Adult at total epsilon 1, delta 1e-5 the method's mean over 30 seeds is 0.828
    # (a seed's standard deviation 0.0025; docs/reproductions.md): three seeds' mean stays
    # above 0.823 unless the method got worse (3.5 standard errors). The 0.83 target sits at
    # the mean, so the report's verdict on it must only be honest.
    assert acc["mean"] >= 0.823, acc
    assert headlines["target_met_mean"] == (acc["mean"] >= repro.TARGET_ACCURACY)


def test_the_grid_on_ray_tasks_gives_the_same_reproduction(
    quick_run, tmp_path, adult_dir, local_ray, without_timings
):
    from dpfed.engines.tasks import RayExecutor

    out, serial = quick_run
    summary = repro.run_consensus_reproduction(
        tmp_path / "ray", data_dir=adult_dir, quick=True, executor=RayExecutor()
    )
    assert without_timings(summary) == without_timings(serial)
    figure = json.loads((tmp_path / "ray" / "consensus.json").read_text())
    assert without_timings(figure) == without_timings(
        json.loads((out / "consensus.json").read_text())
    )
