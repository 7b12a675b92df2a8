"""The benchmark's re-implementation of the paper's prototype computes dpfed's iterates."""

from __future__ import annotations

import importlib.util
import json
import sys
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed.core.losses import get_loss
from dpfed.core.regularizers import L2
from dpfed.core.xupdate import make_local_solver
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
TIGHT = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10000}


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def proto():
    return _module("prototype_admm")


def _problem(n: int = 200, widths=(3, 2), seed: int = 0, n_test: int = 100):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n + n_test, sum(widths)))
    w = rng.standard_normal(sum(widths))
    y = np.where(X @ w + 0.5 * rng.standard_normal(n + n_test) > 0, 1.0, -1.0)
    edges = np.cumsum([0, *widths])
    blocks = [X[:n, a:b] for a, b in pairwise(edges)]
    test = [X[n:, a:b] for a, b in pairwise(edges)]
    return blocks, y[:n], test, y[n:]


def test_entrywise_z_update_is_the_vectorised_prox(proto) -> None:
    rng = np.random.default_rng(1)
    s, dual = 3 * rng.standard_normal(50), rng.standard_normal(50)
    y = np.where(rng.random(50) > 0.5, 1.0, -1.0)
    z = proto.z_update_entrywise(s, dual, y, 0.25)
    np.testing.assert_allclose(z, get_loss("logistic").prox(s + dual / 0.25, y, 0.25), atol=1e-6)


def test_lbfgs_x_update_is_the_exact_solve(proto) -> None:
    blocks, _, _, _ = _problem()
    rng = np.random.default_rng(2)
    others, z, dual = (rng.standard_normal(200) for _ in range(3))
    block = sp.csr_matrix(blocks[0])
    x = proto.x_update_lbfgs(
        block, others, z, dual, reg_weight=0.02, rho=0.25, x0=np.zeros(3), options=TIGHT
    )
    exact = make_local_solver(blocks[0], L2(), 0.02).solve(
        z - others - dual / 0.25, 0.25, np.zeros(3)
    )
    np.testing.assert_allclose(x, exact, atol=1e-7)


@pytest.mark.parametrize("options", [TIGHT, None])
def test_prototype_iterates_agree_with_train_vertical(proto, options) -> None:
    blocks, y, test, yt = _problem()
    lam, rho = 1e-2, 0.25
    ours = train_vertical(
        blocks,
        y,
        VerticalConfig(
            lam=lam,
            rho=rho,
            iterations=5,
            adaptive_rho=False,
            acceleration="none",
            fit_intercept=False,
        ),  # as the prototype
        test_blocks=test,
        test_labels=yt,
    )
    theirs = proto.prototype_admm(
        blocks,
        y,
        lam=lam,
        rho=rho,
        iterations=5,
        test_blocks=test,
        test_labels=yt,
        lbfgs_options=options,
    )
    assert len(theirs["history"]) == 5
    for x, (name, model) in zip(theirs["models"], ours.models.items(), strict=True):
        np.testing.assert_allclose(x, model, atol=1e-4, err_msg=name)
    for a, b in zip(theirs["history"], ours.history, strict=True):
        assert a["iteration"] == b["iteration"]
        assert a["train_objective"] == pytest.approx(b["train_objective"], abs=1e-6)
        assert a["test_log_loss"] == pytest.approx(b["test_log_loss"], abs=1e-5)


def test_prototype_stops_at_the_target_after_min_iterations(proto) -> None:
    blocks, y, test, yt = _problem()
    full = proto.prototype_admm(blocks, y, lam=1e-2, iterations=8, test_blocks=test, test_labels=yt)
    losses = [h["test_log_loss"] for h in full["history"]]
    target = losses[3]
    first = next(i for i, v in enumerate(losses) if v <= target) + 1
    stopped = proto.prototype_admm(
        blocks, y, lam=1e-2, iterations=8, test_blocks=test, test_labels=yt, target=target
    )
    assert len(stopped["history"]) == first
    late = proto.prototype_admm(
        blocks,
        y,
        lam=1e-2,
        iterations=8,
        test_blocks=test,
        test_labels=yt,
        target=10.0,
        min_iterations=3,
    )
    assert len(late["history"]) == 3
    timed = [h["x_seconds"] + h["z_seconds"] for h in full["history"]]
    assert full["history"][-1]["seconds"] == pytest.approx(sum(timed), rel=0.05, abs=1e-3)


def test_benchmark_report_on_a_small_problem(tmp_path: Path) -> None:
    bench = _module("bench_vertical")
    blocks, y, test, yt = _problem(n=300, n_test=150)
    args = bench.build_parser().parse_args(
        [
            "--out",
            str(tmp_path / "r.json"),
            "--dpfed-iterations",
            "3",
            "--repeats",
            "1",
            "--max-iterations",
            "15",
            "--lam",
            "1e-2",
            "--target",
            "0.6",
            "--prototype-iterations",
            "2",
        ]
    )
    report = bench.run(blocks, y, test, yt, args)
    json.dumps(report)
    assert report["machine"]["cpu_count"] and report["machine"]["numpy"] == np.__version__
    assert report["dpfed"]["iterations_to_target"] == report["prototype"]["iterations_to_target"]
    assert report["prototype"]["time_to_target_method"].startswith("measured")
    assert report["ratio_per_iteration"] > 0 and report["ratio_time_to_target"] > 0
    extrapolated = bench.run(
        blocks,
        y,
        test,
        yt,
        bench.build_parser().parse_args(
            [
                "--dpfed-iterations",
                "2",
                "--repeats",
                "1",
                "--max-iterations",
                "15",
                "--lam",
                "1e-2",
                "--target",
                "0.6",
                "--prototype-iterations",
                "1",
                "--prototype-budget",
                "0",
            ]
        ),
    )
    assert extrapolated["prototype"]["iterations_run"] == 1
    assert extrapolated["prototype"]["time_to_target_method"].startswith("extrapolated")
