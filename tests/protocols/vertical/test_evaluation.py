"""Per-round evaluation of the networked vertical job, and checkpointing the roles.

The evaluated roles run here over the in-process transport with a collector in the leader's
place; their round reports must be exactly the history :func:`train_vertical` computes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

import numpy as np
import pytest

from dpfed._validation import check_binary_labels
from dpfed.engines.inprocess import InProcessEngine
from dpfed.protocols.vertical.driver import (
    VerticalConfig,
    make_vertical_role,
    party_epsilon,
    party_rng,
    train_vertical,
    vertical_setup,
)
from dpfed.protocols.vertical.evaluation import (
    EvalShare,
    EvaluatedLabelHolder,
    EvaluatedPassiveParty,
    RoundReport,
)
from dpfed.protocols.vertical.messages import Broadcast, Scores
from dpfed.protocols.vertical.roles import ProtocolError
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint

from ...conftest import make_vertical_problem, make_vertical_problem_with_test

NAMES = ["label", "bank", "shop"]
LEADER = "leader"

CONFIGS = {
    "none": VerticalConfig(lam=1e-2, iterations=6),
    "sound": VerticalConfig(
        mechanism="sound", epsilon=4.0, delta=1e-5, seed=7, iterations=4, accountant="rdp"
    ),
    "sound-protected": VerticalConfig(
        mechanism="sound",
        epsilon=4.0,
        delta=1e-5,
        seed=11,
        iterations=3,
        accountant="rdp",
        protect_label_holder=True,
    ),
    "paper": VerticalConfig(mechanism="paper", epsilon=2.0, delta=1e-5, seed=5, iterations=3),
}


class Collector:
    """Stands in for the job's leader: keeps every round report."""

    name = LEADER

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def handle(self, message):
        assert isinstance(message, RoundReport)
        assert message.sender == NAMES[0]
        self.reports.append(message)
        return []


def _problem(with_test: bool):
    if with_test:
        return make_vertical_problem_with_test(n=120, split=(4, 3, 2), seed=3, n_test=40)
    blocks, y = make_vertical_problem(n=120, split=(4, 3, 2), seed=3)
    return blocks, y, None, None


def _roles(config, blocks, y, test_blocks=None, y_test=None, *, train=True):
    """The evaluated roles, built the way train_vertical and VerticalHost build them."""
    cfg = config.validated()
    setup = vertical_setup(cfg, [b.shape[1] for b in blocks], blocks[0].shape[0])
    cfg = setup.config

    def epsilon_of(events):
        return party_epsilon(events, cfg)

    roles = []
    for m, block in enumerate(blocks):
        rng = party_rng(cfg.seed, m, len(blocks))
        test_block = None if test_blocks is None else test_blocks[m]
        if m == 0:
            holder = make_vertical_role(
                setup, 0, NAMES, block, rng=rng, labels=check_binary_labels("labels", y)
            )
            roles.append(
                EvaluatedLabelHolder(
                    holder,
                    leader=LEADER,
                    lam=cfg.lam,
                    test_block=test_block,
                    test_labels=None if y_test is None else check_binary_labels("test", y_test),
                    epsilon_of=epsilon_of,
                    train=train,
                )
            )
        else:
            party = make_vertical_role(setup, m, NAMES, block, rng=rng)
            roles.append(
                EvaluatedPassiveParty(
                    party, test_block=test_block, epsilon_of=epsilon_of, train=train
                )
            )
    return roles


def _run(roles) -> Collector:
    collector = Collector()
    InProcessEngine().run({r.name: r for r in [*roles, collector]}, roles[0].start())
    return collector


def _without_seconds(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k != "seconds"}


# -- the reports are the history -------------------------------------------------------------
@pytest.mark.parametrize("with_test", [False, True], ids=["train-only", "with-test"])
@pytest.mark.parametrize("mechanism", list(CONFIGS))
def test_round_reports_equal_the_in_process_history_exactly(mechanism, with_test):
    config = CONFIGS[mechanism]
    blocks, y, test_blocks, y_test = _problem(with_test)
    reference = train_vertical(
        blocks, y, config, names=NAMES, test_blocks=test_blocks, test_labels=y_test
    )
    roles = _roles(config, blocks, y, test_blocks, y_test)
    reports = _run(roles).reports

    entries = [r.entry() for r in reports]
    assert [_without_seconds(e) for e in entries] == [
        _without_seconds(h) for h in reference.history
    ]
    assert all(e["seconds"] is None for e in entries)
    assert [r.round for r in reports] == list(range(1, len(reference.history) + 1))
    assert [r.finished for r in reports] == [False] * (len(reports) - 1) + [True]
    assert all(e["train_objective"] is not None for e in entries)
    assert all((e["test_log_loss"] is not None) == with_test for e in entries)
    if mechanism == "paper":  # the paper's formula is no certified epsilon
        assert all(e["epsilon"] is None for e in entries)
    elif mechanism != "none":
        assert entries[-1]["epsilon"] > 0
    for role in roles:  # evaluation does not disturb the protocol
        assert np.array_equal(role.role.model, reference.models[role.name])


