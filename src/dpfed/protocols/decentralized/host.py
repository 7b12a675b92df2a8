"""Decentralized ADMM as the networked runtime runs it: a node's host, the job-file
parameters (with the graph every node builds alike), the leader's ``result.json`` and the
registered :data:`PROTOCOL` (see :mod:`dpfed.protocols.row_hosts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np

from dpfed.core.losses import get_loss
from dpfed.data import GRAPHS, make_graph
from dpfed.data.specs import ROW_NOTE, parties_preprocessing
from dpfed.parameters import config_from_table, job_parameters, param
from dpfed.privacy.accounting import Release
from dpfed.protocols.base import BaseProtocol
from dpfed.protocols.decentralized.driver import (
    ITERATE_FIGURES,
    DecentralizedConfig,
    decentralized_privacy,
    named_neighbours,
    round_entry,
)
from dpfed.protocols.decentralized.messages import NodeModel
from dpfed.protocols.decentralized.roles import DecentralizedNode
from dpfed.protocols.row_hosts import (
    EVALUATION_NOTE,
    TEST_EVALUATION_NOTE,
    RowHost,
    held_out_rows,
    party_rows,
)
from dpfed.runtime.disclosure import exact_values, with_exact_values
from dpfed.runtime.hosting import noise_generator
from dpfed.runtime.jobspec import JobSpec, PartySpec, describe
from dpfed.runtime.registry import JobRecord
from dpfed.runtime.wire import register_message

#: The messages of a networked decentralized job.
DECENTRALIZED_MESSAGES = (NodeModel,)
for _kind in DECENTRALIZED_MESSAGES:
    register_message(_kind)


@dataclass(frozen=True)
class GraphParams:
    """The job's graph, built by every node alike from ``[params]`` (nodes in party order)
    with :func:`dpfed.data.make_graph`."""

    graph: str = param("ring", help="topology of the network", choices=GRAPHS)
    graph_seed: int = param(0, help="seed of a random topology (public: every node builds it)")
    p: float | None = param(help="edge probability of an erdos-renyi graph")
    radius: float | None = param(help="connection radius of a geometric graph")


_GRAPH_KEYS = tuple(job_parameters(GraphParams))


def _decentralized_config(params: dict[str, Any]) -> DecentralizedConfig:
    return cast(
        DecentralizedConfig,
        config_from_table(DecentralizedConfig, params, exclude=_GRAPH_KEYS).validated(),
    )


def _graph(spec: JobSpec) -> Any:  # a networkx.Graph (networkx has no type stubs)
    graph = config_from_table(
        GraphParams, {k: v for k, v in spec.params.items() if k in _GRAPH_KEYS}
    )
    return make_graph(
        graph.graph, len(spec.parties), rng=graph.graph_seed, p=graph.p, radius=graph.radius
    )


class DecentralizedHost(RowHost):
    """A node of a decentralized job: its rows, its neighbours in the job's graph."""

    # Its broadcasts are pure alpha-DP releases, which the budget ledger composes with the
    # party's Gaussian releases (:func:`dpfed.privacy.accounting.releases_epsilon`).
    ledger_support = True

    def __init__(self, spec: JobSpec, name: str) -> None:
        self.spec, self.name = spec, name
        cfg = _decentralized_config(spec.params)
        self.config = cfg
        self.loss = get_loss(cfg.loss)
        self.loss_factor = cfg.loss_scale
        neighbours = named_neighbours(_graph(spec), spec.names)
        _, X, y = party_rows(spec, name)
        y = cast(np.ndarray, y)  # a node's rows come with their labels
        self.X, self.y = cfg.prepare_rows(X), y
        index = spec.names.index(name)
        schedules = cfg.alpha_schedules(len(spec.names))
        alphas = None if schedules is None else schedules[index]
        self.role = DecentralizedNode(
            name,
            self.X,
            y,
            neighbours=neighbours[name],
            loss=self.loss,
            loss_scale=cfg.loss_scale,
            rho=cfg.rho,
            eta=cfg.eta,
            max_rounds=cfg.iterations,
            perturbation=cfg.perturbation,
            alphas=alphas,
            c1=self.loss.smoothness,
            rng=noise_generator(spec, name, index=index, n_parties=len(spec.parties)),
        )
        self.plan: list[float | Release] = (
            [] if alphas is None else [Release("l2_laplace", 1.0 / float(a)) for a in alphas]
        )
        self.private = alphas is not None

    @property
    def exact_release(self) -> bool:
        return not self.private

    def model(self) -> np.ndarray:
        return cast(np.ndarray, self.role.exact)

    def final(self) -> dict[str, Any]:
        """Its public account: the rows it holds, the alphas it spent and, for evaluation, its
        per-round broadcasts (released) or, only with ``evaluate = "full"``, its exact
        per-round iterates (under PVP never broadcast)."""
        out: dict[str, Any] = {"n_samples": int(self.X.shape[0]), "spent": self.role.spent}
        if self.spec.evaluate == "full":
            out["models"] = [m.tolist() for m in self.role.models[1:]]
        elif self.spec.evaluate == "test":
            out["models"] = [m.tolist() for m in self.role.released_models]
        return out


