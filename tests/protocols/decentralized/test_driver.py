"""The in-process decentralized job: configuration, graphs, convergence, DVP/PVP, privacy."""

import json

import networkx as nx
import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.protocols.decentralized.calibration import alpha_schedule, decentralized_total
from dpfed.protocols.decentralized.driver import (
    DecentralizedConfig,
    centralized_optimum,
    joint_objective,
    train_decentralized,
)

LOSS = get_loss("logistic")
HISTORY_KEYS = (
    "iteration",
    "seconds",
    "train_objective",
    "test_log_loss",
    "test_accuracy",
    "epsilon",
    "misclassification_rate",
    "node_misclassification_rate",
    "disagreement",
    "alpha",
)
# well conditioned: the nodes agree to ~1e-9 within 100 rounds
SETTING = dict(loss_scale=10.0, rho=0.1, eta=0.1)


def make_parts(sizes=(60, 90, 120, 150, 80), d=6, seed=0, n_test=200):
    """Node parts (rows of norm <= 1, labels of a noisy linear rule) and test rows."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)

    def draw(m):
        X = rng.normal(size=(m, d))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        return X, np.where(3.0 * X @ w + 0.3 * rng.normal(size=m) > 0, 1.0, -1.0)

    return [draw(m) for m in sizes], *draw(n_test)


PARTS, X_TEST, Y_TEST = make_parts()
RING = nx.cycle_graph(len(PARTS))


# -- configuration and graph ------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(perturbation="laplace"), "perturbation must be one of"),
        (dict(alpha=1.0), "alpha needs perturbation"),
        (dict(perturbation="dvp"), "needs alpha"),
        (dict(perturbation="pvp"), "needs alpha"),
        (dict(perturbation="dvp", alpha=0.0), "alpha"),
        (dict(perturbation="pvp", alpha=-1.0), "alpha"),
        (dict(node_alphas=(1.0, 1.0)), "node_alphas needs perturbation"),
        (dict(perturbation="dvp", alpha=1.0, node_alphas=(1.0, 1.0)), "not both"),
        (dict(perturbation="dvp", node_alphas=()), "one alpha per node"),
        (dict(perturbation="dvp", node_alphas=(1.0, 0.0)), r"node_alphas\[1\]"),
        (dict(perturbation="dvp", alpha=1.0, loss="squared"), "logistic"),
        (dict(loss_scale=0.0), "loss_scale"),
        (dict(rho=0.0), "rho"),
        (dict(eta=-1.0), "eta"),
        (dict(iterations=0), "iterations"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.5), "delta"),
        (dict(loss="hinge"), "loss must be one of"),
    ],
)
def test_invalid_configurations_are_refused(changes, match):
    with pytest.raises(DpfedInputError, match=match):
        DecentralizedConfig(**changes).validated()


def test_valid_configurations_pass():
    cfg = DecentralizedConfig(perturbation="pvp", alpha=0.5, delta=1e-5)
    assert cfg.validated() is cfg
    DecentralizedConfig(loss="squared").validated()  # without perturbation any loss


def test_a_disconnected_graph_is_refused_with_its_components():
    graph = nx.Graph([(0, 1), (1, 2), (3, 4)])
    with pytest.raises(DpfedInputError, match=r"connected\. Found 2 components"):
        train_decentralized(PARTS, graph, DecentralizedConfig(iterations=2, **SETTING))
    graph.add_node(5)
    with pytest.raises(DpfedInputError, match="6 nodes but there are 5 parts"):
        train_decentralized(PARTS, graph, DecentralizedConfig(iterations=2, **SETTING))


def test_graph_and_parts_must_match():
    with pytest.raises(DpfedInputError, match="4 nodes but there are 5 parts"):
        train_decentralized(PARTS, nx.cycle_graph(4), DecentralizedConfig(iterations=2))
    with pytest.raises(DpfedInputError, match="at least two nodes"):
        train_decentralized(PARTS[:1], nx.complete_graph(1), DecentralizedConfig(iterations=2))
    (X1, y1), (X2, y2) = PARTS[:2]
    with pytest.raises(DpfedInputError, match="same columns"):
        train_decentralized(
            [(X1, y1), (X2[:, :-1], y2)], nx.complete_graph(2), DecentralizedConfig(iterations=2)
        )
    with pytest.raises(DpfedInputError, match="binary"):
        train_decentralized(
            [(X1, 3.0 * y1), (X2, y2)], nx.complete_graph(2), DecentralizedConfig(iterations=2)
        )


def test_graph_nodes_are_taken_in_sorted_order():
    """Node k of the sorted graph holds parts[k], whatever the labels of the graph."""
    relabelled = nx.relabel_nodes(RING, {k: f"v{k}" for k in RING.nodes})
    cfg = DecentralizedConfig(iterations=5, **SETTING)
    a = train_decentralized(PARTS, RING, cfg)
    b = train_decentralized(PARTS, relabelled, cfg)
    for name in a.models:
        assert np.array_equal(a.models[name], b.models[name])
    assert a.graph == {"nodes": 5, "edges": 5, "edge_list": b.graph["edge_list"]}


# -- runs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("graph", [RING, nx.complete_graph(len(PARTS))], ids=["ring", "complete"])
def test_non_private_run_reaches_the_centralized_optimum(graph):
    cfg = DecentralizedConfig(iterations=100, **SETTING)
    res = train_decentralized(PARTS, graph, cfg, X_test=X_TEST, y_test=Y_TEST)
    terms = dict(loss_scale=cfg.loss_scale, rho=cfg.rho)
    rows = [(cfg.prepare_rows(X), y) for X, y in PARTS]  # with the intercept column
    reference = centralized_optimum(rows, loss=LOSS, **terms)
    best = joint_objective(reference, rows, loss=LOSS, **terms)
    assert abs(res.final["train_objective"] - best) <= 1e-6 * abs(best)
    assert res.final["train_objective"] == pytest.approx(
        joint_objective(res.average_model, rows, loss=LOSS, **terms), rel=1e-12
    )
    for model in res.models.values():
        np.testing.assert_allclose(model, reference, rtol=0, atol=1e-6)
    assert res.final["disagreement"] < 1e-6
    assert res.final["test_accuracy"] > 0.85
    objectives = [h["train_objective"] for h in res.history]
    assert objectives[-1] <= objectives[0]
    assert res.privacy["mechanism"] == "none" and res.privacy["epsilon"] == 0.0
    assert all(h["epsilon"] == 0.0 and h["alpha"] is None for h in res.history)


@pytest.mark.parametrize("perturbation", ["dvp", "pvp"])
def test_private_runs_are_reproducible_with_a_seed(perturbation):
    cfg = DecentralizedConfig(iterations=8, perturbation=perturbation, alpha=1.0, seed=3, **SETTING)
    a = train_decentralized(PARTS, RING, cfg, X_test=X_TEST, y_test=Y_TEST)
    b = train_decentralized(PARTS, RING, cfg, X_test=X_TEST, y_test=Y_TEST)
    c = train_decentralized(
        PARTS,
        RING,
        DecentralizedConfig(iterations=8, perturbation=perturbation, alpha=1.0, seed=4, **SETTING),
    )
    plain = train_decentralized(PARTS, RING, DecentralizedConfig(iterations=8, **SETTING))
    for name in a.models:
        assert np.array_equal(a.models[name], b.models[name])
        assert not np.array_equal(a.models[name], c.models[name])
        assert not np.allclose(a.models[name], plain.models[name])
    strip = [{k: v for k, v in h.items() if k != "seconds"} for h in a.history]
    assert strip == [{k: v for k, v in h.items() if k != "seconds"} for h in b.history]


def test_node_alphas_equal_to_alpha_give_the_same_run():
    common = dict(iterations=6, perturbation="dvp", seed=3, **SETTING)
    one = train_decentralized(PARTS, RING, DecentralizedConfig(alpha=0.7, **common))
    each = train_decentralized(
        PARTS, RING, DecentralizedConfig(node_alphas=(0.7,) * len(PARTS), **common)
    )
    other = train_decentralized(
        PARTS, RING, DecentralizedConfig(node_alphas=(0.7,) * (len(PARTS) - 1) + (0.2,), **common)
    )
    for name in one.models:
        assert np.array_equal(one.models[name], each.models[name])
    assert not all(np.array_equal(one.models[n], other.models[n]) for n in one.models)


@pytest.mark.parametrize("delta", [None, 1e-5])
def test_per_node_alphas_account_the_most_exposed_node(delta):
    T = 6
    firsts = [0.5, 1.5] + [1.0] * (len(PARTS) - 2)
    cfg = DecentralizedConfig(
        iterations=T,
        perturbation="pvp",
        node_alphas=firsts,
        schedule="geometric",
        rate=0.9,
        delta=delta,
        seed=1,
        **SETTING,
    )
    res = train_decentralized(PARTS, RING, cfg, X_test=X_TEST, y_test=Y_TEST)
    schedules = [alpha_schedule(a, T, kind="geometric", rate=0.9) for a in firsts]
    privacy = res.privacy
    assert privacy["most_exposed_node"] == "node1"
    assert privacy["epsilon"] == decentralized_total(schedules[1], delta=delta)["epsilon"]
    assert privacy["alpha_per_release"] == [float(a) for a in schedules[1]]
    assert privacy["alpha_max"] == 1.5
    assert set(privacy["per_node"]) == set(res.models)
    for k, name in enumerate(sorted(res.models, key=lambda n: int(n[4:]))):
        node = privacy["per_node"][name]
        assert node["alpha"] == firsts[k]
        assert node["epsilon"] == decentralized_total(schedules[k], delta=delta)["epsilon"]
    for t, entry in enumerate(res.history, start=1):
        assert entry["alpha"] == max(s[t - 1] for s in schedules)
        assert entry["epsilon"] == decentralized_total(schedules[1][:t], delta=delta)["epsilon"]


def test_node_alphas_must_match_the_nodes():
    cfg = DecentralizedConfig(iterations=3, perturbation="dvp", node_alphas=(1.0, 1.0), **SETTING)
    with pytest.raises(DpfedInputError, match=rf"one alpha per node \({len(PARTS)}\)\. Found 2"):
        train_decentralized(PARTS, RING, cfg)


@pytest.mark.parametrize("delta", [None, 1e-5])
@pytest.mark.parametrize("schedule, rate", [("constant", None), ("geometric", 0.8)])
def test_privacy_block_is_the_honest_total_of_the_schedule(delta, schedule, rate):
    T = 10
    cfg = DecentralizedConfig(
        iterations=T,
        perturbation="dvp",
        alpha=0.5,
        schedule=schedule,
        rate=rate,
        delta=delta,
        seed=0,
        **SETTING,
    )
    res = train_decentralized(PARTS, RING, cfg, X_test=X_TEST, y_test=Y_TEST)
    alphas = alpha_schedule(0.5, T, kind=schedule, rate=rate)
    total = decentralized_total(alphas, delta=delta)
    privacy = res.privacy
    assert privacy["mechanism"] == "dvp"
    assert privacy["epsilon"] == total["epsilon"]
    assert privacy["accountant"] == total["method"]
    assert privacy["delta"] == (total["delta"] or 0.0)
    assert privacy["alpha_per_release"] == [float(a) for a in alphas]
    assert len(privacy["alpha_per_release"]) == T
    assert privacy["alpha_max"] == 0.5
    assert privacy["nodes"] == len(PARTS)
    # the per-round history: the round's alpha and the total of rounds 1..t
    for t, entry in enumerate(res.history, start=1):
        assert entry["alpha"] == alphas[t - 1]
        assert entry["epsilon"] == decentralized_total(alphas[:t], delta=delta)["epsilon"]
    epsilons = [h["epsilon"] for h in res.history]
    assert np.all(np.diff(epsilons) > 0)
    assert epsilons[-1] == privacy["epsilon"]
    if delta is None:
        assert privacy["epsilon"] == pytest.approx(float(np.sum(alphas)))


def test_history_schema_and_misclassification_rate():
    cfg = DecentralizedConfig(iterations=6, perturbation="pvp", alpha=1.0, seed=1, **SETTING)
    res = train_decentralized(PARTS, RING, cfg, X_test=X_TEST, y_test=Y_TEST)
    assert [h["iteration"] for h in res.history] == list(range(1, 7))
    for entry in res.history:
        for key in HISTORY_KEYS:
            assert key in entry
        assert entry["misclassification_rate"] == 1.0 - entry["test_accuracy"]
        assert 0.0 <= entry["node_misclassification_rate"] <= 1.0
        assert entry["disagreement"] >= 0.0
    seconds = [h["seconds"] for h in res.history]
    assert seconds == sorted(seconds) and seconds[-1] == pytest.approx(res.seconds)
    assert res.final == res.history[-1]
    bare = train_decentralized(PARTS, RING, cfg)
    assert bare.final["test_accuracy"] is None and bare.final["misclassification_rate"] is None


def test_to_json_is_serialisable():
    cfg = DecentralizedConfig(
        iterations=4, perturbation="dvp", alpha=1.0, delta=1e-5, seed=2, **SETTING
    )
    res = train_decentralized(PARTS, RING, cfg, X_test=X_TEST, y_test=Y_TEST)
    payload = json.loads(json.dumps(res.to_json()))
    assert payload["protocol"] == "decentralized"
    assert payload["graph"]["nodes"] == 5 and payload["graph"]["edges"] == 5
    assert payload["graph"]["edge_list"] == [
        ["node0", "node1"],
        ["node0", "node4"],
        ["node1", "node2"],
        ["node2", "node3"],
        ["node3", "node4"],
    ]
    assert [p["n_samples"] for p in payload["parties"]] == [X.shape[0] for X, _ in PARTS]
    assert payload["final"] == payload["history"][-1]
    assert payload["privacy"]["epsilon"] == res.privacy["epsilon"]
    assert payload["config"]["alpha"] == 1.0
    plain = train_decentralized(PARTS, RING, DecentralizedConfig(iterations=2, **SETTING))
    json.dumps(plain.to_json())


def test_dvp_with_the_papers_settings_completes():
    cfg = dict(iterations=100, perturbation="dvp", alpha=1.0)  # C^R = 1750, rho = 10^-2.5
    for seed in range(12):
        res = train_decentralized(PARTS, RING, DecentralizedConfig(**cfg, seed=seed))
        assert len(res.history) == 100
