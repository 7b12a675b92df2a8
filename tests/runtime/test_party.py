"""A real ``dpfed party`` process refuses what it must, keeps serving, and stays consistent.

The test plays the leader and the label holder against party ``bank``.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import replace

import grpc
import numpy as np
import pytest

from dpfed import __version__
from dpfed._validation import DpfedInputError
from dpfed.protocols.secure_sum.host import SecureSumHost
from dpfed.protocols.vertical.host import VERTICAL_MESSAGES
from dpfed.protocols.vertical.messages import Broadcast
from dpfed.runtime import wire
from dpfed.runtime.budget import BudgetLedger
from dpfed.runtime.certs import TlsIdentity, load_identity
from dpfed.runtime.control import (
    AbortJob,
    BeginJob,
    CloseSubmissions,
    OpenJob,
    StatusRequest,
    control_request,
    kinds_fingerprint,
)
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.party import PartyNode
from dpfed.runtime.transport import Connection, RemoteError

PARTIES = [
    ("label", "breast_cancer", (0, 10)),
    ("bank", "breast_cancer", (10, 20)),
    ("shop", "breast_cancer", (20, 30)),
]


def _identity(certs, name: str) -> TlsIdentity:
    return load_identity(certs / f"{name}.pem", certs / f"{name}.key", certs / "ca.pem")


def _request(op, *, job: str = "job", **fields) -> bytes:
    """The leader's control request ``op`` to the bank, as a frame."""
    return wire.encode(control_request(op, party="bank", **fields), job=job, seq=0)


def _open(digest: str, **fields) -> bytes:
    fields = {
        "resume": False,
        "version": __version__,
        "kinds": kinds_fingerprint(VERTICAL_MESSAGES),
    } | fields
    return _request(OpenJob, digest=digest, **fields)


