"""Every protocol on Ray equals its in-process run bit for bit (``ray.init(num_cpus=2)``)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.data import make_graph
from dpfed.engines import get_engine
from dpfed.engines.ray_engine import RayEngine
from dpfed.protocols.consensus.driver import ConsensusConfig, train_consensus
from dpfed.protocols.decentralized.driver import DecentralizedConfig, train_decentralized
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

from ..conftest import make_vertical_problem_with_test

pytest.importorskip("ray")


def _same(a: dict, b: dict) -> None:
    """Two results' JSON equal but for timings and the engine's own report."""

    def strip(result: dict) -> str:
        result = dict(result)
        result.pop("engine", None)
        result.pop("seconds", None)
        result["history"] = [
            {k: v for k, v in e.items() if k != "seconds"} for e in result["history"]
        ]
        result["final"] = {k: v for k, v in result["final"].items() if k != "seconds"}
        return json.dumps(result, sort_keys=True, default=str)

    assert strip(a) == strip(b)


def _horizontal_parts(n_parts: int, seed: int = 0, n: int = 600, d: int = 6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    X_test = rng.normal(size=(200, d))
    y_test = np.where(X_test[:, 0] > 0, 1.0, -1.0)
    edges = np.linspace(0, n, n_parts + 1).astype(int)
    return [(X[a:b], y[a:b]) for a, b in itertools.pairwise(edges)], X_test, y_test


@pytest.mark.parametrize("protect", [False, True])
def test_vertical_on_ray_equals_inprocess(local_ray, protect):
    blocks, y, test_blocks, y_test = make_vertical_problem_with_test(split=(4, 3, 2))
    config = VerticalConfig(
        mechanism="sound",
        epsilon=2.0,
        delta=1e-5,
        iterations=4,
        seed=3,
        protect_label_holder=protect,
    )
    runs = [
        train_vertical(
            blocks, y, config, test_blocks=test_blocks, test_labels=y_test, engine=engine
        )
        for engine in ("inprocess", "ray")
    ]
    _same(runs[0].to_json(), runs[1].to_json())
    for name, model in runs[0].models.items():
        assert np.array_equal(model, runs[1].models[name])
    assert runs[0].ledger.events() == runs[1].ledger.events()
    report = runs[1].to_json()["engine"]
    assert report["engine"] == "ray" and report["delivered"] > 0
    assert len(report["workers"]) == 2  # three parties on the two CPUs' actors
    assert all(w["peak_rss_bytes"] > 10**6 for w in report["workers"])
    assert "engine" not in runs[0].to_json()


def test_consensus_on_ray_equals_inprocess(local_ray):
    parts, X_test, y_test = _horizontal_parts(12)
    config = ConsensusConfig(
        mechanism="gaussian", epsilon=1.0, delta=1e-5, iterations=5, seed=1, lam=1e-3, rho=0.5
    )
    runs = [
        train_consensus(parts, config, X_test=X_test, y_test=y_test, engine=engine)
        for engine in ("inprocess", "ray")
    ]
    _same(runs[0].to_json(), runs[1].to_json())
    assert np.array_equal(runs[0].model, runs[1].model)
    assert [r.model.tolist() for r in runs[0].rounds] == [r.model.tolist() for r in runs[1].rounds]


@pytest.mark.parametrize("perturbation", ["dvp", "pvp"])
def test_decentralized_on_ray_equals_inprocess(local_ray, perturbation):
    parts, X_test, y_test = _horizontal_parts(8, seed=2)
    graph = make_graph("ring", len(parts))
    config = DecentralizedConfig(
        perturbation=perturbation,
        alpha=0.5,
        iterations=4,
        seed=5,
        loss_scale=100.0,
        rho=1e-2,
        eta=1.0,
    )
    runs = [
        train_decentralized(parts, graph, config, X_test=X_test, y_test=y_test, engine=engine)
        for engine in ("inprocess", RayEngine(workers=3))
    ]
    _same(runs[0].to_json(), runs[1].to_json())
    for name, model in runs[0].models.items():
        assert np.array_equal(model, runs[1].models[name])
    assert len(runs[1].to_json()["engine"]["workers"]) == 3


def test_a_role_error_on_ray_is_the_roles_own(local_ray):
    from dpfed.protocols.vertical.roles import ProtocolError
    from dpfed.runtime.messages import Message

    class Refuser:
        name = "a"
        observer = None

        def handle(self, message):
            raise ProtocolError(f"a refuses {message.sender}'s message")

        def state_dict(self):
            return {}, {}

        def load_state_dict(self, arrays, meta):
            pass

    with pytest.raises(ProtocolError, match="a refuses b's message"):
        RayEngine().run({"a": Refuser()}, [Message("b", "a", 0)])
    with pytest.raises(KeyError, match="unknown party 'c' from 'b'"):
        RayEngine().run({"a": Refuser()}, [Message("b", "c", 0)])


def test_unknown_engine_is_refused():
    with pytest.raises(DpfedInputError, match=r"engine must be one of \['inprocess', 'ray'\]"):
        get_engine("spark")


def test_an_address_where_no_ray_listens_is_refused_at_once():
    """Ray's own client would retry for minutes; the engine checks the address first."""
    import socket

    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray is running in this process")
    from dpfed.engines.ray_engine import ensure_ray

    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DpfedInputError, match=rf"no Ray cluster answers at '127.0.0.1:{port}'"):
        ensure_ray(f"127.0.0.1:{port}")
    assert not ray.is_initialized()
