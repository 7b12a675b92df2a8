"""The decentralized ADMM node (paper 001): convergence, refusals, buffering, DVP/PVP,
checkpoints."""

import json
from collections import deque

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.engines.inprocess import InProcessEngine
from dpfed.privacy.l2_laplace import sample_l2_laplace
from dpfed.privacy.l2_laplace_grid import l2_laplace_grid_spacing
from dpfed.protocols.decentralized import DecentralizedNode, NodeModel
from dpfed.protocols.decentralized.calibration import pvp_zeta
from dpfed.protocols.decentralized.driver import centralized_optimum, joint_objective
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint
from dpfed.runtime.messages import ProtocolError

LOSS = get_loss("logistic")
# a well-conditioned setting: the consensus converges to ~1e-9 in 100 rounds
SETTING = {"loss_scale": 10.0, "rho": 0.1, "eta": 0.1}


def make_parts(sizes=(60, 90, 120, 150, 80), d=6, seed=0):
    """Rows of norm <= 1, labels from a noisy linear rule, one part per node."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    parts = []
    for m in sizes:
        X = rng.normal(size=(m, d))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        y = np.where(3.0 * X @ w + 0.3 * rng.normal(size=m) > 0, 1.0, -1.0)
        parts.append((X, y))
    return parts


def ring(P):
    return {f"n{p}": [f"n{(p - 1) % P}", f"n{(p + 1) % P}"] for p in range(P)}


def complete(P):
    return {f"n{p}": [f"n{q}" for q in range(P) if q != p] for p in range(P)}


def make_nodes(parts, graph, *, rounds, perturbation="none", alpha=None, seed=0, **overrides):
    setting = SETTING | overrides
    alphas = None if alpha is None else np.full(rounds, float(alpha))
    return [
        DecentralizedNode(
            f"n{p}",
            X,
            y,
            neighbours=graph[f"n{p}"],
            loss=LOSS,
            max_rounds=rounds,
            perturbation=perturbation,
            alphas=alphas,
            rng=np.random.default_rng([seed, p]),
            **setting,
        )
        for p, (X, y) in enumerate(parts)
    ]


def run(nodes, order=None):
    """Run to quiescence; ``order`` (a Generator) delivers pending messages in random order."""
    if order is None:
        InProcessEngine().run({n.name: n for n in nodes}, [m for n in nodes for m in n.start()])
        return
    by_name = {n.name: n for n in nodes}
    pending = [m for n in nodes for m in n.start()]
    while pending:
        message = pending.pop(int(order.integers(len(pending))))
        pending += by_name[message.recipient].handle(message)


def snapshot(node):
    arrays, meta = node.state_dict()
    return {k: np.array(v, copy=True) for k, v in arrays.items()}, json.loads(json.dumps(meta))


def assert_same_state(a, b):
    assert a[0].keys() == b[0].keys()
    for key in a[0]:
        np.testing.assert_array_equal(a[0][key], b[0][key], err_msg=key)
    assert a[1] == b[1]


def assert_same_run(nodes_a, nodes_b):
    for a, b in zip(nodes_a, nodes_b, strict=True):
        assert len(a.models) == len(b.models)
        for ma, mb in zip(a.models, b.models, strict=True):
            assert np.array_equal(ma, mb)
        assert np.array_equal(a.dual, b.dual)
        assert np.array_equal(a.broadcast, b.broadcast)
        assert a.spent == b.spent


# -- convergence ------------------------------------------------------------------------------


@pytest.mark.parametrize("graph", [ring, complete])
def test_non_private_nodes_reach_the_centralized_optimum(graph):
    parts = make_parts()
    rounds = 100
    nodes = make_nodes(parts, graph(len(parts)), rounds=rounds)
    run(nodes)
    assert all(n.finished and n.round == rounds for n in nodes)
    assert all(len(n.models) == rounds + 1 for n in nodes)
    reference = centralized_optimum(parts, loss=LOSS, **_objective_terms())
    best = joint_objective(reference, parts, loss=LOSS, **_objective_terms())
    mean = np.mean([n.exact for n in nodes], axis=0)
    value = joint_objective(mean, parts, loss=LOSS, **_objective_terms())
    assert abs(value - best) <= 1e-6 * abs(best)
    assert value >= best - 1e-12 * abs(best)  # the reference is the minimiser
    for n in nodes:  # every node agrees with the optimum (and so with the others)
        np.testing.assert_allclose(n.exact, reference, rtol=0, atol=1e-6)
        assert joint_objective(n.exact, parts, loss=LOSS, **_objective_terms()) == (
            pytest.approx(best, rel=1e-6)
        )
        assert n.spent == []
    spread = max(np.linalg.norm(a.exact - b.exact) for a in nodes for b in nodes)
    assert spread < 1e-6


def _objective_terms():
    return {"loss_scale": SETTING["loss_scale"], "rho": SETTING["rho"]}


def test_first_round_is_the_local_update_from_zero():
    """f_p(1) = argmin Z_p(f) + eta N_p ||f||^2 (f(0) = lambda(0) = 0)."""
    from dpfed.core.local import LocalProblem, solve_local

    parts = make_parts()
    nodes = make_nodes(parts, ring(len(parts)), rounds=3)
    first = nodes[1].start()
    assert [m.recipient for m in first] == ["n0", "n2"]
    assert all(m.round == 1 for m in first)
    X, y = parts[1]
    problem = LocalProblem(
        loss_weight=SETTING["loss_scale"] / X.shape[0],
        l2=SETTING["rho"],
        prox=2.0 * SETTING["eta"] * 2,
        center=np.zeros(X.shape[1]),
    )
    np.testing.assert_allclose(first[0].model, solve_local(X, y, LOSS, problem).x, atol=1e-10)
    assert nodes[1].start() == []  # a second start does nothing


# -- refusals ---------------------------------------------------------------------------------


def test_refusals_raise_protocol_error_and_store_nothing():
    parts = make_parts()
    nodes = make_nodes(parts, ring(len(parts)), rounds=5)
    n0, n1 = nodes[0], nodes[1]
    n0.start()
    genuine = n1.start()[0]
    assert genuine.recipient == "n0" and genuine.round == 1
    before = snapshot(n0)
    d = n0.n_features
    bad = [
        (NodeModel("n2", "n0", 1, genuine.model), "neighbours"),  # not a neighbour of n0
        (NodeModel("mallory", "n0", 1, genuine.model), "neighbours"),
        (NodeModel("n1", "n0", 3, genuine.model), "expected round 1 or 2"),  # two ahead
        (NodeModel("n1", "n0", 0, genuine.model), "expected round 1 or 2"),  # behind
        (NodeModel("n1", "n0", 1, genuine.model[:-1]), "finite"),
        (NodeModel("n1", "n0", 1, np.zeros((d, 1))), "finite"),
        (NodeModel("n1", "n0", 1, np.full(d, np.nan)), "finite"),
        (NodeModel("n1", "n0", 1, np.full(d, np.inf)), "finite"),
    ]
    for message, match in bad:
        with pytest.raises(ProtocolError, match=match):
            n0.handle(message)
        assert_same_state(snapshot(n0), before)
        assert all(box == {} for box in n0.received.values())
    assert n0.handle(genuine) == []  # still waiting for n4
    with pytest.raises(ProtocolError, match="already holds"):
        n0.handle(genuine)  # duplicate
    with pytest.raises(ProtocolError, match="already holds"):
        n0.handle(NodeModel("n1", "n0", 1, genuine.model + 1.0))
    np.testing.assert_array_equal(n0.received[1]["n1"], genuine.model)


def test_finished_nodes_refuse_further_messages():
    parts = make_parts()
    graph = complete(2)
    nodes = make_nodes(parts[:2], graph, rounds=2)
    queue = deque(m for n in nodes for m in n.start())
    last = None
    while queue:
        last = queue.popleft()
        queue.extend({n.name: n for n in nodes}[last.recipient].handle(last))
    assert all(n.finished for n in nodes)
    with pytest.raises(ProtocolError, match="expected"):
        nodes[0].handle(NodeModel("n1", "n0", 2, last.model))
    with pytest.raises(ProtocolError, match="expected"):
        nodes[0].handle(NodeModel("n1", "n0", 3, last.model))


def test_construction_refusals():
    X, y = make_parts()[0]
    common = dict(loss=LOSS, max_rounds=4, rng=np.random.default_rng(0), **SETTING)
    with pytest.raises(DpfedInputError, match="one alpha per round"):
        DecentralizedNode(
            "a", X, y, neighbours=["b"], perturbation="dvp", alphas=np.ones(3), **common
        )
    with pytest.raises(DpfedInputError, match="one alpha per round"):
        DecentralizedNode(
            "a", X, y, neighbours=["b"], perturbation="pvp", alphas=np.ones(5), **common
        )
    with pytest.raises(DpfedInputError, match="one alpha per round"):
        DecentralizedNode("a", X, y, neighbours=["b"], perturbation="dvp", alphas=None, **common)
    with pytest.raises(DpfedInputError, match="perturbation"):
        DecentralizedNode("a", X, y, neighbours=["b"], perturbation="laplace", **common)
    with pytest.raises(DpfedInputError, match="neighbour"):
        DecentralizedNode("a", X, y, neighbours=[], **common)


# -- message order ----------------------------------------------------------------------------


def test_a_message_one_round_ahead_is_buffered_and_used():
    parts = make_parts()[:2]
    graph = complete(2)
    reference = make_nodes(parts, graph, rounds=3)
    run(reference)

    a, b = make_nodes(parts, graph, rounds=3)
    (a1,) = a.start()
    (b1,) = b.start()
    (a2,) = a.handle(b1)  # a completes round 1 and is now one round ahead of b
    assert a.round == 2 and b.round == 1 and a2.round == 2
    assert b.handle(a2) == []  # buffered: b still waits for a's round 1
    assert 2 in b.received and "n0" not in b.received.get(1, {})
    np.testing.assert_array_equal(b.received[2]["n0"], a2.model)
    b_out = b.handle(a1)  # completes round 1, then round 2 at once with the buffered a2
    assert [m.round for m in b_out] == [2, 3]
    assert b.round == 3 and b.received == {}
    (a3,) = a.handle(b_out[0])
    assert a3.round == 3
    assert b.handle(a3) == [] and b.finished
    assert a.handle(b_out[1]) == [] and a.finished
    assert_same_run([a, b], reference)


@pytest.mark.parametrize("perturbation, alpha", [("none", None), ("dvp", 1.0), ("pvp", 1.0)])
def test_any_delivery_order_gives_the_same_run(perturbation, alpha):
    parts = make_parts()
    graph = ring(len(parts))
    fifo = make_nodes(parts, graph, rounds=8, perturbation=perturbation, alpha=alpha, seed=1)
    run(fifo)
    for k in range(3):
        shuffled = make_nodes(
            parts, graph, rounds=8, perturbation=perturbation, alpha=alpha, seed=1
        )
        run(shuffled, order=np.random.default_rng(k))
        assert all(n.finished for n in shuffled)
        assert_same_run(shuffled, fifo)


# -- DVP and PVP ------------------------------------------------------------------------------


@pytest.mark.parametrize("perturbation", ["dvp", "pvp"])
def test_private_runs_are_reproducible_and_differ_from_the_exact_run(perturbation):
    parts = make_parts()
    graph = ring(len(parts))
    rounds = 6
    plain = make_nodes(parts, graph, rounds=rounds)
    run(plain)
    first = make_nodes(parts, graph, rounds=rounds, perturbation=perturbation, alpha=1.0, seed=3)
    again = make_nodes(parts, graph, rounds=rounds, perturbation=perturbation, alpha=1.0, seed=3)
    other = make_nodes(parts, graph, rounds=rounds, perturbation=perturbation, alpha=1.0, seed=4)
    for nodes in (first, again, other):
        run(nodes)
        assert all(n.finished for n in nodes)
    assert_same_run(first, again)
    for a, b, c in zip(first, plain, other, strict=True):
        assert all(np.all(np.isfinite(m)) for m in a.models)
        assert not np.allclose(a.exact, b.exact)
        assert not np.allclose(a.exact, c.exact)
        # one alpha per round
        assert a.spent == [1.0] * rounds and b.spent == []


def test_a_schedule_is_spent_round_by_round():
    parts = make_parts()[:3]
    graph = complete(3)
    alphas = np.array([0.5, 0.4, 0.3, 0.2])
    nodes = [
        DecentralizedNode(
            f"n{p}",
            X,
            y,
            neighbours=graph[f"n{p}"],
            loss=LOSS,
            max_rounds=4,
            perturbation="dvp",
            alphas=alphas,
            rng=np.random.default_rng(p),
            **SETTING,
        )
        for p, (X, y) in enumerate(parts)
    ]
    pending = [m for n in nodes for m in n.start()]
    assert all(n.spent == [0.5] for n in nodes)
    InProcessEngine().run({n.name: n for n in nodes}, pending)
    for n in nodes:
        assert n.spent == [0.5, 0.4, 0.3, 0.2]


def test_dvp_broadcasts_its_exact_minimiser():
    parts = make_parts()
    nodes = make_nodes(parts, ring(len(parts)), rounds=4, perturbation="dvp", alpha=1.0)
    sent = []
    InProcessEngine(tap=sent.append).run(
        {n.name: n for n in nodes}, [m for n in nodes for m in n.start()]
    )
    by_name = {n.name: n for n in nodes}
    for m in sent:
        assert np.array_equal(m.model, by_name[m.sender].models[m.round])
    assert len(sent) == 4 * 2 * len(nodes)


def test_pvp_perturbs_every_broadcast_but_the_last_which_is_a_dvp_step():
    parts = make_parts()
    rounds = 5
    nodes = make_nodes(parts, ring(len(parts)), rounds=rounds, perturbation="pvp", alpha=1.0)
    sent = []
    InProcessEngine(tap=sent.append).run(
        {n.name: n for n in nodes}, [m for n in nodes for m in n.start()]
    )
    by_name = {n.name: n for n in nodes}
    for m in sent:
        exact = by_name[m.sender].models[m.round]
        if m.round < rounds:
            assert not np.allclose(m.model, exact)
        else:
            assert np.array_equal(m.model, exact)
    for n in nodes:
        assert np.array_equal(n.broadcast, n.exact)
        np.testing.assert_array_equal(n.noise, 0.0)
        assert n.spent == [1.0] * rounds


def _pvp_node(X, y, rounds):
    return DecentralizedNode(
        "n1",
        X,
        y,
        neighbours=["n0", "n2"],
        loss=LOSS,
        max_rounds=rounds,
        perturbation="pvp",
        alphas=np.full(rounds, 1.0),
        rng=np.random.default_rng(11),
        **SETTING,
    )


def _pause(node, at_round, seed=7):
    """Run ``node`` to round ``at_round`` against fixed neighbour broadcasts; return the
    neighbours' round-``at_round`` messages, not yet delivered."""
    rng = np.random.default_rng(seed)

    def box(r):
        return [
            NodeModel(j, node.name, r, 0.3 * rng.normal(size=node.n_features))
            for j in node.neighbours
        ]

    node.start()
    for r in range(1, at_round):
        for m in box(r):
            node.handle(m)
    assert node.round == at_round and not node.finished
    return box(at_round)


