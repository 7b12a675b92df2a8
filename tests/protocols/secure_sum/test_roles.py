"""The secure-sum roles without a transport: shares cancel, envelopes bind, repeats refused."""

from __future__ import annotations

import os
from collections import deque

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.dca import secure_sum
from dpfed.dca.envelope import NodeKeyPair
from dpfed.dca.fixedpoint import decode
from dpfed.dca.noise import client_noise
from dpfed.protocols.secure_sum import (
    ComputeNode,
    NodeKey,
    ReceivedReport,
    SealedShare,
    SecureSumClient,
)
from dpfed.runtime.messages import ProtocolError

BITS = 24


def _parties(values: np.ndarray, n_nodes: int, *, tolerated: int = 0, secrets=None):
    n, d = values.shape
    clients = [f"c{i}" for i in range(n)]
    nodes = [f"n{k}" for k in range(n_nodes)]
    secrets = secrets or [os.urandom(32) for _ in clients]
    roles = {
        name: SecureSumClient(
            name,
            i,
            values[i],
            nodes=nodes,
            n_clients=n,
            job_id="job",
            secret=secrets[i],
            fractional_bits=BITS,
        )
        for i, name in enumerate(clients)
    }
    roles |= {
        name: ComputeNode(
            name,
            clients=clients,
            nodes=nodes,
            dim=d,
            job_id="job",
            key=NodeKeyPair.generate(),
            tolerated=tolerated,
        )
        for name in nodes
    }
    return roles, clients, nodes


def _deliver(roles, *, drop=lambda m: False):
    queue = deque(m for r in roles.values() for m in r.start())
    sent = []
    while queue:
        message = queue.popleft()
        sent.append(message)
        if not drop(message):
            queue.extend(roles[message.recipient].handle(message))
    return sent


def _total(roles, nodes) -> np.ndarray:
    total = np.zeros_like(roles[nodes[0]].sum)
    for n in nodes:
        total += roles[n].sum
    return total


@pytest.mark.parametrize(("n", "d", "m"), [(1, 1, 1), (5, 3, 2), (12, 7, 4)])
def test_node_sums_add_up_to_the_in_process_sum(n, d, m):
    values = np.random.default_rng(n).normal(size=(n, d))
    roles, clients, nodes = _parties(values, m)
    _deliver(roles)
    assert all(roles[c].finished for c in clients) and all(roles[k].finished for k in nodes)
    reference = secure_sum(values, noise_std=0.0, compute_nodes=m, fractional_bits=BITS)
    np.testing.assert_array_equal(_total(roles, nodes), reference.total_encoded)
    np.testing.assert_array_equal(decode(_total(roles, nodes), BITS), reference.total)


def test_same_secret_sends_the_same_bytes_again():
    values = np.random.default_rng(0).normal(size=(2, 4))
    secrets = [os.urandom(32), os.urandom(32)]
    first, _, nodes = _parties(values, 2, secrets=secrets)
    sent = _deliver(first)
    again = SecureSumClient(
        "c0",
        0,
        values[0],
        nodes=nodes,
        n_clients=2,
        job_id="job",
        secret=secrets[0],
        fractional_bits=BITS,
    )
    replies = []
    for m in sent:
        if isinstance(m, NodeKey) and m.recipient == "c0":
            replies += again.handle(m)
    originals = [m for m in sent if isinstance(m, SealedShare) and m.sender == "c0"]
    assert [r.envelope.tobytes() for r in replies] == [o.envelope.tobytes() for o in originals]