def decentralized_result(
    spec: JobSpec,
    accounts: dict[str, dict[str, Any]],
    *,
    evaluate: Callable[[str, list[list[float]]], list[float]],
    seconds: float,
) -> dict[str, Any]:
    """The leader's ``result.json`` of a decentralized job (the in-process runner's keys)."""

    cfg = _decentralized_config(spec.params)
    names = spec.names
    alphas = cfg.alpha_schedules(len(names))
    history = []
    if spec.evaluate != "none":
        X_test, y_test = held_out_rows(spec)
        if X_test is not None:
            X_test = cfg.prepare_rows(X_test)
        per_node = {n: np.asarray(accounts[n]["models"], dtype=float) for n in names}
        means = [np.mean([per_node[n][t] for n in names], axis=0) for t in range(cfg.iterations)]
        losses = (
            {n: evaluate(n, [m.tolist() for m in means]) for n in names}
            if spec.evaluate == "full"
            else None
        )
        for t in range(1, cfg.iterations + 1):
            history.append(
                round_entry(
                    t,
                    [per_node[n][t - 1] for n in names],
                    None if losses is None else [losses[n][t - 1] for n in names],
                    cfg,
                    X_test,
                    y_test,
                    alphas,
                )
            )
        for entry in history:
            entry["seconds"] = seconds * entry["iteration"] / cfg.iterations
    privacy = decentralized_privacy(cfg, alphas, names)
    exact = None
    if spec.evaluate == "full":
        privacy.setdefault("notes", []).append(
            EVALUATION_NOTE.format(extra=" and its exact per-round iterates")
        )
        if cfg.perturbation != "none":
            exact = exact_values(
                ["train_objective", *(ITERATE_FIGURES if cfg.perturbation == "pvp" else ())],
                left_parties=True,
                what="every node's exact per-round iterates and its mean training loss at "
                "their averages",
            )
    elif spec.evaluate == "test":
        privacy.setdefault("notes", []).append(
            TEST_EVALUATION_NOTE.format(extra=" (every node's broadcasts, averaged)")
        )
    graph = _graph(spec)
    edges = sorted([sorted((names[a], names[b])) for a, b in graph.edges])
    return with_exact_values(
        {
            "protocol": "decentralized",
            "config": asdict(cfg),
            "graph": {"nodes": len(names), "edges": len(edges), "edge_list": edges},
            "parties": [{"name": n, "n_samples": accounts[n]["n_samples"]} for n in names],
            "history": history,
            "final": dict(history[-1]) if history else {},
            "privacy": privacy,
            "preprocessing": parties_preprocessing(spec.parties) | {"before_training": ROW_NOTE},
            "seconds": seconds,
            "job": describe(spec),
        },
        exact,
    )


#: Keys of ``[params]`` for decentralized ADMM: every field of :class:`DecentralizedConfig`,
#: and the graph, built from ``graph``, ``graph_seed``, ``p`` and ``radius`` by every node
#: alike (nodes in party order).
DECENTRALIZED_PARAMS = job_parameters(DecentralizedConfig) | job_parameters(GraphParams)


class DecentralizedProtocol(BaseProtocol):
    """Decentralized ADMM over a graph: every party is a node holding a row range and talks
    to its neighbours only."""

    name = "decentralized"
    params = DECENTRALIZED_PARAMS
    holds = "rows"
    dataless_role = None
    same_rows = False
    messages = DECENTRALIZED_MESSAGES
    report = None

    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        """Any two or more nodes (the job file checks the count)."""

    def private(self, params: Mapping[str, Any]) -> bool:
        return cast(bool, params.get("perturbation", "none") != "none")

    def check_job(self, spec: JobSpec) -> None:
        _decentralized_config(spec.params)

    def host(self, spec: JobSpec, name: str) -> DecentralizedHost:
        return DecentralizedHost(spec, name)

    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        return decentralized_result(
            spec, record.accounts, evaluate=record.evaluate, seconds=record.seconds
        )


#: Decentralized ADMM, as registered in :data:`dpfed.runtime.registry.PROTOCOL_REGISTRY`.
PROTOCOL = DecentralizedProtocol()