def _twin(node, X, y, *, exact, noise):
    """A node on rows ``X, y`` holding ``node``'s state (its broadcasts, dual, neighbours'
    values, generator state) except the unreleased ``exact`` and ``noise``."""
    twin = _pvp_node(X, y, node.max_rounds)
    arrays, meta = snapshot(node)
    arrays["exact"], arrays["noise"] = exact, noise
    twin.load_state_dict(arrays, meta)
    return twin


def _deliver(node, messages):
    out = []
    for m in messages:
        out += node.handle(m)
    assert [m.recipient for m in out] == node.neighbours
    return out[0].model


@pytest.mark.parametrize("at_round", [3, 5], ids=["pvp_round", "final_dvp_round"])
def test_pvp_broadcast_reads_only_released_values(at_round):
    """Changing only the node's unreleased state (its exact iterate and its last noise, keeping
    their sum, the broadcast V_p(t)) leaves its next broadcast unchanged: round 4 is
    output-perturbed, round 6 the final DVP step."""
    rounds = 6
    X, y = make_parts()[1]
    node = _pvp_node(X, y, rounds)
    pending = _pause(node, at_round)
    assert not np.allclose(node.noise, 0.0)  # round at_round was output-perturbed
    shift = np.random.default_rng(5).normal(size=node.n_features)
    twin = _twin(node, X, y, exact=node.exact + shift, noise=node.noise - shift)
    assert np.array_equal(twin.broadcast, node.broadcast)
    assert np.array_equal(twin.dual, node.dual)
    sent, sent_twin = _deliver(node, pending), _deliver(twin, pending)
    assert node.round == twin.round == at_round + 1
    assert np.array_equal(sent, sent_twin)
    assert np.array_equal(node.broadcast, twin.broadcast)
    assert np.array_equal(node.dual, twin.dual)
    if at_round + 1 == rounds:  # the final DVP step broadcasts its exact minimiser
        assert np.array_equal(sent, node.exact)
    else:
        assert not np.allclose(sent, node.exact)