@pytest.mark.parametrize("with_test", [False, True], ids=["train-only", "with-test"])
@pytest.mark.parametrize("mechanism", ["none", "sound"])
def test_without_training_rows_only_the_objective_is_missing(mechanism, with_test):
    config = CONFIGS[mechanism]
    blocks, y, test_blocks, y_test = _problem(with_test)
    reference = train_vertical(
        blocks, y, config, names=NAMES, test_blocks=test_blocks, test_labels=y_test
    )
    reports = _run(_roles(config, blocks, y, test_blocks, y_test, train=False)).reports
    entries = [_without_seconds(r.entry()) for r in reports]
    assert all(e["train_objective"] is None for e in entries)
    expected = [_without_seconds(h) | {"train_objective": None} for h in reference.history]
    assert entries == expected


def test_shares_carry_nothing_for_rows_that_are_not_evaluated():
    blocks, y, _, _ = _problem(False)
    label, bank, _shop = _roles(CONFIGS["none"], blocks, y, train=False)
    share, scores = bank.handle(label.start()[0])
    assert isinstance(share, EvalShare) and isinstance(scores, Scores)
    assert share.recipient == "label" and share.round == 1
    assert share.train_scores.shape == (0,) and share.test_scores.shape == (0,)


# -- refusals ----------------------------------------------------------------------------------
@pytest.fixture
def first_round():
    """Roles (with test rows) after the round-0 broadcast reached both passive parties."""
    blocks, y, test_blocks, y_test = _problem(True)
    label, bank, shop = _roles(CONFIGS["none"], blocks, y, test_blocks, y_test)
    broadcasts = {b.recipient: b for b in label.start()}
    out = {"bank": bank.handle(broadcasts["bank"]), "shop": shop.handle(broadcasts["shop"])}
    return label, out


def test_the_share_is_sent_before_the_scores(first_round):
    _, out = first_round
    for name, (share, scores) in out.items():
        assert isinstance(share, EvalShare) and isinstance(scores, Scores)
        assert share.sender == scores.sender == name
        assert share.round == scores.round == 1
        assert share.train_scores.shape == (120,) and share.test_scores.shape == (40,)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (dict(round=2), "expected evaluation shares of round 1"),
        (dict(round=0), "expected evaluation shares of round 1"),
        (dict(sender="mallory"), "'mallory'"),
        (dict(sender="label"), "'label'"),
        (dict(train_scores=np.zeros(119)), r"\(120,\) training"),
        (dict(train_scores=np.zeros((120, 1))), r"\(120,\) training"),
        (dict(train_scores=np.zeros(0)), r"\(120,\) training"),
        (dict(test_scores=np.zeros(41)), r"\(40,\) test"),
        (dict(test_scores=np.zeros(0)), r"\(40,\) test"),
    ],
)
def test_bad_shares_are_refused(first_round, change, pattern):
    label, out = first_round
    share = out["bank"][0]
    with pytest.raises(ProtocolError, match=pattern):
        label.handle(replace(share, **change))
    assert label.shares == {}
    label.handle(share)  # the genuine share still goes through
    assert set(label.shares) == {"bank"}


def test_a_second_share_from_the_same_party_is_refused(first_round):
    label, out = first_round
    label.handle(out["bank"][0])
    with pytest.raises(ProtocolError, match="already holds"):
        label.handle(out["bank"][0])


def test_scores_before_their_share_are_refused(first_round):
    label, out = first_round
    label.handle(out["bank"][0])
    assert label.handle(out["bank"][1]) == []
    with pytest.raises(ProtocolError, match="evaluation share"):
        label.handle(out["shop"][1])  # no round can finish without every share
    assert set(label.role.inbox) == {"bank"}
    assert label.role.history == []
    label.handle(out["shop"][0])
    assert isinstance(label.handle(out["shop"][1])[0], RoundReport)


def test_shares_of_the_next_round_are_refused_until_the_round_is_over(first_round):
    label, out = first_round
    for name in ("bank", "shop"):
        label.handle(out[name][0])
    assert label.handle(out["bank"][1]) == []
    with pytest.raises(ProtocolError, match="already holds"):
        label.handle(replace(out["bank"][0], round=1))
    reply = label.handle(out["shop"][1])
    assert isinstance(reply[0], RoundReport) and reply[0].recipient == LEADER
    assert [type(m) for m in reply[1:]] == [Broadcast, Broadcast]
    assert label.shares == {}
    with pytest.raises(ProtocolError, match="round 2"):
        label.handle(out["bank"][0])  # round 1's share again