def _code(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(RemoteError) as info:
        call()
    return info.value.code, info.value.details


@pytest.fixture
def bank(netjob, job_certs):
    job = netjob(PARTIES, params={"iterations": 5}, job={"max_message_mb": 1})
    proc = job.start_party("bank")
    address = job.config.read_text().split('name = "bank"')[1].split('"')[1]
    leader = Connection(_identity(job_certs, "leader"), "bank", address, max_bytes=2**21)
    deadline = time.monotonic() + 30
    while True:
        try:
            leader.control(_request(StatusRequest), timeout=2)
            break
        except RemoteError:
            assert time.monotonic() < deadline, job.log("bank")
            time.sleep(0.1)
    from dpfed.runtime.jobfile import load_job

    spec = load_job(job.config)
    yield job, proc, leader, address, spec
    leader.close()


def test_party_refuses_bad_peers_and_messages_and_keeps_serving(bank, job_certs, foreign_certs):
    job, proc, leader, address, spec = bank
    # a leader whose job file differs is refused, naming where
    code, why = _code(lambda: leader.control(_open("0" * 64), timeout=10))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "job file differs" in why
    other = replace(spec, params=spec.params | {"iterations": 6, "lam": 0.5})
    keys = json.dumps(other.key_digests())
    code, why = _code(lambda: leader.control(_open(other.digest, keys=keys), timeout=10))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "differs from the leader's at params.iterations, params.lam;" in why
    # so is a leader of another version, or one that speaks other message kinds
    code, why = _code(lambda: leader.control(_open(spec.digest, version="0.0.1"), timeout=10))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert f"the leader runs dpfed 0.0.1 and bank runs dpfed {__version__}" in why
    code, why = _code(lambda: leader.control(_open(spec.digest, kinds="0" * 64), timeout=10))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "message kinds" in why
    info = leader.control(_open(spec.digest), timeout=30)
    n = info["n_samples"]
    leader.control(_request(BeginJob), timeout=10)

    label = Connection(_identity(job_certs, "label"), "bank", address, max_bytes=2**21)
    zeros = np.zeros(n)

    def frame(round_, seq, *, residual=zeros, rho=0.25, sender="label"):
        message = Broadcast(sender, "bank", round_, residual, zeros, rho, False)
        return wire.encode(message, job="job", seq=seq)

    assert label.deliver(frame(0, 1), timeout=10) == b"ok"
    assert label.deliver(frame(0, 1), timeout=10) == b"ok"  # a faithful repeat is acknowledged

    refusals = {
        "replayed round": (
            lambda: label.deliver(frame(0, 2), timeout=10),
            grpc.StatusCode.FAILED_PRECONDITION,
            "expected round 1",
        ),
        "forged repeat": (
            lambda: label.deliver(frame(0, 1, rho=0.5), timeout=10),
            grpc.StatusCode.FAILED_PRECONDITION,
            "different content",
        ),
        "skipped number": (
            lambda: label.deliver(frame(1, 5), timeout=10),
            grpc.StatusCode.FAILED_PRECONDITION,
            "out of order",
        ),
        "wrong shape": (
            lambda: label.deliver(frame(1, 2, residual=np.zeros(n + 1)), timeout=10),
            grpc.StatusCode.FAILED_PRECONDITION,
            "shape",
        ),
        "spoofed sender": (
            lambda: label.deliver(frame(1, 2, sender="shop"), timeout=10),
            grpc.StatusCode.PERMISSION_DENIED,
            "connection is 'label'",
        ),
        "other job": (
            lambda: label.deliver(
                wire.encode(
                    Broadcast("label", "bank", 1, zeros, zeros, 0.25, False), job="other", seq=2
                ),
                timeout=10,
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "job",
        ),
        "oversized": (
            lambda: label.deliver(b"\0" * (2**20 + 1), timeout=10),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "",
        ),
        "control from a party": (
            lambda: label.control(_request(StatusRequest), timeout=10),
            grpc.StatusCode.PERMISSION_DENIED,
            "only the leader",
        ),
        "control request as a message": (
            lambda: label.deliver(_request(StatusRequest), timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT,
            "control request",
        ),
        "control for another job": (
            lambda: leader.control(_request(StatusRequest, job="other"), timeout=10),
            grpc.StatusCode.FAILED_PRECONDITION,
            "serves job 'job'. Found 'other'",
        ),
        "not a control request": (
            lambda: leader.control(b'{"op": "status"}', timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT,
            "not a control request",
        ),
        "a protocol message as control": (
            lambda: leader.control(frame(1, 2), timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT,
            "expected a control request",
        ),
    }
    marker = 1.2345
    nan_frame = frame(1, 2, residual=np.full(n, marker)).replace(
        np.float64(marker).tobytes(), np.float64(np.nan).tobytes()
    )
    refusals["NaN values"] = (
        lambda: label.deliver(nan_frame, timeout=10),
        grpc.StatusCode.INVALID_ARGUMENT,
        "finite",
    )
    mallory = Connection(_identity(job_certs, "mallory"), "bank", address, max_bytes=2**21)
    refusals["unknown party"] = (
        lambda: mallory.deliver(frame(1, 2, sender="mallory"), timeout=10),
        grpc.StatusCode.PERMISSION_DENIED,
        "not a party",
    )
    foreign = _identity(foreign_certs, "label")
    impostor = TlsIdentity(
        "label", foreign.certificate_pem, foreign.key_pem, (job_certs / "ca.pem").read_bytes()
    )
    outsider = Connection(impostor, "bank", address, max_bytes=2**21)
    refusals["certificate from another CA"] = (
        lambda: outsider.deliver(frame(1, 2), timeout=5),
        grpc.StatusCode.UNAVAILABLE,
        "",
    )
    plaintext = grpc.insecure_channel(address).unary_unary("/dpfed.Node/Deliver")

    def plain() -> None:
        try:
            plaintext(frame(1, 2), timeout=5)
        except grpc.RpcError as exc:
            raise RemoteError("bank", exc.code(), exc.details() or "") from None

    refusals["plaintext client"] = (plain, grpc.StatusCode.UNAVAILABLE, "")

    for what, (call, want, text) in refusals.items():
        code, why = _code(call)
        assert code == want, (what, code, why)
        assert text in why, (what, why)
        assert proc.poll() is None, what  # the party is still serving

    # nothing above changed the party: the real round-1 message is still the next one
    status = leader.control(_request(StatusRequest), timeout=10)
    assert status["round"] == 1
    # every refusal is logged at the party, with the peer's name
    log = job.log("bank")
    assert "[bank] refused a control request from label: only the leader" in log
    assert "[bank] refused a control request from leader:" in log and "serves job" in log
    assert "[bank] refused a message from mallory:" in log
    assert "[bank] refused a message from label:" in log
    assert label.deliver(frame(1, 2), timeout=10) == b"ok"
    assert leader.control(_request(StatusRequest), timeout=10)["round"] == 2
    log = job.log("bank")
    assert "refused a message from label" in log and "refused a message from mallory" in log
    leader.control(_request(AbortJob, reason="test over"), timeout=10)
    assert proc.wait(timeout=20) == 1
    for c in (label, mallory, outsider):
        c.close()


def test_unknown_party_name_is_refused_at_start(netjob):
    job = netjob(PARTIES, params={"iterations": 5})
    done = subprocess.run(
        [*job.run_args()[:3], "party", "--config", str(job.config), "--name", "eve"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "party must be one of ['label', 'bank', 'shop']. Found 'eve'" in done.stderr


def test_leader_refuses_a_party_without_budget(netjob):
    job = netjob(
        PARTIES,
        params={
            "iterations": 4,
            "mechanism": "sound",
            "epsilon": 1.0,
            "delta": 1e-5,
            "rounds_above_rule": True,
        },
    )
    job.start_parties()
    done = job.run(timeout=120)
    assert done.returncode == 2
    assert "no privacy budget is set for bank" in done.stderr
    assert not job.out.exists()
    assert all(code == 1 for code in job.wait_parties().values())


def _opened(node: PartyNode, spec) -> bool:
    """Open ``node``'s job as the leader would; close what the node holds afterwards."""
    request = control_request(
        OpenJob,
        party=node.name,
        digest=spec.digest,
        resume=False,
        version=__version__,
        kinds=kinds_fingerprint(VERTICAL_MESSAGES),
    )
    try:
        node._open(request)
        return node.opened
    finally:
        if node.ledger is not None:
            node.ledger.close()
        node.journal.close()


def test_a_full_evaluation_needs_a_budgeted_partys_own_permission(netjob):
    """The budget here is in the party's ledger (`dpfed budget set`), not in the job file."""
    job = netjob(
        PARTIES,
        params={
            "iterations": 3,
            "mechanism": "sound",
            "epsilon": 1.0,
            "delta": 1e-5,
            "rounds_above_rule": True,
        },
        job={"evaluate": "full"},
    )
    spec = load_job(job.config)
    path = spec.party("bank").ledger
    path.parent.mkdir(parents=True, exist_ok=True)
    with BudgetLedger(path) as ledger:
        ledger.set_budget("breast_cancer:10-20", "bank", 4.0, 1e-5)
    node = PartyNode(spec, "bank")
    with pytest.raises(DpfedInputError) as refused:
        _opened(node, spec)
    assert '[job].evaluate = "full"' in str(refused.value)
    assert "its rows of 'breast_cancer:10-20'" in str(refused.value)
    assert "it has a privacy budget" in str(refused.value)
    assert "dpfed party --allow-exact-disclosure" in str(refused.value)
    assert not node.opened
    with BudgetLedger(path) as ledger:
        assert ledger.jobs() == []  # nothing reserved
    # the party's own flag: it opens the job and reserves its releases
    assert _opened(PartyNode(spec, "bank", allow_exact_disclosure=True), spec)
    with BudgetLedger(path) as ledger:
        (opened,) = ledger.jobs()
    assert opened["status"] == "open" and opened["planned"] > 0


def _secure_sum_node(netjob, tmp_path):
    """A 3-client, 2-node secure sum with a deadline; compute0 as an in-process party."""
    np.save(tmp_path / "v.npy", np.arange(6, dtype=float).reshape(3, 2))
    data = str(tmp_path / "v.npy")
    parties = [("compute0", data, None), ("compute1", data, None)]
    parties += [(f"client{i}", data, (i, i + 1)) for i in range(3)]
    job = netjob(
        parties,
        protocol="secure_sum",
        job={"evaluate": "none"},
        params={"dim": 2, "tolerated": 1, "deadline": 5.0},
    )
    spec = load_job(job.config)
    node = PartyNode(spec, "compute0")
    node.opened = True
    keys = {k: SecureSumHost(spec, k).start()[0] for k in ("compute0", "compute1")}
    shares = {}
    for i in range(3):
        client = SecureSumHost(spec, f"client{i}")
        out = [m for k in keys.values() for m in client.handle(replace(k, recipient=f"client{i}"))]
        shares[f"client{i}"] = next(m for m in out if m.recipient == "compute0")
    return spec, node, shares


def _frames(link) -> list[bytes]:
    return [payload for _, payload in link.queue]


def test_a_closed_compute_node_closes_again_when_it_replays_its_journal(netjob, tmp_path):
    spec, node, shares = _secure_sum_node(netjob, tmp_path)
    close = control_request(CloseSubmissions, party="compute0")
    with pytest.raises(DpfedInputError, match="has not begun"):
        node._close(close)
    node._begin(control_request(BeginJob, party="compute0"))
    node._deliver_checked(memoryview(wire.encode(shares["client0"], job="job", seq=1)), "client0")
    with pytest.raises(DpfedInputError, match=r"2 are missing \(client1, client2\)"):
        node._close(close)  # refused: nothing journaled
    node._deliver_checked(memoryview(wire.encode(shares["client2"], job="job", seq=1)), "client2")
    assert node._close(close) == {"round": 0, "finished": False}
    # client1 is late: its share is acknowledged and ignored
    node._deliver_checked(memoryview(wire.encode(shares["client1"], job="job", seq=1)), "client1")
    role = node.host.role
    assert role.closed and role.received.tolist() == [True, False, True]
    sent = _frames(node.links["compute1"])
    assert len(sent) == 1  # the report of the received set
    node.journal.close()

    again = PartyNode(spec, "compute0")  # restarted: replays begin, shares, close, late share
    assert again.restored and again.begun and again.host.role.closed
    assert again.host.role.received.tolist() == [True, False, True]
    assert _frames(again.links["compute1"]) == sent  # the very same report, same number
    again.journal.close()
