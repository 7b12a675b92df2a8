"""The sample-partitioned protocols (consensus and decentralized ADMM) as the networked runtime
hosts them.

Each party reads its own rows (``rows = [first, end)`` of its data file's training part, rows
scaled to unit norm as ``dpfed train consensus|decentralized`` does), builds the role the
in-process runner builds for it (same configuration, same noise stream) and, at the end, hands
the leader what it needs to compute the history: the per-round models (the server's global
models, or every node's primal estimates) and, on request, its loss at given models. The leader
then evaluates the per-round figures exactly as the in-process runner does.

Per-round figures therefore travel only once, after training. With ``[job].evaluate = "test"``
(the default under a mechanism) only released values reach the leader: the server's global
models (computed from the noisy uploads) or every node's broadcasts, at which the leader
computes test figures on its own held-out rows; there is no training objective. Only
``evaluate = "full"`` asks the parties for exact values (each party's mean training loss at
the per-round models, once, and a decentralized node's exact per-round iterates, which under
PVP are never broadcast); the result then says so at its top (``exact_values``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError, check_binary_labels
from dpfed.core.losses import get_loss
from dpfed.core.rows import clip_rows, normalize_rows
from dpfed.parameters import config_from_table, job_param_types
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.consensus.messages import GlobalModel, LocalModel
from dpfed.protocols.consensus.roles import ConsensusClient, ConsensusServer
from dpfed.protocols.decentralized.messages import NodeModel
from dpfed.protocols.decentralized.roles import DecentralizedNode
from dpfed.protocols.messages import Message
from dpfed.runtime.consensus import (
    ConsensusConfig,
    client_epsilon,
    client_release,
    consensus_objective,
    consensus_privacy,
    noise_multiplier_of,
    test_metrics,
)
from dpfed.runtime.decentralized import (
    ITERATE_FIGURES,
    DecentralizedConfig,
    decentralized_privacy,
    round_entry,
)
from dpfed.runtime.disclosure import exact_values, with_exact_values
from dpfed.runtime.hosting import RoleDelegate, noise_generator
from dpfed.runtime.jobfile import JobSpec, PartySpec, describe
from dpfed.runtime.registry import JobRecord, Protocol
from dpfed.runtime.wire import register_message

for _kind in (GlobalModel, LocalModel, NodeModel):
    register_message(_kind)

EVALUATION_NOTE = (
    "evaluation: after training every party reported its mean training loss at the per-round "
    "models the leader sent it{extra}; those figures are not covered by the epsilon above. "
    "Set [job].evaluate = \"test\" or \"none\" to keep them home."
)
TEST_EVALUATION_NOTE = (
    "evaluation: the leader computed test figures at the released models{extra} on the test "
    "rows of the first party's data set; no training losses left the parties."
)


def _rows(spec: JobSpec, name: str):
    """The party's rows (unit norm) and labels, and its data set (for shapes)."""
    from dpfed.data import load_dataset

    party = spec.party(name)
    data = load_dataset(party.data, party.data_dir)
    if party.rows is None:
        return data, None, None
    first, end = party.rows
    if end > data.X_train.shape[0]:
        raise DpfedInputError(
            f"party {name!r}: rows [{first}, {end}) lie outside {party.data!r}, which has "
            f"{data.X_train.shape[0]} training rows."
        )
    X = normalize_rows(data.X_train[first:end])
    return data, X, check_binary_labels("labels", data.y_train[first:end])


def _test_set(spec: JobSpec):
    """The leader's held-out rows: the test part of the first party's data set."""
    if spec.evaluate == "none":
        return None, None
    from dpfed.data import load_dataset

    first = spec.parties[0]
    data = load_dataset(first.data, first.data_dir)
    if data.X_test is None:
        return None, None
    return normalize_rows(data.X_test), check_binary_labels("test labels", data.y_test)