def test_pvp_minimiser_moves_at_most_the_sensitivity_given_public_inputs():
    """Replacing one record of the node moves its exact minimiser by at most
    2 C^R / (rho B_p) (Theorem 2), whatever its unreleased state, given the same released
    inputs; the local objective is even (rho + 2 eta N_p)-strongly convex, so the tighter
    2 C^R / ((rho + 2 eta N_p) B_p) holds too."""
    rounds = 6
    X, y = make_parts()[1]
    B, d = X.shape
    CR, rho, eta = SETTING["loss_scale"], SETTING["rho"], SETTING["eta"]
    bound = 2.0 * CR / (rho * B)
    tight = 2.0 * CR / ((rho + 2.0 * eta * 2) * B)
    slack = 1e-8  # the solver stops at a gradient norm of 1e-10 C^R
    rng = np.random.default_rng(3)
    largest = 0.0
    for at_round in (1, 2, 4):
        for _ in range(6):
            node = _pvp_node(X, y, rounds)
            pending = _pause(node, at_round, seed=int(rng.integers(1000)))
            k = int(rng.integers(B))
            X2, y2 = X.copy(), y.copy()
            row = rng.normal(size=d)
            X2[k], y2[k] = row / np.linalg.norm(row), -y[k]
            # another split of the same broadcast into iterate and noise, the noise drawn from
            # the node's own noise law
            noise = sample_l2_laplace(pvp_zeta(1.0, rho=rho, B=B, CR=CR), d, rng)
            other = _twin(node, X2, y2, exact=node.broadcast - noise, noise=noise)
            _deliver(node, pending)
            _deliver(other, pending)
            moved = float(np.linalg.norm(node.exact - other.exact))
            assert moved <= bound  # Theorem 2's sensitivity
            assert moved <= tight + slack
            # the same fresh noise: the broadcasts differ by what the minimisers do, up to
            # each broadcast's rounding to the release grid
            grid = l2_laplace_grid_spacing(pvp_zeta(1.0, rho=rho, B=B, CR=CR))
            np.testing.assert_allclose(
                node.broadcast - other.broadcast, node.exact - other.exact, rtol=0, atol=grid
            )
            largest = max(largest, moved)
    assert largest > 0.05 * tight  # the replaced records do move the minimiser


