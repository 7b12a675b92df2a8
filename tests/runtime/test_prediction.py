"""The pieces of a networked prediction: shares, the recipient's collector, prediction ids."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.runtime import wire
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.prediction import (
    PredictionCollector,
    PredictionShare,
    check_request_id,
    new_request_id,
    share_messages,
    write_predictions,
)

PARTIES = ["label", "bank", "shop"]


def _shares(scores: dict[str, np.ndarray], max_bytes: int = 64 * 2**20):
    return [m for name, s in scores.items()
            for m in share_messages(name, "label", "p1", s, max_bytes=max_bytes)]


def test_shares_cut_into_blocks_cover_every_row_once_and_survive_the_wire():
    scores = np.random.default_rng(0).normal(size=1000)
    messages = share_messages("bank", "label", "p1", scores, max_bytes=32 * 100)
    assert [m.first for m in messages] == list(range(0, 1000, 100))
    assert all(m.n_rows == 1000 for m in messages)
    np.testing.assert_array_equal(np.concatenate([m.scores for m in messages]), scores)
    frame = wire.encode(messages[3], job="j", seq=0)
    back = wire.decode(frame, job="j").message
    assert isinstance(back, PredictionShare)
    np.testing.assert_array_equal(back.scores, scores[300:400])
    # no rows still makes one (empty) share, so the recipient learns the count
    assert len(share_messages("bank", "label", "p1", np.zeros(0), max_bytes=1024)) == 1


def test_the_collector_adds_every_partys_share_in_job_order():
    rng = np.random.default_rng(1)
    scores = {name: rng.normal(size=257) for name in PARTIES}
    collector = PredictionCollector("p1", "rows.npy", PARTIES)
    messages = _shares(scores, max_bytes=32 * 50)
    for m in reversed(messages):  # arrival order does not matter
        assert not collector.complete
        collector.add(m)
    assert collector.complete
    want = np.zeros(257)
    for name in PARTIES:
        want += scores[name]
    np.testing.assert_array_equal(collector.total(), want)
    assert collector.received() == dict.fromkeys(PARTIES, 257)
    collector.add(messages[0])  # a faithful repeat changes nothing
    np.testing.assert_array_equal(collector.total(), want)


def test_the_collector_refuses_what_does_not_fit():
    collector = PredictionCollector("p1", "rows.npy", PARTIES)
    collector.add(PredictionShare("bank", "label", 0, "p1", 0, 10, np.ones(5)))
    with pytest.raises(DpfedInputError, match="another party 10"):
        collector.add(PredictionShare("shop", "label", 0, "p1", 0, 11, np.ones(11)))
    with pytest.raises(DpfedInputError, match=r"rows \[8, 13\)"):
        collector.add(PredictionShare("shop", "label", 0, "p1", 8, 10, np.ones(5)))
    with pytest.raises(DpfedInputError, match="other scores"):
        collector.add(PredictionShare("bank", "label", 0, "p1", 0, 10, np.zeros(5)))
    with pytest.raises(DpfedInputError, match="not a party"):
        collector.add(PredictionShare("mallory", "label", 0, "p1", 0, 10, np.ones(10)))
    with pytest.raises(DpfedInputError, match="prediction 'p2'"):
        collector.add(PredictionShare("shop", "label", 0, "p2", 0, 10, np.ones(10)))
    assert not collector.complete
    with pytest.raises(DpfedInputError, match="not complete"):
        collector.total()


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "x" * 65, "a b"])
def test_a_prediction_id_must_name_a_plain_file(bad):
    with pytest.raises(DpfedInputError, match="prediction id"):
        check_request_id(bad)


def test_fresh_prediction_ids_are_valid_and_distinct():
    ids = {new_request_id() for _ in range(20)}
    assert len(ids) == 20
    assert all(check_request_id(i) == i for i in ids)


def test_the_recipients_scores_are_owner_only_whatever_the_umask(netjob, tmp_path):
    job = netjob([(name, "breast_cancer", (10 * k, 10 * k + 10))
                  for k, name in enumerate(PARTIES)], params={"iterations": 2})
    spec = load_job(job.config)
    collector = PredictionCollector("p1", "rows.npy", PARTIES)
    for m in _shares({name: np.full(10, 0.5) for name in PARTIES}):
        collector.add(m)
    path = tmp_path / "work" / "label" / "job" / "predictions" / "p1.json"
    old = os.umask(0)
    try:
        write_predictions(path, spec, collector, "label")
    finally:
        os.umask(old)
    for folder in (path.parent, path.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
