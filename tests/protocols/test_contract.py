"""The contract every registered protocol keeps with the runtime, checked on each one.

Its hosts, built from a job file alone (:func:`dpfed.runtime.registry.build_host`), run the job
to the end when their messages are delivered to them in memory, and:

* every message crosses the wire format unchanged (what the networked runtime sends);
* **state round-trip**: parties snapshotted midway (``state_dict``), rebuilt from the job file
  and restored (``load_state_dict``) finish with the same models, releases and messages as
  parties never stopped;
* **replay**: a party rebuilt from the job file that is handed again what it was handed (its
  journal) sends the same messages and records the same releases;
* the leader-bound messages (round reports) come from the protocol's stated ``reporter``.

The networked runs (``tests/runtime/test_networked_*.py``) and the engines
(``tests/engines``) check per protocol that they equal the in-process drivers; this suite
checks the hosts those runs are made of, the same way for every protocol.
"""

from __future__ import annotations

import dataclasses
import os
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from dpfed.runtime import wire
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.messages import Message
from dpfed.runtime.registry import PROTOCOL_REGISTRY, build_host, get_protocol

LEADER = "leader"


def _party(name: str, *lines: str) -> str:
    return "\n".join(
        [
            "[[party]]",
            f'name = "{name}"',
            f'address = "127.0.0.1:{7000 + sum(map(ord, name)) % 1000}"',
            'certificate = "x.pem"',
            'key = "x.key"',
            *lines,
        ]
    )


def _vertical(folder: Path) -> tuple[str, str, list[str]]:
    params = (
        'iterations = 4\nrounds_above_rule = true\nmechanism = "sound"\nepsilon = 2.0\n'
        "delta = 1e-5\nseed = 3"
    )
    parties = [
        _party(n, 'data = "breast_cancer"', f"columns = [{a}, {a + 10}]")
        for n, a in (("label", 0), ("bank", 10), ("shop", 20))
    ]
    return "vertical", params, parties


def _vertical_secure(folder: Path) -> tuple[str, str, list[str]]:
    pytest.importorskip("tenseal")
    if not os.environ.get("DPFED_REPRODUCE"):
        pytest.skip(
            "CKKS keys for every host take 20 s: set DPFED_REPRODUCE=1; CI checks the secure "
            "mode's restart and replay over the network (tests/runtime/"
            "test_networked_secure_vertical.py)"
        )
    params = "secure = true\niterations = 2\nepsilon = 4.0\ndelta = 1e-5\nseed = 3"
    parties = [
        _party(n, 'data = "breast_cancer"', f"columns = [{a}, {b}]")
        for n, a, b in (("label", 0, 15), ("bank", 15, 30))
    ]
    return "vertical", params, parties


def _consensus(folder: Path) -> tuple[str, str, list[str]]:
    params = 'iterations = 4\nmechanism = "gaussian"\nepsilon = 2.0\ndelta = 1e-5\nseed = 3'
    parties = [_party("server", 'role = "server"', 'data = "breast_cancer"')] + [
        _party(f"c{k}", 'data = "breast_cancer"', f"rows = [{100 * k}, {100 * k + 100}]")
        for k in range(3)
    ]
    return "consensus", params, parties


def _decentralized(folder: Path) -> tuple[str, str, list[str]]:
    params = (
        'iterations = 4\ngraph = "ring"\nperturbation = "pvp"\nalpha = 1.0\n'
        "loss_scale = 50.0\nseed = 3"
    )
    parties = [
        _party(f"node{k}", 'data = "breast_cancer"', f"rows = [{80 * k}, {80 * k + 80}]")
        for k in range(4)
    ]
    return "decentralized", params, parties


def _secure_sum(folder: Path) -> tuple[str, str, list[str]]:
    values = np.random.default_rng(0).normal(size=(6, 5))
    np.save(folder / "values.npy", values)
    params = 'dim = 5\nmechanism = "gaussian"\nnoise_std = 1.0'
    parties = [_party("n0", 'role = "compute"'), _party("n1", 'role = "compute"')] + [
        _party(f"c{k}", 'data = "values.npy"', f"rows = [{2 * k}, {2 * k + 2}]") for k in range(3)
    ]
    return "secure_sum", params, parties


#: A small job of every registered protocol (a protocol its variant runs is reached through
#: the job file that selects it: the secure vertical mode by ``secure = true``).
JOBS = {
    "vertical": _vertical,
    "vertical_secure": _vertical_secure,
    "consensus": _consensus,
    "decentralized": _decentralized,
    "secure_sum": _secure_sum,
}

#: Registered protocols whose hosts need more than a job file (said why).
NOT_HERE = {
    "psi_align": "its hosts read each party's own ID tables and run private set intersection "
    "(tests/protocols/psi_align and tests/runtime/test_networked_alignment.py)",
}


def test_every_registered_protocol_is_checked_here():
    assert set(JOBS) | set(NOT_HERE) == set(PROTOCOL_REGISTRY)
    assert not set(JOBS) & set(NOT_HERE)