class _Host(RoleDelegate):
    """What both hosts share: the wrapped role's state, status and losses at given models."""

    role: Any
    X: Any = None
    y: np.ndarray | None = None
    plan: list[float]
    holds_data = True
    ledger_support = True

    @property
    def exact_release(self) -> bool:
        return not self.plan and self.holds_data

    @property
    def events(self) -> list[PrivacyEvent]:
        return getattr(self.role, "events", [])

    def start(self) -> list[Message]:
        return self.role.start() if hasattr(self.role, "start") else []

    def describe(self) -> dict[str, Any]:
        return {"n_samples": 0 if self.X is None else int(self.X.shape[0])}

    def losses(self, models: list[list[float]]) -> list[float]:
        """Mean training loss at each model (the evaluation request)."""
        if self.X is None:
            return []
        return [
            self.loss_factor * float(
                np.mean(self.loss.value(np.asarray(self.X @ np.asarray(m, dtype=float))
                                        .reshape(-1), self.y))
            )
            for m in models
        ]


# -- consensus ---------------------------------------------------------------------------------
class ConsensusHost(_Host):
    """A consensus client (its rows) or the server (no data)."""

    loss_factor = 1.0

    def __init__(self, spec: JobSpec, name: str) -> None:
        self.spec, self.name = spec, name
        cfg = config_from_table(ConsensusConfig, spec.params).validated()
        self.config = cfg
        self.loss = get_loss(cfg.loss)
        party = spec.party(name)
        clients = [p.name for p in spec.parties if p.role != "server"]
        server = next(p.name for p in spec.parties if p.role == "server")
        data, X, y = _rows(spec, name)
        self.n_features = data.X_train.shape[1]
        z = noise_multiplier_of(cfg)
        if party.role == "server":
            self.holds_data = False
            self.plan = []
            self.role = ConsensusServer(
                name, clients, n_features=self.n_features, rho=cfg.rho, max_rounds=cfg.iterations
            )
            return
        if cfg.mechanism != "none":
            X = clip_rows(X, 1.0)
        index = clients.index(name)
        self.X, self.y = X, y
        release = client_release(cfg, z, len(clients), X.shape[0])
        self.role = ConsensusClient(
            name, X, y, server=server, loss=self.loss, lam=cfg.lam, n_clients=len(clients),
            rho=cfg.rho, release=release,
            rng=noise_generator(spec, name, index=index, n_parties=len(clients)),
        )
        self.plan = [] if release is None else [release.noise_multiplier] * cfg.iterations

    def model(self) -> np.ndarray:
        return self.role.model if not self.holds_data else self.role.released

    def final(self) -> dict[str, Any]:
        out: dict[str, Any] = {"events": [asdict(e) for e in self.events]}
        if not self.holds_data:
            out["rounds"] = [
                {"model": r.model.tolist(), "primal_residual": r.primal_residual,
                 "dual_residual": r.dual_residual}
                for r in self.role.history
            ]
        else:
            out["n_samples"] = int(self.X.shape[0])
        return out


