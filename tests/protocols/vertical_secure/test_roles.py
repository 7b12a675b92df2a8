"""The networked secure vertical roles without a network: two parties pass their messages by
hand; a party rebuilt from a snapshot part-way sends the very same bytes again."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed.data import load_dataset
from dpfed.protocols.vertical.evaluation import RoundReport
from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
from dpfed.protocols.vertical_secure.host import SECURE_MESSAGES
from dpfed.protocols.vertical_secure.messages import CipherPart, cipher_parts
from dpfed.protocols.vertical_secure.party import SecureParty
from dpfed.protocols.vertical_secure.roles import Outbox, SecureRole
from dpfed.runtime import wire
from dpfed.runtime.messages import ProtocolError
from dpfed.secure import ckks

pytest.importorskip("tenseal")
assert RoundReport in SECURE_MESSAGES  # importing the host registers the round report too

NAMES = ("label", "bank")


def _roles(tmp_path, setup, blocks, y01, keys, seed=7):
    rngs = np.random.default_rng(seed).spawn(2)
    roles = {}
    for k, name in enumerate(NAMES):
        party = SecureParty(
            k, blocks[k], setup, rngs[k], y=y01 if k == 0 else None, key_pair=keys[k]
        )
        roles[name] = SecureRole(
            party, NAMES, "leader", outbox=Outbox(tmp_path / name), max_bytes=4 * 2**20
        )
    return roles


def _run(roles, *, stop_after=None):
    """Deliver every message; returns the messages sent (and stops early, returning the
    undelivered queue too, after ``stop_after`` deliveries)."""
    queue = [m for role in roles.values() for m in role.start()]
    sent, delivered = list(queue), 0
    while queue:
        if stop_after is not None and delivered == stop_after:
            return sent, queue
        message = queue.pop(0)
        delivered += 1
        if message.recipient == "leader":
            continue
        out = roles[message.recipient].handle(message)
        sent += out
        queue += out
    return sent, []


@pytest.fixture(scope="module", params=["all", "passive"])  # "parties": its networked test
def problem(request):
    data = load_dataset("breast_cancer")
    blocks = [data.X_train[:, :15], data.X_train[:, 15:]]
    setup = SecureSetup(blocks[0].shape[0], (15, 15), 8.0, 1e-5, protect=request.param, rounds=2)
    keys = [ckks.KeyHolder().secret_bytes() for _ in NAMES]
    return setup, blocks, (data.y_train > 0).astype(float), keys


def _continue(roles, queue):
    """Deliver ``queue`` and what follows; every message delivered, and the frames."""
    queue, sent = list(queue), []
    while queue:
        message = queue.pop(0)
        sent.append(message)
        if message.recipient != "leader":
            queue += roles[message.recipient].handle(message)
    return sent, [wire.encode(m, job="j", seq=1) for m in sent]


def test_the_roles_reach_the_in_process_model_and_replay_the_same_bytes_from_a_snapshot(
    tmp_path, problem
):
    setup, blocks, y01, keys = problem
    roles = _roles(tmp_path, setup, blocks, y01, keys)
    # all: snapshots in round 1; else: the weighting request on its way
    first, queue = _run(roles, stop_after=9 if setup.protect == "all" else 26)
    snapshots = {name: role.state_dict() for name, role in roles.items()}
    rest, frames = _continue(roles, queue)
    sent = [m for m in first if all(m is not q for q in queue)] + rest
    reports = [m for m in sent if isinstance(m, RoundReport)]
    assert [(r.round, r.finished) for r in reports] == [(1, False), (2, True)]
    assert all(role.finished for role in roles.values())
    # Gram and T rounds each; the passive party's weighting statistics; an unprotected
    # label holder records nothing
    expected = {"all": [3, 3], "parties": [3, 4], "passive": [0, 4]}[setup.protect]
    assert [len(role.events) for role in roles.values()] == expected
    local = train_secure_vertical(
        blocks, y01, setup, backend="plain", rngs=np.random.default_rng(7).spawn(2)
    )
    np.testing.assert_allclose(roles["label"].party.w[:-1], local.blocks[0], atol=1e-4)
    np.testing.assert_allclose(roles["bank"].party.w, local.blocks[1], atol=1e-4)
    if setup.protect != "all":  # the label holder's own model, the passive scores weighed
        assert local.weighting is not None and 0.0 < local.weighting.beta <= 1.0
        assert roles["label"].weighting.beta == pytest.approx(local.weighting.beta, abs=1e-3)
        np.testing.assert_array_equal(roles["label"].party.w, roles["label"].party.own_model)
        # the passive party is told the weight only when the label holder's data allow it
        told = roles["bank"].weight
        if setup.protect == "parties":
            assert told is None
        else:
            assert told == pytest.approx(local.weighting.beta, abs=1e-3)
        assert reports[-1].test_log_loss is None  # no test rows given here
    # nothing in the clear but d-vectors: every N-long value travels as ciphertexts
    for m in sent:
        if not isinstance(m, CipherPart):
            assert all(
                v.size < setup.n_samples for v in vars(m).values() if isinstance(v, np.ndarray)
            )
    # both parties rebuilt from their snapshots with the same kept keys and outbox send the
    # same messages, byte for byte (the encryptions are the kept ones), to the same models
    restored = _roles(tmp_path, setup, blocks, y01, keys)
    for name, role in restored.items():
        role.load_state_dict(*snapshots[name])
    assert _continue(restored, queue)[1] == frames
    for name in NAMES:
        np.testing.assert_array_equal(restored[name].party.w, roles[name].party.w)


def test_parts_carry_ciphertexts_below_the_limit_and_refuse_what_does_not_fit():
    items = [bytes([k]) * 1000 for k in range(10)]
    parts = cipher_parts("a", "b", 0, "powers", 0, items, max_bytes=4096)
    assert len(parts) > 1 and all(p.nbytes <= 2048 for p in parts)
    assert [i for p in parts for i in p.items()] == items
    broken = CipherPart(
        "a", "b", 0, "powers", 0, 0, 1, np.array([5]), parts[0].blob, parts[0].nbytes
    )
    with pytest.raises(ProtocolError, match="do not add up"):
        broken.items()