# -- checkpoint and continue -------------------------------------------------------------------
STATE_CONFIGS = {
    "none": VerticalConfig(lam=1e-2, iterations=5, seed=1),
    "sound": VerticalConfig(
        mechanism="sound",
        noise_multiplier=2.0,
        delta=1e-5,
        seed=3,
        iterations=4,
        accountant="rdp",
        passive_weighting=False,
    ),
    "sound-weighted": VerticalConfig(
        mechanism="sound",
        noise_multiplier=2.0,
        delta=1e-5,
        seed=5,
        iterations=4,
        accountant="rdp",
    ),
    "sound-protected": VerticalConfig(
        mechanism="sound",
        noise_multiplier=2.0,
        delta=1e-5,
        seed=4,
        iterations=4,
        accountant="rdp",
        protect_label_holder=True,
    ),
}


def _drive(roles: dict, queue, stop_after: int | None = None) -> list:
    """Deliver in FIFO order (like InProcessEngine); stop after ``stop_after`` deliveries
    and return the messages still in flight."""
    queue = deque(queue)
    delivered = 0
    while queue and (stop_after is None or delivered < stop_after):
        message = queue.popleft()
        queue.extend(roles[message.recipient].handle(message))
        delivered += 1
    return list(queue)


def _final(roles) -> dict[str, np.ndarray]:
    out = {r.name: r.role.model for r in roles}
    holder = roles[0].role
    return out | {"z": holder.z, "dual": holder.dual, "residual": holder.residual}


# per round of 3 parties: 2 broadcasts, 2 shares, 2 scores, 1 report; the start is 2 broadcasts
@pytest.mark.parametrize("stop", [1, 5, 7, 16])
@pytest.mark.parametrize("mechanism", list(STATE_CONFIGS))
def test_restored_roles_continue_bit_for_bit(tmp_path, mechanism, stop):
    config = STATE_CONFIGS[mechanism]
    blocks, y, test_blocks, y_test = _problem(True)

    whole = _roles(config, blocks, y, test_blocks, y_test)
    reference = _run(whole)

    first = _roles(config, blocks, y, test_blocks, y_test)
    collector = Collector()
    in_flight = _drive({r.name: r for r in [*first, collector]}, first[0].start(), stop)
    assert in_flight, "the run must be interrupted before its end"
    metas = {}
    for role in first:
        arrays, meta = role.state_dict()
        save_checkpoint(tmp_path / f"{role.name}.npz", arrays, meta)
        metas[role.name] = meta
    if stop == 5:  # mid-round: the label holder holds shares and scores
        assert set(metas["label"]["shares"]) == {"bank", "shop"}
    del first

    fresh = _roles(config, blocks, y, test_blocks, y_test)
    for role in fresh:
        role.load_state_dict(*load_checkpoint(tmp_path / f"{role.name}.npz"))
    assert _drive({r.name: r for r in [*fresh, collector]}, in_flight) == []

    expected, found = _final(whole), _final(fresh)
    for key, value in expected.items():
        assert np.array_equal(found[key], value), key
    assert [r.entry() for r in collector.reports] == [r.entry() for r in reference.reports]
    for a, b in zip(whole, fresh, strict=True):
        assert a.role.events == b.role.events
        assert a.role.rng.bit_generator.state == b.role.rng.bit_generator.state
    if mechanism != "none":
        assert fresh[1].role.events  # the noise was really drawn


def test_a_restored_role_differs_from_a_fresh_one_without_its_state():
    """The check above has teeth: a restart without the noise state drifts apart."""
    config = STATE_CONFIGS["sound"]
    blocks, y, test_blocks, y_test = _problem(True)
    whole = _roles(config, blocks, y, test_blocks, y_test)
    _run(whole)

    first = _roles(config, blocks, y, test_blocks, y_test)
    collector = Collector()
    in_flight = _drive({r.name: r for r in [*first, collector]}, first[0].start(), 9)
    fresh = _roles(config, blocks, y, test_blocks, y_test)
    for old, new in zip(first, fresh, strict=True):
        arrays, meta = old.state_dict()
        meta = meta | {"rng": new.role.rng.bit_generator.state}  # forget the noise stream
        new.load_state_dict(arrays, meta)
    _drive({r.name: r for r in [*fresh, collector]}, in_flight)
    assert not np.array_equal(fresh[1].role.model, whole[1].role.model)


def test_a_checkpoint_of_the_wrong_shape_is_refused():
    blocks, y, _, _ = _problem(False)
    label, bank, _ = _roles(CONFIGS["none"], blocks, y)
    arrays, meta = bank.state_dict()
    with pytest.raises(ProtocolError, match="model"):
        bank.load_state_dict(arrays | {"model": np.zeros(5)}, meta)
    arrays, meta = label.state_dict()
    with pytest.raises(ProtocolError, match="z"):
        label.load_state_dict(arrays | {"z": np.zeros(3)}, meta)
