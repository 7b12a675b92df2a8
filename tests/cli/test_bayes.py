"""``dpfed train bayes-linreg`` on the UCI files (skipped when they are absent)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from dpfed.cli import main


@pytest.fixture(scope="module")
def data_dir() -> Path:
    base = Path(
        os.environ.get("DPFED_DATA") or Path(__file__).parents[2] / ".." / "shared" / "data"
    )
    if not all(
        (base / rel).is_file()
        for rel in ("wine_quality/winequality-red.csv", "abalone/abalone.data")
    ):
        pytest.skip("Wine Quality / Abalone not found under $DPFED_DATA")
    return base


def _train(tmp_path, data_dir, *extra, data="wine-red"):
    out = tmp_path / "r.json"
    code = main(
        [
            "train",
            "bayes-linreg",
            "--data",
            data,
            "--data-dir",
            str(data_dir),
            "--runs",
            "2",
            "--quiet",
            "--out",
            str(out),
            *extra,
        ]
    )
    return code, out


def test_distributed_with_projection_writes_mae_per_run_and_median(tmp_path, data_dir, capsys):
    code, out = _train(
        tmp_path,
        data_dir,
        "--epsilon",
        "1",
        "--delta",
        "1e-4",
        "--projection",
        "--mode",
        "distributed",
        "--compute-nodes",
        "3",
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert result["protocol"] == "bayes-linreg"
    assert len(result["mae"]) == 2 and result["median"] == pytest.approx(np.median(result["mae"]))
    assert result["data"]["n_test"] == 500 and result["data"]["n_train"] == 1099
    privacy = result["privacy"]
    assert privacy["epsilon"] == 1.0 and privacy["delta"] == 1e-4
    assert privacy["calibration"] == "tight" and privacy["epsilon_accounted"] <= 1.0 + 1e-9
    assert len(privacy["releases"]) == 2 and privacy["centre"] is True
    assert "column sums" in privacy["releases"][0]["what"]
    assert result["config"]["centre"] is True
    assert all(len(r["centring"]["mean_x"]) == 11 for r in result["runs"])
    assert any("declared public bounds" in n for n in privacy["notes"])
    assert result["preprocessing"]["scaling"] == "declared public bounds"
    assert result["preprocessing"]["target"] == {"quality": [0.0, 10.0]}
    assert result["config"]["compute_nodes"] == 3 and result["config"]["projection"] is True
    assert all(
        r["thresholds"]["p_x"] in np.round(np.arange(0.1, 2.05, 0.1), 10) for r in result["runs"]
    )
    printed = capsys.readouterr().out
    assert "median test MAE over 2 runs" in printed and "wrote" in printed
    # the same seed gives the same numbers
    code, again = _train(
        tmp_path / "b",
        data_dir,
        "--epsilon",
        "1",
        "--delta",
        "1e-4",
        "--projection",
        "--mode",
        "distributed",
        "--compute-nodes",
        "3",
    )
    assert json.loads(again.read_text())["mae"] == result["mae"]


def test_centring_release_and_no_centre(tmp_path, data_dir):
    code, out = _train(
        tmp_path,
        data_dir,
        "--epsilon",
        "1",
        "--delta",
        "1e-4",
        "--mode",
        "trusted",
        "--centre-share",
        "0.2",
    )
    assert code == 0
    result = json.loads(out.read_text())
    releases = result["privacy"]["releases"]
    assert [r["what"] for r in releases] == [
        "column sums (the DP means of the centring)",
        "sufficient statistics",
    ]
    assert result["privacy"]["first_share"] == 0.2 and result["config"]["centre_share"] == 0.2
    assert result["privacy"]["epsilon_accounted"] <= 1.0 + 1e-9
    code, out = _train(
        tmp_path / "p",
        data_dir,
        "--epsilon",
        "1",
        "--delta",
        "1e-4",
        "--mode",
        "trusted",
        "--no-centre",
    )
    assert code == 0
    paper = json.loads(out.read_text())
    assert paper["privacy"]["centre"] is False and len(paper["privacy"]["releases"]) == 1
    assert paper["config"]["centre"] is False
    assert all(r["centring"] is None and r["intercept"] == 0.0 for r in paper["runs"])


def test_paper_calibration_notes_epsilon_at_least_one(tmp_path, data_dir):
    code, out = _train(
        tmp_path,
        data_dir,
        "--epsilon",
        "1",
        "--delta",
        "1e-4",
        "--mode",
        "trusted",
        "--calibration",
        "paper",
        "--no-centre",
        data="abalone",
    )
    assert code == 0
    privacy = json.loads(out.read_text())["privacy"]
    assert privacy["calibration"] == "paper"
    assert any("only for epsilon < 1" in n for n in privacy["notes"])


def test_paper_calibration_stores_the_accounted_epsilon_when_it_is_larger(
    tmp_path, data_dir, capsys
):
    code, out = _train(
        tmp_path, data_dir, "--epsilon", "40", "--delta", "1e-5", "--calibration", "paper"
    )
    assert code == 0
    privacy = json.loads(out.read_text())["privacy"]
    # the distributed mode's exact ring noise is accounted by Renyi DP: 47.03, above the
    # 44.52 that the continuous Gaussian's exact profile gives for the same multipliers
    assert privacy["epsilon_accounted"] == pytest.approx(47.03, abs=0.01)
    assert privacy["epsilon"] == privacy["epsilon_accounted"] > 44.52
    assert privacy["paper_epsilon"] == 40
    assert "epsilon = 47.03" in capsys.readouterr().out


def test_nonprivate_and_input_modes(tmp_path, data_dir):
    code, out = _train(tmp_path, data_dir, "--mode", "nonprivate")
    assert code == 0
    nonprivate = json.loads(out.read_text())
    assert nonprivate["privacy"]["epsilon"] == 0.0 and nonprivate["median"] < 1.2
    code, out = _train(
        tmp_path / "i", data_dir, "--mode", "input", "--epsilon", "1", "--delta", "1e-4"
    )
    assert code == 0
    assert json.loads(out.read_text())["median"] > nonprivate["median"]


def test_bad_input_exits_2_without_output(tmp_path, data_dir, capsys):
    code, out = _train(tmp_path, data_dir, "--mode", "trusted")
    assert code == 2 and not out.exists()
    assert "needs --epsilon and --delta" in capsys.readouterr().err
    code, out = _train(tmp_path, data_dir, "--mode", "nonprivate", "--projection")
    assert code == 2 and not out.exists()
    code, out = _train(tmp_path, data_dir, "--epsilon", "1", "--delta", "1e-4", "--runs", "0")
    assert code == 2 and not out.exists()
    code, out = _train(tmp_path, tmp_path / "nowhere", "--mode", "nonprivate")
    assert code == 2 and not out.exists()


def test_runs_on_ray_tasks_give_the_same_result(tmp_path, data_dir, local_ray):
    options = (
        "--epsilon",
        "1",
        "--delta",
        "1e-4",
        "--projection",
        "--mode",
        "distributed",
        "--compute-nodes",
        "3",
    )
    code, here = _train(tmp_path / "here", data_dir, *options)
    assert code == 0
    code, on_ray = _train(tmp_path / "ray", data_dir, *options, "--engine", "ray")
    assert code == 0
    a, b = json.loads(here.read_text()), json.loads(on_ray.read_text())
    a.pop("seconds"), b.pop("seconds")
    assert a == b