def consensus_result(spec, accounts, *, evaluate, seconds: float) -> dict[str, Any]:
    """The leader's ``result.json`` of a consensus job (the keys of ``dpfed train``'s)."""
    from dpfed.data.specs import ROW_NOTE, parties_preprocessing

    cfg = config_from_table(ConsensusConfig, spec.params).validated()
    server = next(p.name for p in spec.parties if p.role == "server")
    clients = [p.name for p in spec.parties if p.role != "server"]
    rounds = accounts[server]["rounds"]
    models = [r["model"] for r in rounds]  # released: averages of the noisy uploads
    X_test, y_test = _test_set(spec)
    losses = {c: evaluate(c, models) for c in clients} if spec.evaluate == "full" else None
    events = {c: [PrivacyEvent(**e) for e in accounts[c]["events"]] for c in clients}
    n = len(clients)
    history = []
    for t, r in enumerate(rounds, start=1):
        w = np.asarray(r["model"], dtype=float)
        entry: dict[str, Any] = {"iteration": t, "seconds": None, "train_objective": None}
        if losses is not None:
            entry["train_objective"] = consensus_objective(
                [losses[c][t - 1] for c in clients], w, lam=cfg.lam
            )
        if spec.evaluate != "none":
            entry |= test_metrics(w, X_test, y_test)
        else:
            entry |= {"test_log_loss": None, "test_accuracy": None}
        entry["epsilon"] = (
            max(client_epsilon([e for e in events[c] if e.round <= t], cfg) for c in clients)
            if cfg.mechanism != "none" else 0.0
        )
        entry["primal_residual"] = r["primal_residual"]
        entry["dual_residual"] = r["dual_residual"]
        history.append(entry)
    for entry in history:
        entry["seconds"] = seconds * entry["iteration"] / max(1, len(history))

    class _Client:  # what consensus_privacy reads of a client
        def __init__(self, name):
            self.name, self.events = name, events[name]
            self.release = client_release(
                cfg, noise_multiplier_of(cfg), n, accounts[name]["n_samples"]
            )

    privacy = consensus_privacy(
        cfg, [_Client(c) for c in clients] if cfg.mechanism != "none" else [],
        None if cfg.mechanism == "none" else _Client(clients[0]).release.noise_multiplier,
    )
    if losses is not None:
        privacy.setdefault("notes", []).append(EVALUATION_NOTE.format(extra=""))
    elif spec.evaluate == "test":
        privacy.setdefault("notes", []).append(
            TEST_EVALUATION_NOTE.format(extra=" (the server's global models)")
        )
    exact = None
    if losses is not None and cfg.mechanism != "none":
        exact = exact_values(
            ["train_objective"], left_parties=True,
            what="every client's mean training loss at every round's global model",
        )
    return with_exact_values({
        "protocol": "consensus",
        "config": asdict(cfg),
        "parties": [{"name": c, "n_samples": accounts[c]["n_samples"]} for c in clients],
        "history": history,
        "final": dict(history[-1]) if history else {},
        "privacy": privacy,
        "preprocessing": parties_preprocessing(spec.parties) | {"before_training": ROW_NOTE},
        "seconds": seconds,
        "job": describe(spec),
    }, exact)


# -- decentralized -----------------------------------------------------------------------------
_GRAPH_KEYS = ("graph", "graph_seed", "p", "radius")


def _decentralized_config(params: dict[str, Any]) -> DecentralizedConfig:
    return config_from_table(DecentralizedConfig, params, exclude=_GRAPH_KEYS).validated()


def _graph(spec: JobSpec):
    from dpfed.data import make_graph

    p = spec.params
    return make_graph(
        p.get("graph", "ring"), len(spec.parties), rng=p.get("graph_seed", 0),
        p=p.get("p"), radius=p.get("radius"),
    )


class DecentralizedHost(_Host):
    """A node of a decentralized job: its rows, its neighbours in the job's graph."""

    ledger_support = False  # pure alpha-DP releases; the budget ledger accounts Gaussians only
    ledger_refusal = (
        "DVP and PVP broadcasts are pure alpha-DP releases, which the budget ledger (Gaussian "
        "releases only) cannot account"
    )

    def __init__(self, spec: JobSpec, name: str) -> None:
        from dpfed.runtime.decentralized import _neighbours

        self.spec, self.name = spec, name
        cfg = _decentralized_config(spec.params)
        self.config = cfg
        self.loss = get_loss(cfg.loss)
        self.loss_factor = cfg.loss_scale
        neighbours = _neighbours(_graph(spec), spec.names)
        _, X, y = _rows(spec, name)
        self.X, self.y = clip_rows(X, 1.0), y
        index = spec.names.index(name)
        schedules = cfg.alpha_schedules(len(spec.names))
        alphas = None if schedules is None else schedules[index]
        self.role = DecentralizedNode(
            name, self.X, y, neighbours=neighbours[name], loss=self.loss,
            loss_scale=cfg.loss_scale, rho=cfg.rho, eta=cfg.eta, max_rounds=cfg.iterations,
            perturbation=cfg.perturbation, alphas=alphas, c1=self.loss.smoothness,
            rng=noise_generator(spec, name, index=index, n_parties=len(spec.parties)),
        )
        self.plan = []
        self.private = alphas is not None

    @property
    def exact_release(self) -> bool:
        return not self.private

    def model(self) -> np.ndarray:
        return self.role.exact

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


