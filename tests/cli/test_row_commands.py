"""``dpfed train consensus`` and ``dpfed train decentralized``."""

import json

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from dpfed.cli import main
from dpfed.cli.decentralized import central_reference
from dpfed.protocols.decentralized.driver import (
    DecentralizedConfig,
    centralized_optimum,
    joint_objective,
)

HISTORY_KEYS = (
    "iteration",
    "seconds",
    "train_objective",
    "test_log_loss",
    "test_accuracy",
    "epsilon",
)


def _run(tmp_path, protocol, *extra, count=("--clients", "3")):
    out = tmp_path / "r.json"
    args = [
        "train",
        protocol,
        "--data",
        "breast_cancer",
        *count,
        "--iterations",
        "5",
        "--quiet",
        "--out",
        str(out),
        *extra,
    ]
    return main(args), out


def _check_schema(result, protocol, iterations=5):
    assert result["protocol"] == protocol
    assert result["data"] == "breast_cancer"
    assert len(result["history"]) == iterations
    for entry in result["history"]:
        for key in HISTORY_KEYS:
            assert key in entry
    assert [h["iteration"] for h in result["history"]] == list(range(1, iterations + 1))
    seconds = [h["seconds"] for h in result["history"]]
    assert seconds == sorted(seconds)
    assert result["final"] == result["history"][-1]
    assert {"mechanism", "epsilon", "delta", "accountant"} <= set(result["privacy"])
    assert {"config", "parties", "seconds"} <= set(result)


def test_consensus_writes_the_result_schema(tmp_path, capsys):
    code, out = _run(tmp_path, "consensus")
    assert code == 0
    result = json.loads(out.read_text())
    _check_schema(result, "consensus")
    assert len(result["parties"]) == 3
    assert sum(p["n_samples"] for p in result["parties"]) == 398  # 70 % of 569 rows
    assert result["privacy"]["mechanism"] == "none" and result["privacy"]["epsilon"] == 0.0
    assert result["config"]["lam"] == 1e-5 and result["config"]["rho"] == 0.015
    # the declared-bounds scaling leaves every column a part of [-1, 1], so the unit-norm rows
    # share a large common direction and ADMM converges slowly: about 0.81 after these 5
    # rounds (0.92 after 50), well above the 0.63 of always predicting benign
    assert result["final"]["test_accuracy"] > 0.75
    assert result["preprocessing"]["scaling"] == "declared public bounds"
    assert result["preprocessing"]["before_training"].startswith("every row divided")
    assert "wrote" in capsys.readouterr().out


def test_consensus_with_gaussian_noise_reports_its_privacy(tmp_path, capsys):
    extra = [
        "--mechanism",
        "gaussian",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--seed",
        "0",
        "--accountant",
        "rdp",
    ]
    code, out = _run(tmp_path, "consensus", *extra)
    assert code == 0
    result = json.loads(out.read_text())
    _check_schema(result, "consensus")
    privacy = result["privacy"]
    assert privacy["mechanism"] == "gaussian" and privacy["accountant"] == "rdp"
    assert privacy["delta"] == 1e-5
    assert 0.9 < privacy["epsilon"] <= 1.0
    assert set(privacy["per_party"]) == {"client1", "client2", "client3"}
    assert all(p["releases"] == 5 for p in privacy["per_party"].values())
    assert result["config"]["seed"] == 0
    assert "epsilon = " in capsys.readouterr().out
    # the same seed gives the same result file (up to timings)
    (tmp_path / "again").mkdir()
    code, again = _run(tmp_path / "again", "consensus", *extra)
    assert code == 0
    repeat = json.loads(again.read_text())
    assert [h["train_objective"] for h in repeat["history"]] == [
        h["train_objective"] for h in result["history"]
    ]