def test_tampered_or_misdirected_share_is_refused_before_any_change():
    values = np.ones((2, 3))
    roles, _clients, _nodes = _parties(values, 2)
    held = []
    _deliver(roles, drop=lambda m: isinstance(m, SealedShare) and held.append(m) is None)
    share = next(m for m in held if m.sender == "c0" and m.recipient == "n0")
    node = roles["n0"]
    flipped = share.envelope.copy()
    flipped[-1] ^= 1
    with pytest.raises(ProtocolError):
        node.handle(SealedShare("c0", "n0", 1, flipped, share.length))
    other = next(m for m in held if m.sender == "c0" and m.recipient == "n1")
    with pytest.raises(ProtocolError):  # sealed for n1: n0 cannot open it
        node.handle(SealedShare("c0", "n0", 1, other.envelope, other.length))
    with pytest.raises(ProtocolError):  # c1 replays c0's envelope: bound to client 0
        node.handle(SealedShare("c1", "n0", 1, share.envelope, share.length))
    assert not node.received.any()
    node.handle(share)
    with pytest.raises(ProtocolError, match="already"):
        node.handle(share)


def test_nodes_sum_only_clients_every_node_received():
    values = np.arange(12, dtype=float).reshape(4, 3)
    roles, _clients, nodes = _parties(values, 3, tolerated=1)
    n0 = roles["n0"]
    # n0 never hears from c3; the others do and report all four
    _deliver(
        roles,
        drop=lambda m: isinstance(m, SealedShare) and m.sender == "c3" and m.recipient == "n0",
    )
    assert not n0.finished  # n0 waits for c3's share before it reports
    for message in n0.close():  # c3 is declared dropped
        assert roles[message.recipient].handle(message) == []
    report = np.array([True, True, True, False])
    for k in nodes:
        np.testing.assert_array_equal(roles[k].included, report)
    np.testing.assert_allclose(
        decode(_total(roles, nodes), BITS), values[:3].sum(axis=0), atol=1e-6
    )


def test_more_dropouts_than_tolerated_refused():
    values = np.ones((3, 2))
    roles, _clients, _nodes = _parties(values, 2, tolerated=0)
    roles["n0"].reports["n1"] = np.array([True, True, False])
    roles["n0"].reports["n0"] = np.array([True, True, True])
    with pytest.raises(DpfedInputError, match="dropped"):
        roles["n0"]._maybe_sum()


def test_client_refuses_a_value_that_could_overflow():
    with pytest.raises(DpfedInputError, match="value"):
        SecureSumClient(
            "c0",
            0,
            np.array([1e12]),
            nodes=["n0"],
            n_clients=10,
            job_id="job",
            secret=os.urandom(32),
            fractional_bits=BITS,
        )


def test_node_state_survives_a_round_trip():
    values = np.random.default_rng(1).normal(size=(3, 2))
    roles, clients, nodes = _parties(values, 2)
    _deliver(roles)
    arrays, meta = roles["n1"].state_dict()
    copy = ComputeNode(
        "n1", clients=clients, nodes=nodes, dim=2, job_id="job", key=roles["n1"].key, tolerated=0
    )
    copy.load_state_dict(arrays, meta)
    np.testing.assert_array_equal(copy.sum, roles["n1"].sum)
    assert copy.finished and copy.included.all()


def _late(roles, late: set[str]):
    """Deliver everything but the shares of the ``late`` clients; return those shares."""
    held = []
    _deliver(
        roles,
        drop=lambda m: isinstance(m, SealedShare) and m.sender in late and held.append(m) is None,
    )
    return held


def _close_all(roles, nodes) -> list:
    """Close every node (the submission deadline) and deliver the reports they exchange."""
    queue = deque(m for k in nodes for m in roles[k].close())
    while queue:
        message = queue.popleft()
        queue.extend(roles[message.recipient].handle(message))


def test_closing_with_at_most_tolerated_missing_sums_the_rest_like_inprocess():
    n, d, m, std, seed = 7, 4, 3, 0.5, 11
    values = np.random.default_rng(5).normal(scale=3.0, size=(n, d))
    noisy = np.stack([values[i] + client_noise(seed, i, d, std) for i in range(n)])
    roles, _clients, nodes = _parties(noisy, m, tolerated=2)
    _late(roles, {"c1", "c4"})
    assert not any(roles[k].finished for k in nodes)  # every node waits for c1 and c4
    _close_all(roles, nodes)
    reference = secure_sum(
        values,
        noise_std=std,
        rng=seed,
        compute_nodes=m,
        tolerated=2,
        dropped=[1, 4],
        fractional_bits=BITS,
        noise="gaussian",
    )
    np.testing.assert_array_equal(_total(roles, nodes), reference.total_encoded)
    for k in nodes:
        assert roles[k].finished
        np.testing.assert_array_equal(np.flatnonzero(roles[k].included), reference.included)