def _spec(folder: Path, name: str):
    protocol, params, parties = JOBS[name](folder)
    text = "\n\n".join(
        [
            f'[job]\nid = "contract"\nprotocol = "{protocol}"\n'
            + ("simulation = true" if "seed" in params else ""),
            f"[params]\n{params}",
            '[tls]\nca = "ca.pem"',
            '[leader]\naddress = "127.0.0.1:6999"\ncertificate = "l.pem"\nkey = "l.key"',
            *parties,
        ]
    )
    (folder / "job.toml").write_text(text + "\n")
    spec = load_job(folder / "job.toml")
    assert spec.protocol == name
    return spec


def _same(a: object, b: object, exact: bool) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if exact or a.dtype.kind not in "fc":
            return a.shape == b.shape and bool(np.array_equal(a, b))
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=1e-6))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], exact) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y, exact) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and _same(
            {f.name: getattr(a, f.name) for f in dataclasses.fields(a)},
            {f.name: getattr(b, f.name) for f in dataclasses.fields(b)},
            exact,
        )
    if isinstance(a, float) and isinstance(b, float) and not exact:
        return bool(np.isclose(a, b, rtol=1e-6, atol=1e-6))
    return a == b


def _over_the_wire(message: Message, spec) -> Message:
    """The message as a party receives it from the network."""
    frame = wire.encode(message, job=spec.id, seq=1, max_bytes=spec.max_message_bytes)
    received = wire.decode(frame, job=spec.id, max_bytes=spec.max_message_bytes).message
    assert _same(received, message, exact=True), type(message).__name__
    return received


class Run:
    """Every party's host of ``spec``, and a router delivering their messages in memory."""

    def __init__(self, spec) -> None:
        self.spec = spec
        self.hosts = {name: build_host(spec, name) for name in spec.names}
        self.queue: deque[Message] = deque()
        self.handled: dict[str, list[Message | None]] = {n: [None] for n in spec.names}
        self.sent: dict[str, list[Message]] = {n: [] for n in spec.names}
        self.to_leader: list[Message] = []
        self.delivered = 0
        for name in spec.names:
            self._post(name, self.hosts[name].start())

    def _post(self, sender: str, messages: list[Message]) -> None:
        for message in messages:
            assert message.sender == sender
            self.sent[sender].append(message)
            if message.recipient in self.hosts:
                self.queue.append(_over_the_wire(message, self.spec))
            else:
                self.to_leader.append(message)

    def deliver(self, limit: int | None = None) -> None:
        """Deliver queued messages (at most ``limit``); when none is left and a party still
        waits, close the submissions as the leader does at a deadline."""
        closed = False
        while limit is None or limit > 0:
            if not self.queue:
                if closed or all(h.finished for h in self.hosts.values()):
                    return
                closed = True
                for name, host in self.hosts.items():
                    if not host.finished:
                        self.handled[name].append(None)  # a close, as the journal keeps it
                        self._post(name, host.close())
                continue
            message = self.queue.popleft()
            self.handled[message.recipient].append(message)
            self._post(message.recipient, self.hosts[message.recipient].handle(message))
            self.delivered += 1
            if limit is not None:
                limit -= 1

    def restart_all(self) -> None:
        """Every party snapshotted, rebuilt from the job file alone, and restored."""
        for name, host in list(self.hosts.items()):
            arrays, meta = host.state_dict()
            fresh = build_host(self.spec, name)
            fresh.load_state_dict({k: np.array(v) for k, v in arrays.items()}, dict(meta))
            self.hosts[name] = fresh

    def outcome(self) -> dict[str, object]:
        return {
            name: (host.model(), [dataclasses.astuple(e) for e in host.events], _computed(host))
            for name, host in self.hosts.items()
        }


def _computed(host) -> object:
    """A host's public account without what is measured (seconds)."""

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "seconds"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(host.final())


@pytest.fixture(params=sorted(JOBS))
def spec(request, tmp_path):
    return _spec(tmp_path, request.param)


def test_the_hosts_alone_run_the_job_and_restored_parties_finish_as_never_stopped(spec):
    exact = spec.protocol != "vertical_secure"  # CKKS: approximate arithmetic, fresh noise
    straight = Run(spec)
    straight.deliver()
    assert all(host.finished for host in straight.hosts.values())
    assert straight.delivered > 0
    reporter = get_protocol(spec.protocol).reporter(spec)
    assert {m.sender for m in straight.to_leader} <= {reporter}
    stopped = Run(spec)
    stopped.deliver(limit=max(1, straight.delivered // 2))
    stopped.restart_all()
    stopped.deliver()
    assert all(host.finished for host in stopped.hosts.values())
    assert _same(stopped.outcome(), straight.outcome(), exact)
    assert _same(
        [m for ms in stopped.sent.values() for m in ms],
        [m for ms in straight.sent.values() for m in ms],
        exact,
    )


def test_a_party_replaying_its_journal_sends_and_records_the_same(spec):
    exact = spec.protocol != "vertical_secure"
    run = Run(spec)
    run.deliver()
    for name in spec.names:
        again = build_host(spec, name)
        sent: list[Message] = list(again.start())
        for message in run.handled[name][1:]:
            sent += again.close() if message is None else again.handle(message)
        assert _same(sent, run.sent[name], exact), name
        assert _same(
            [dataclasses.astuple(e) for e in again.events],
            [dataclasses.astuple(e) for e in run.hosts[name].events],
            exact,
        ), name
        assert again.finished
