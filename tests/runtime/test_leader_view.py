"""Under a privacy mechanism the leader receives nothing computed from exact private values.

The leader runs in this process with every control reply and round report recorded; the
parties are real processes. Every number that reached the leader is then checked against
values released by the protocol (scores and broadcasts read from the recipients' journals,
released models) and public facts (shapes, calibration, the round), or must be absent.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpfed.data import load_dataset, vertical_split
from dpfed.protocols.consensus.messages import LocalModel
from dpfed.protocols.consensus.roles import ConsensusServer
from dpfed.protocols.decentralized.messages import NodeModel
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical
from dpfed.runtime import wire
from dpfed.runtime.control import (
    AccountRequest,
    BeginJob,
    EvaluateRequest,
    FinishJob,
    OpenJob,
    StatusRequest,
)
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.journal import Journal
from dpfed.runtime.leader import Leader

BUDGET = {"epsilon": 8.0, "delta": 1e-5}
#: What the leader may learn in the replies to its control requests, by request.
PUBLIC_REPLIES = {
    OpenJob: {"n_samples", "n_features", "round", "begun", "planned_releases", "dim"},
    BeginJob: {"round"},
    StatusRequest: {"round", "finished", "refusals", "links", "epsilon"},
    FinishJob: {"events", "n_features", "n_samples", "model", "spent", "rounds", "models"},
    AccountRequest: {"events", "n_features", "n_samples", "spent", "rounds", "models"},
}


class RecordingLeader(Leader):
    """A leader that keeps every control reply it receives."""

    def __init__(self, *args, **kwargs) -> None:
        self.replies: list[tuple[str, type, dict]] = []
        super().__init__(*args, **kwargs)

    def _control(self, name, op, *, timeout=None, **fields):
        reply = super()._control(name, op, timeout=timeout, **fields)
        self.replies.append((name, op, reply))
        return reply


class Watcher:
    """A subscriber to the leader's events that keeps them all."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_state(self, state, message=None):
        self.events.append(("state", state))

    def on_party(self, name, status, reply=None):
        self.events.append(("party", name, status, reply))

    def on_history(self, history):
        self.events.append(("history", [dict(e) for e in history]))

    def on_result(self, result):
        self.events.append(("result", result))


def _lead(job) -> tuple[RecordingLeader, dict]:
    job.start_parties()
    leader = RecordingLeader(load_job(job.config), progress=False)
    watcher = Watcher()
    leader.events.subscribe(watcher)
    result = leader.run(job.out)
    assert job.wait_parties() == dict.fromkeys(job.names, 0)
    _check_events(watcher.events, result, job.names)
    return leader, result


def _check_events(events: list[tuple], result: dict, names: list[str]) -> None:
    """A watcher saw the job run and finish, every party serve and finish, the history of
    round reports (a protocol that sends them) grow to the result's and the result itself;
    and no status reply beyond what the leader may learn."""
    states = [e[1] for e in events if e[0] == "state"]
    assert states == ["running", "finished"]
    for name in names:
        statuses = [e[2] for e in events if e[0] == "party" and e[1] == name]
        assert statuses[0] in ("waiting", "serving") and statuses[-1] == "finished", statuses
    for event in events:
        if event[0] == "party" and event[3] is not None:
            assert set(event[3]) <= PUBLIC_REPLIES[StatusRequest], event
    histories = [e[1] for e in events if e[0] == "history"]  # from the round reports
    lengths = [len(h) for h in histories]
    assert lengths == sorted(lengths)
    if histories:
        assert histories[-1] == result["history"]
    assert [e[1] for e in events if e[0] == "result"] == [result]


def _check_replies(leader: RecordingLeader) -> None:
    ops = {op for _, op, _ in leader.replies}
    assert EvaluateRequest not in ops  # no training losses were asked for, let alone answered
    for name, op, reply in leader.replies:
        assert set(reply) <= PUBLIC_REPLIES[op], (name, op, sorted(reply))


def _journal_messages(job, name: str, kind) -> list:
    journal = Journal(job.workdir(name) / "journal.bin")
    out = [
        wire.decode(payload, job=job.job_id, max_bytes=2**26).message
        for k, _, payload in journal.records()
        if k == b"M"
    ]
    journal.close()
    return [m for m in out if isinstance(m, kind)]