def test_decentralized_writes_the_result_schema(tmp_path, capsys):
    code, out = _run(tmp_path, "decentralized", "--graph", "ring", count=("--nodes", "4"))
    assert code == 0
    result = json.loads(out.read_text())
    _check_schema(result, "decentralized")
    assert result["graph"]["nodes"] == 4 and result["graph"]["edges"] == 4
    assert len(result["parties"]) == 4
    for entry in result["history"]:
        assert entry["misclassification_rate"] == pytest.approx(1.0 - entry["test_accuracy"])
    # the paper's non-private setting: rho = 1e-10, C^R = 1750
    assert result["config"]["rho"] == 1e-10 and result["config"]["loss_scale"] == 1750.0
    assert result["privacy"]["mechanism"] == "none"
    assert "misclassification rate" in capsys.readouterr().out


def test_decentralized_with_dvp_reports_the_honest_total(tmp_path):
    code, out = _run(
        tmp_path,
        "decentralized",
        "--graph",
        "ring",
        "--perturbation",
        "dvp",
        "--alpha",
        "1",
        "--seed",
        "0",
        count=("--nodes", "4"),
    )
    assert code == 0
    result = json.loads(out.read_text())
    _check_schema(result, "decentralized")
    privacy = result["privacy"]
    assert privacy["mechanism"] == "dvp"
    assert privacy["alpha_per_release"] == [1.0] * 5
    assert privacy["epsilon"] == pytest.approx(5.0)  # basic composition of 5 releases
    assert result["config"]["rho"] == pytest.approx(10**-2.5)
    assert [h["epsilon"] for h in result["history"]] == pytest.approx([1.0, 2.0, 3.0, 4.0, 5.0])


def test_decentralized_with_one_alpha_per_node(tmp_path):
    code, out = _run(
        tmp_path,
        "decentralized",
        "--graph",
        "ring",
        "--perturbation",
        "pvp",
        "--node-alphas",
        "1,0.5,2,1",
        "--seed",
        "0",
        count=("--nodes", "4"),
    )
    assert code == 0
    privacy = json.loads(out.read_text())["privacy"]
    assert privacy["most_exposed_node"] == "node2"
    assert privacy["epsilon"] == pytest.approx(10.0)  # 5 releases at alpha 2
    assert {k: v["epsilon"] for k, v in privacy["per_node"].items()} == pytest.approx(
        {"node0": 5.0, "node1": 2.5, "node2": 10.0, "node3": 5.0}
    )