def decentralized_result(spec, accounts, *, evaluate, seconds: float) -> dict[str, Any]:
    """The leader's ``result.json`` of a decentralized job (the in-process runner's keys)."""
    from dpfed.data.specs import ROW_NOTE, parties_preprocessing

    cfg = _decentralized_config(spec.params)
    names = spec.names
    alphas = cfg.alpha_schedules(len(names))
    history = []
    if spec.evaluate != "none":
        X_test, y_test = _test_set(spec)
        per_node = {n: np.asarray(accounts[n]["models"], dtype=float) for n in names}
        means = [np.mean([per_node[n][t] for n in names], axis=0)
                 for t in range(cfg.iterations)]
        losses = (
            {n: evaluate(n, [m.tolist() for m in means]) for n in names}
            if spec.evaluate == "full" else None
        )
        for t in range(1, cfg.iterations + 1):
            history.append(round_entry(
                t, [per_node[n][t - 1] for n in names],
                None if losses is None else [losses[n][t - 1] for n in names],
                cfg, X_test, y_test, alphas,
            ))
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
    return with_exact_values({
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
    }, exact)


#: Keys of ``[params]`` for consensus ADMM: every field of :class:`ConsensusConfig`.
CONSENSUS_PARAMS = job_param_types(ConsensusConfig)

#: Keys of ``[params]`` for decentralized ADMM: every field of :class:`DecentralizedConfig`,
#: and the graph, built from ``graph``, ``graph_seed``, ``p`` and ``radius`` by every node
#: alike (nodes in party order).
DECENTRALIZED_PARAMS = job_param_types(DecentralizedConfig) | {
    "graph": (str,), "graph_seed": (int,), "p": (int, float), "radius": (int, float),
}


class ConsensusProtocol(Protocol):
    """Consensus ADMM with a server: clients hold row ranges, one ``role = "server"`` party
    holds no data and averages the clients' released models."""

    name = "consensus"
    params = CONSENSUS_PARAMS
    holds = "rows"
    dataless_role = "server"
    same_rows = False
    messages = (GlobalModel, LocalModel)
    report = None

    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        servers = [p.name for p in parties if p.role == "server"]
        if len(servers) != 1:
            raise DpfedInputError(
                f'a consensus job needs exactly one party with role = "server". Found {servers}.'
            )

    def private(self, params: Mapping[str, Any]) -> bool:
        return params.get("mechanism", "none") != "none"

    def host(self, spec: JobSpec, name: str) -> ConsensusHost:
        return ConsensusHost(spec, name)

    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        return consensus_result(spec, record.accounts, evaluate=record.evaluate,
                                seconds=record.seconds)


class DecentralizedProtocol(Protocol):
    """Decentralized ADMM over a graph: every party is a node holding a row range and talks
    to its neighbours only."""

    name = "decentralized"
    params = DECENTRALIZED_PARAMS
    holds = "rows"
    dataless_role = None
    same_rows = False
    messages = (NodeModel,)
    report = None

    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        """Any two or more nodes (the job file checks the count)."""

    def private(self, params: Mapping[str, Any]) -> bool:
        return params.get("perturbation", "none") != "none"

    def host(self, spec: JobSpec, name: str) -> DecentralizedHost:
        return DecentralizedHost(spec, name)

    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        return decentralized_result(spec, record.accounts, evaluate=record.evaluate,
                                    seconds=record.seconds)


#: The two horizontal protocols, as registered in :data:`dpfed.runtime.registry`.
CONSENSUS = ConsensusProtocol()
DECENTRALIZED = DecentralizedProtocol()
