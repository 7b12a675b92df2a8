"""Envelopes: a message opens only at its node, for its job, client and round."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from dpfed import DpfedInputError
from dpfed.dca.envelope import (
    Envelope,
    EnvelopeError,
    MessageContext,
    NodeKeyPair,
    open_envelope,
    seal,
    seal_for_nodes,
)

CTX = MessageContext(job_id="job-1", client=7, node=2, round=3)


@pytest.fixture(scope="module")
def node():
    return NodeKeyPair.generate()


def test_round_trip(node):
    env = seal(b"secret share", node.public_bytes, CTX)
    assert open_envelope(env, node, CTX) == b"secret share"
    assert b"secret share" not in env.to_bytes()
    again = Envelope.from_bytes(env.to_bytes())
    assert open_envelope(again, node, CTX) == b"secret share"


def test_tampering_is_detected_and_named(node):
    raw = bytearray(seal(b"x" * 64, node.public_bytes, CTX).to_bytes())
    for position in (0, 40, len(raw) - 1):  # ephemeral key, ciphertext, tag
        bad = bytearray(raw)
        bad[position] ^= 1
        with pytest.raises(EnvelopeError, match="client 7 to compute node 2"):
            open_envelope(Envelope.from_bytes(bytes(bad)), node, CTX)


def test_another_node_cannot_open_it(node):
    other = NodeKeyPair.generate()
    env = seal(b"share", node.public_bytes, CTX)
    with pytest.raises(EnvelopeError):
        open_envelope(env, other, CTX)


@pytest.mark.parametrize(
    "changed",
    [
        {"job_id": "job-2"},
        {"client": 8},
        {"node": 3},
        {"round": 4},
    ],
)
def test_wrong_associated_data_is_rejected(node, changed):
    env = seal(b"share", node.public_bytes, CTX)
    with pytest.raises(EnvelopeError, match="could not be opened"):
        open_envelope(env, node, replace(CTX, **changed))


def test_a_clients_envelopes_each_open_at_their_node_only():
    nodes = [NodeKeyPair.generate() for _ in range(3)]
    contexts = [MessageContext("j", 1, k) for k in range(3)]
    envs = seal_for_nodes([b"a", b"b", b"c"], [n.public_bytes for n in nodes], contexts)
    assert [open_envelope(e, n, c) for e, n, c in zip(envs, nodes, contexts, strict=True)] == [
        b"a",
        b"b",
        b"c",
    ]
    with pytest.raises(EnvelopeError):  # node 1 replays node 0's envelope as its own
        open_envelope(envs[0], nodes[1], contexts[1])


def test_key_pairs_serialise_as_raw_bytes(node):
    raw = node.private_bytes()
    assert len(raw) == 32 and len(node.public_bytes) == 32
    assert NodeKeyPair.from_private_bytes(raw).public_bytes == node.public_bytes
    assert pickle.loads(pickle.dumps(node)).public_bytes == node.public_bytes
    assert raw.hex() not in repr(node)


def test_bad_sizes_are_refused(node):
    with pytest.raises(DpfedInputError, match="32 raw bytes"):
        NodeKeyPair.from_private_bytes(b"123")
    with pytest.raises(DpfedInputError, match="node_public"):
        seal(b"x", b"short", CTX)
    with pytest.raises(EnvelopeError, match="at least 60 bytes"):
        Envelope.from_bytes(b"tiny")
    with pytest.raises(DpfedInputError, match="client"):
        MessageContext("j", -1, 0).associated_data()