def test_vertical_with_a_protected_label_holder(netjob):
    params = {
        "iterations": 6,
        "mechanism": "sound",
        "epsilon": 4.0,
        "delta": 1e-5,
        "protect_label_holder": True,
        "rounds_above_rule": True,
    }
    parties = [
        ("label", "breast_cancer", (0, 10)),
        ("bank", "breast_cancer", (10, 20)),
        ("shop", "breast_cancer", (20, 30)),
    ]
    job = netjob(parties, params=params, budgets=dict.fromkeys(("label", "bank", "shop"), BUDGET))
    leader, result = _lead(job)
    _check_replies(leader)
    assert "exact_values" not in result
    for entry in leader.history:  # the round reports, as received
        assert entry["train_objective"] is None
        assert entry["primal_residual"] is None and entry["dual_residual"] is None
    # the test figures are those of the released models on the (public) test rows: every round
    # equals the same job in one process with the same secrets, whose test figures are computed
    # from released models; the last round is recomputed here from the released models alone
    data = load_dataset("breast_cancer")
    reference = train_vertical(
        vertical_split(data.X_train, (10, 10, 10)),
        data.y_train,
        VerticalConfig(**{k: v for k, v in params.items() if k != "rounds_above_rule"}),
        names=job.names,
        test_blocks=vertical_split(data.X_test, (10, 10, 10)),
        test_labels=data.y_test,
        rngs=job.secret_rngs(),
    )
    for got, want in zip(leader.history, reference.history, strict=True):
        assert got["test_log_loss"] == want["test_log_loss"]
        assert got["epsilon"] == want["epsilon"]
    # each party's rows as its mechanism prepares them (clipped; the label holder's with its
    # intercept column)
    scores = sum(
        mechanism.prepare_block(block)
        @ np.array(json.loads((job.workdir(name) / "model.json").read_text())["coef"])
        for name, block, mechanism in zip(
            job.names, vertical_split(data.X_test, (10, 10, 10)), reference.mechanisms, strict=True
        )
    )
    y = np.where(data.y_test > 0, 1.0, -1.0)
    assert leader.history[-1]["test_log_loss"] == pytest.approx(
        float(np.mean(np.logaddexp(0.0, -y * scores))), rel=1e-12
    )


def test_consensus(netjob):
    params = {
        "iterations": 4,
        "mechanism": "gaussian",
        "epsilon": 2.0,
        "delta": 1e-5,
        "lam": 1e-3,
        "rho": 0.1,
    }
    clients = [("bank", "breast_cancer", (0, 130)), ("shop", "breast_cancer", (130, 260))]
    job = netjob(
        [("server", "breast_cancer", None), *clients],
        params=params,
        protocol="consensus",
        budgets={"bank": BUDGET, "shop": BUDGET},
    )
    leader, result = _lead(job)
    _check_replies(leader)
    assert "exact_values" not in result
    assert all(entry["train_objective"] is None for entry in result["history"])
    # the server's per-round models are a function of the released uploads alone
    uploads = _journal_messages(job, "server", LocalModel)
    server = ConsensusServer(
        "server",
        ["bank", "shop"],
        n_features=31,
        rho=0.1,  # + intercept
        max_rounds=4,
    )
    for message in sorted(uploads, key=lambda m: (m.round, m.sender != "bank")):
        server.handle(message)
    rounds = next(r for n, op, r in leader.replies if n == "server" and op is AccountRequest)[
        "rounds"
    ]
    for got, want in zip(rounds, server.history, strict=True):
        np.testing.assert_array_equal(np.array(got["model"]), want.model)


def test_decentralized_pvp(netjob):
    params = {
        "iterations": 5,
        "perturbation": "pvp",
        "alpha": 1.0,
        "graph": "ring",
        "eta": 0.5,
        "rho": 0.01,
        "loss_scale": 50.0,
    }
    nodes = [(f"node{k}", "breast_cancer", (80 * k, 80 * k + 80)) for k in range(4)]
    job = netjob(
        nodes,
        params=params,
        protocol="decentralized",
        budgets=dict.fromkeys((n for n, *_ in nodes), BUDGET),
    )
    leader, result = _lead(job)
    _check_replies(leader)
    assert "exact_values" not in result
    assert all(entry["train_objective"] is None for entry in result["history"])
    # every model a node handed the leader is one of its broadcasts, as its neighbours got them
    received: dict[tuple[str, int], np.ndarray] = {}
    for name in job.names:
        for message in _journal_messages(job, name, NodeModel):
            received[(message.sender, message.round)] = np.array(message.model)
    accounts = {n: r for n, op, r in leader.replies if op is AccountRequest}
    for name in job.names:
        models = accounts[name]["models"]
        assert len(models) == params["iterations"]
        for t, model in enumerate(models, start=1):
            np.testing.assert_array_equal(np.array(model), received[(name, t)])