def test_decentralized_from_a_libsvm_file_with_a_test_file(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for name, n in (("train.svm", 160), ("test.svm", 60)):
        X = rng.normal(size=(n, 5))
        dump_svmlight_file(
            X, np.where(X[:, 0] - X[:, 2] > 0, 1, -1), str(tmp_path / name), zero_based=False
        )
        paths.append(str(tmp_path / name))
    out = tmp_path / "r.json"
    code = main(
        [
            "train",
            "decentralized",
            "--data",
            paths[0],
            "--test",
            paths[1],
            "--nodes",
            "4",
            "--graph",
            "complete",
            "--iterations",
            "3",
            "--eta",
            "0.5",
            "--loss-scale",
            "10",
            "--rho",
            "0.1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert result["graph"]["edges"] == 6
    assert result["final"]["test_accuracy"] > 0.8
    assert result["preprocessing"]["scaling"] == "none"


@pytest.mark.parametrize(
    "protocol, extra, match",
    [
        ("consensus", ["--mechanism", "gaussian", "--epsilon", "1"], "delta"),
        (
            "consensus",
            [
                "--mechanism",
                "gaussian",
                "--epsilon",
                "1",
                "--noise-multiplier",
                "2",
                "--delta",
                "1e-5",
            ],
            "exactly one of epsilon or noise_multiplier",
        ),
        ("consensus", ["--epsilon", "1"], "gaussian"),
        ("consensus", ["--lam", "0"], "lam"),
        ("decentralized", ["--perturbation", "dvp"], "needs alpha"),
        ("decentralized", ["--perturbation", "pvp", "--alpha", "-1"], "alpha"),
        ("decentralized", ["--alpha", "1"], "alpha needs perturbation"),
        ("decentralized", ["--perturbation", "dvp", "--node-alphas", "1,1"], "one alpha per node"),
        ("decentralized", ["--graph", "erdos-renyi", "--p", "0"], "4 connected components"),
        ("decentralized", ["--graph", "ring", "--p", "0.5"], "p is only used"),
        ("decentralized", ["--eta", "0"], "eta"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_file(tmp_path, capsys, protocol, extra, match):
    count = ("--clients", "3") if protocol == "consensus" else ("--nodes", "4")
    code, out = _run(tmp_path, protocol, *extra, count=count)
    err = capsys.readouterr().err
    assert code == 2
    assert match in err and err.startswith("dpfed: error:")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_disconnected_graph_names_its_components(tmp_path, capsys):
    code, out = _run(
        tmp_path, "decentralized", "--graph", "erdos-renyi", "--p", "0", count=("--nodes", "4")
    )
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "disconnected" in err and "components" in err


def test_a_test_file_needs_a_libsvm_training_file(tmp_path, capsys):
    code, out = _run(tmp_path, "consensus", "--test", str(tmp_path / "t.svm"))
    assert code == 2 and not out.exists()
    assert "--test" in capsys.readouterr().err


def test_a_ring_needs_three_nodes(tmp_path, capsys):
    code, out = _run(tmp_path, "decentralized", "--graph", "ring", count=("--nodes", "2"))
    assert code == 2 and not out.exists()
    assert "ring" in capsys.readouterr().err


@pytest.mark.parametrize(
    "protocol, count", [("consensus", ("--clients", "3")), ("decentralized", ("--nodes", "4"))]
)
def test_engine_ray_writes_the_same_result_and_its_workers(tmp_path, protocol, count, local_ray):
    (tmp_path / "here").mkdir()
    (tmp_path / "ray").mkdir()
    assert _run(tmp_path / "here", protocol, count=count)[0] == 0
    code, out = _run(
        tmp_path / "ray", protocol, "--engine", "ray", "--ray-workers", "2", count=count
    )
    assert code == 0
    here = json.loads((tmp_path / "here" / "r.json").read_text())
    on_ray = json.loads(out.read_text())
    assert [w["roles"] for w in on_ray.pop("engine")["workers"]] in ([2, 2], [1, 2], [2, 3])
    for result in (here, on_ray):
        result.pop("seconds")
        for entry in [*result["history"], result["final"]]:
            entry.pop("seconds")
    assert on_ray == here


def test_ray_options_need_the_ray_engine(tmp_path):
    code = main(
        [
            "train",
            "consensus",
            "--data",
            "breast_cancer",
            "--clients",
            "3",
            "--iterations",
            "2",
            "--out",
            str(tmp_path / "r.json"),
            "--ray-workers",
            "2",
        ]
    )
    assert code == 2 and not (tmp_path / "r.json").exists()


def test_central_reports_the_relative_gap(tmp_path):
    code, out = _run(tmp_path, "decentralized", "--central", count=("--nodes", "4"))
    assert code == 0
    central = json.loads(out.read_text())["central"]
    assert central["objective"] > 0 and central["relative_gap"] >= 0


def test_the_central_reference_solves_the_nodes_problem_with_or_without_the_intercept():
    """The gap is to the optimum of the very objective the nodes minimise: on their rows with
    the intercept column when they fit one, without it otherwise."""
    from dpfed.core.losses import get_loss
    from dpfed.data import horizontal_split, load_dataset

    data = load_dataset("breast_cancer")
    parts = [(data.X_train[i], data.y_train[i]) for i in horizontal_split(len(data.y_train), 3)]
    for config in (DecentralizedConfig(), DecentralizedConfig(fit_intercept=False)):
        rows = [(config.prepare_rows(X), y) for X, y in parts]
        terms = {"loss": get_loss(config.loss), "loss_scale": config.loss_scale, "rho": config.rho}
        expected = joint_objective(centralized_optimum(rows, **terms), rows, **terms)
        got = central_reference(parts, config, {"train_objective": None})["objective"]
        assert got == pytest.approx(expected, rel=1e-12)
        assert rows[0][0].shape[1] == data.X_train.shape[1] + int(config.fit_intercept)
