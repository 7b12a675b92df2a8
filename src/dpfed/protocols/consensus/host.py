"""Consensus ADMM as the networked runtime runs it: a client's or the server's host, the
job-file parameters, the leader's ``result.json`` and the registered :data:`PROTOCOL`
(see :mod:`dpfed.protocols.row_hosts` for what the row-partitioned hosts share).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, cast

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.data.specs import ROW_NOTE, parties_preprocessing
from dpfed.parameters import config_from_table, job_parameters
from dpfed.privacy.accounting import Release
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.base import BaseProtocol
from dpfed.protocols.consensus.driver import (
    CONSENSUS_TRAINING,
    ConsensusConfig,
    client_epsilon,
    client_release,
    consensus_objective,
    consensus_privacy,
    noise_multiplier_of,
    output_model,
    test_metrics,
)
from dpfed.protocols.consensus.messages import GlobalModel, LocalModel
from dpfed.protocols.consensus.roles import ConsensusClient, ConsensusServer
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

#: The messages of a networked consensus job.
CONSENSUS_MESSAGES = (GlobalModel, LocalModel)
for _kind in CONSENSUS_MESSAGES:
    register_message(_kind)


class ConsensusHost(RowHost):
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
        data, X, y = party_rows(spec, name)
        self.n_features = data.X_train.shape[1] + int(cfg.fit_intercept)
        z = noise_multiplier_of(cfg, self.n_features)
        if party.role == "server":
            self.holds_data = False
            self.plan = []
            self.role = ConsensusServer(
                name,
                clients,
                n_features=self.n_features,
                rho=cfg.rho,
                max_rounds=cfg.iterations,
                relaxation=cfg.relaxation,
            )
            return
        X = cfg.prepare_rows(X)
        y = cast(np.ndarray, y)  # a client's rows come with their labels
        index = clients.index(name)
        self.X, self.y = X, y
        release = client_release(cfg, z, len(clients), X.shape[0])
        self.role = ConsensusClient(
            name,
            X,
            y,
            server=server,
            loss=self.loss,
            lam=cfg.lam,
            n_clients=len(clients),
            rho=cfg.rho,
            release=release,
            rng=noise_generator(spec, name, index=index, n_parties=len(clients)),
            relaxation=cfg.relaxation,
        )
        self.plan = (
            []
            if release is None
            else [Release("gaussian", release.noise_multiplier, self.n_features)] * cfg.iterations
        )

    def model(self) -> np.ndarray:
        return cast(np.ndarray, self.role.model if not self.holds_data else self.role.released)

    def final(self) -> dict[str, Any]:
        out: dict[str, Any] = {"events": [asdict(e) for e in self.events]}
        if not self.holds_data:
            out["rounds"] = [
                {
                    "model": r.model.tolist(),
                    "primal_residual": r.primal_residual,
                    "dual_residual": r.dual_residual,
                }
                for r in self.role.history
            ]
        else:
            out["n_samples"] = int(self.X.shape[0])
        return out


def consensus_result(
    spec: JobSpec,
    accounts: dict[str, dict[str, Any]],
    *,
    evaluate: Callable[[str, list[list[float]]], list[float]],
    seconds: float,
) -> dict[str, Any]:
    """The leader's ``result.json`` of a consensus job (the keys of ``dpfed train``'s)."""

    cfg = config_from_table(ConsensusConfig, spec.params).validated()
    server = next(p.name for p in spec.parties if p.role == "server")
    clients = [p.name for p in spec.parties if p.role != "server"]
    rounds = accounts[server]["rounds"]
    models = [r["model"] for r in rounds]  # released: averages of the noisy uploads
    # the job's model after every round (post-processing of the global models)
    outputs = [output_model(models[:t], cfg.average_last) for t in range(1, len(models) + 1)]
    if cfg.average_last > 1:
        models = [m.tolist() for m in outputs]
    X_test, y_test = held_out_rows(spec)
    if X_test is not None:
        X_test = cfg.prepare_rows(X_test)
    losses = {c: evaluate(c, models) for c in clients} if spec.evaluate == "full" else None
    events = {c: [PrivacyEvent(**e) for e in accounts[c]["events"]] for c in clients}
    n = len(clients)
    history = []
    for t, r in enumerate(rounds, start=1):
        w = outputs[t - 1]
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
            if cfg.mechanism != "none"
            else 0.0
        )
        entry["primal_residual"] = r["primal_residual"]
        entry["dual_residual"] = r["dual_residual"]
        history.append(entry)
    for entry in history:
        entry["seconds"] = seconds * entry["iteration"] / max(1, len(history))

    class _Client:  # what consensus_privacy reads of a client
        def __init__(self, name: str) -> None:
            self.name, self.events = name, events[name]
            # made under a mechanism only: every client's release has noise
            self.release = cast(
                GaussianRelease,
                client_release(
                    cfg,
                    noise_multiplier_of(cfg, len(rounds[0]["model"])),
                    n,
                    accounts[name]["n_samples"],
                ),
            )

    privacy = consensus_privacy(
        cfg,
        [_Client(c) for c in clients] if cfg.mechanism != "none" else [],
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
            ["train_objective"],
            left_parties=True,
            what="every client's mean training loss at every round's global model",
        )
    return with_exact_values(
        {
            "protocol": "consensus",
            "config": asdict(cfg),
            "parties": [{"name": c, "n_samples": accounts[c]["n_samples"]} for c in clients],
            "history": history,
            "final": dict(history[-1]) if history else {},
            "privacy": privacy,
            "preprocessing": parties_preprocessing(spec.parties) | {"before_training": ROW_NOTE},
            "seconds": seconds,
            "job": describe(spec),
        },
        exact,
    )


# -- decentralized -----------------------------------------------------------------------------
#: Keys of ``[params]`` for consensus ADMM: every field of :class:`ConsensusConfig`.
CONSENSUS_PARAMS = job_parameters(ConsensusConfig)


class ConsensusProtocol(BaseProtocol):
    """Consensus ADMM with a server: clients hold row ranges, one ``role = "server"`` party
    holds no data and averages the clients' released models."""

    name = "consensus"
    params = CONSENSUS_PARAMS
    holds = "rows"
    dataless_role = "server"
    same_rows = False
    messages = CONSENSUS_MESSAGES
    report = None
    training = CONSENSUS_TRAINING

    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        servers = [p.name for p in parties if p.role == "server"]
        if len(servers) != 1:
            raise DpfedInputError(
                f'a consensus job needs exactly one party with role = "server". Found {servers}.'
            )

    def private(self, params: Mapping[str, Any]) -> bool:
        return cast(bool, params.get("mechanism", "none") != "none")

    def check_job(self, spec: JobSpec) -> None:
        config_from_table(ConsensusConfig, spec.params).validated()

    def host(self, spec: JobSpec, name: str) -> ConsensusHost:
        return ConsensusHost(spec, name)

    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        return consensus_result(
            spec, record.accounts, evaluate=record.evaluate, seconds=record.seconds
        )


#: Consensus ADMM, as registered in :data:`dpfed.runtime.registry.PROTOCOL_REGISTRY`.
PROTOCOL = ConsensusProtocol()