# -- checkpoints ------------------------------------------------------------------------------


@pytest.mark.parametrize("perturbation, alpha", [("none", None), ("dvp", 1.0), ("pvp", 1.0)])
def test_state_dict_round_trip_mid_run_continues_bit_for_bit(tmp_path, perturbation, alpha):
    parts = make_parts()
    graph = ring(len(parts))
    rounds = 6
    reference = make_nodes(
        parts, graph, rounds=rounds, perturbation=perturbation, alpha=alpha, seed=5
    )
    run(reference)

    nodes = make_nodes(parts, graph, rounds=rounds, perturbation=perturbation, alpha=alpha, seed=5)
    by_name = {n.name: n for n in nodes}
    queue = deque(m for n in nodes for m in n.start())
    for _ in range(23):  # mid-run, with some messages buffered one round ahead
        message = queue.popleft()
        queue.extend(by_name[message.recipient].handle(message))
    assert any(n.received for n in nodes)
    assert len({n.round for n in nodes}) > 1 and not any(n.finished for n in nodes)
    for n in nodes:
        save_checkpoint(tmp_path / f"{n.name}.npz", *n.state_dict())

    restored = make_nodes(
        parts, graph, rounds=rounds, perturbation=perturbation, alpha=alpha, seed=77
    )
    for n in restored:
        n.load_state_dict(*load_checkpoint(tmp_path / f"{n.name}.npz"))
    for a, b in zip(nodes, restored, strict=True):
        assert_same_state(snapshot(b), snapshot(a))
    InProcessEngine().run({n.name: n for n in restored}, queue)
    assert all(n.finished for n in restored)
    assert_same_run(restored, reference)