def test_closing_with_more_than_tolerated_missing_is_refused_without_change():
    values = np.ones((5, 2))
    roles, _clients, _nodes = _parties(values, 2, tolerated=1)
    _late(roles, {"c1", "c3"})
    node = roles["n0"]
    before = node.state_dict()
    with pytest.raises(
        DpfedInputError,
        match=r"3 of 5 clients; 2 are missing \(c1, c3\).*"
        r"tolerated = 1",
    ):
        node.close()
    after = node.state_dict()
    assert not node.closed and after[1] == before[1]
    for key, array in before[0].items():
        np.testing.assert_array_equal(after[0][key], array)


def test_a_share_after_the_close_is_ignored_and_closing_twice_sends_nothing():
    values = np.arange(12, dtype=float).reshape(4, 3)
    roles, _clients, nodes = _parties(values, 2, tolerated=1)
    held = _late(roles, {"c2"})
    reports = roles["n0"].close()
    assert [type(r) for r in reports] == [ReceivedReport] and roles["n0"].closed
    assert roles["n0"].close() == []
    late = next(s for s in held if s.recipient == "n0")
    assert roles["n0"].handle(late) == []  # acknowledged, not stored
    assert not roles["n0"].received[2]
    # n1 receives c2's share in time (and so holds every share): c2 is still left out
    # everywhere, since n0 missed it
    from_n1 = roles["n1"].handle(next(s for s in held if s.recipient == "n1"))
    assert roles["n1"].received.all() and roles["n1"].closed
    for message in reports + from_n1:
        assert roles[message.recipient].handle(message) == []
    for k in nodes:
        np.testing.assert_array_equal(roles[k].included, [True, True, False, True])
    np.testing.assert_allclose(
        decode(_total(roles, nodes), BITS), values[[0, 1, 3]].sum(axis=0), atol=1e-6
    )


def test_a_report_that_leaves_too_few_clients_is_refused_before_it_is_stored():
    values = np.ones((4, 2))
    roles, _clients, _nodes = _parties(values, 2, tolerated=1)
    # n0 misses c0's share and n1 misses c1's: each alone is within T = 1, together not
    _deliver(
        roles,
        drop=lambda m: (
            isinstance(m, SealedShare) and (m.sender, m.recipient) in {("c0", "n0"), ("c1", "n1")}
        ),
    )
    node = roles["n0"]
    node.close()
    (report,) = roles["n1"].close()
    with pytest.raises(
        DpfedInputError,
        match=r"every compute node holds the shares of only "
        r"2 of 4 clients; 2 are missing \(c0, c1\)",
    ):
        node.handle(report)
    assert "n1" not in node.reports and not node.finished


def test_a_closed_node_restored_from_its_state_is_still_closed():
    values = np.random.default_rng(2).normal(size=(4, 2))
    roles, clients, nodes = _parties(values, 2, tolerated=1)
    _late(roles, {"c3"})
    sent = roles["n0"].close()
    arrays, meta = roles["n0"].state_dict()
    copy = ComputeNode(
        "n0", clients=clients, nodes=nodes, dim=2, job_id="job", key=roles["n0"].key, tolerated=1
    )
    copy.load_state_dict(arrays, meta)
    assert copy.closed and copy.close() == [] and not copy.finished
    for message in roles["n1"].close():
        assert copy.handle(message) == [] and roles[message.recipient].handle(message) == []
    for message in sent:
        roles[message.recipient].handle(message)
    np.testing.assert_array_equal(copy.sum, roles["n0"].sum)
    np.testing.assert_array_equal(copy.included, [True, True, True, False])
