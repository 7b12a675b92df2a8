"""The pieces of a networked prediction: shares, the recipient's collector, prediction ids."""

from __future__ import annotations

import json
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
    training_rows_disclosure,
    write_predictions,
)

PARTIES = ["label", "bank", "shop"]


def _shares(scores: dict[str, np.ndarray], max_bytes: int = 64 * 2**20):
    return [
        m
        for name, s in scores.items()
        for m in share_messages(name, "label", "p1", s, max_bytes=max_bytes)
    ]


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
    with pytest.raises(DpfedInputError, match="11 training rows among the 10 rows"):
        collector.add(PredictionShare("shop", "label", 0, "p1", 0, 10, np.ones(10), 11))
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


def _complete(training: dict[str, int], n_rows: int = 10) -> PredictionCollector:
    collector = PredictionCollector("p1", "rows.npy", PARTIES)
    for name in PARTIES:
        for m in share_messages(
            name,
            "label",
            "p1",
            np.full(n_rows, 0.5),
            max_bytes=32 * 4,
            training_rows=training.get(name, 0),
        ):
            collector.add(m)
    return collector


def test_the_collector_keeps_each_partys_count_of_training_rows():
    collector = _complete({"bank": 3})
    assert collector.complete and collector.training == {"label": 0, "bank": 3, "shop": 0}
    with pytest.raises(DpfedInputError, match="other counts of its training rows"):
        collector.add(PredictionShare("bank", "label", 0, "p1", 0, 10, np.full(4, 0.5), 2))
    section = training_rows_disclosure(collector.training, 10, ["scores"])
    assert section is not None
    assert section["training_rows"] == {"bank": 3} and section["left_parties"] is True
    assert section["figures"] == ["scores"]
    assert "[job].predict_training_rows = true" in section["note"]
    assert "bank's share of 3 of its training rows" in section["note"]
    assert training_rows_disclosure({"label": 0, "bank": 0}, 10, ["scores"]) is None


def test_the_recipients_scores_are_owner_only_whatever_the_umask(netjob, tmp_path):
    job = netjob(
        [(name, "breast_cancer", (10 * k, 10 * k + 10)) for k, name in enumerate(PARTIES)],
        params={"iterations": 2},
    )
    spec = load_job(job.config)
    path = tmp_path / "work" / "label" / "job" / "predictions" / "p1.json"
    old = os.umask(0)
    try:
        receipt = write_predictions(path, spec, _complete({"bank": 3}), "label")
    finally:
        os.umask(old)
    for folder in (path.parent, path.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert receipt["figures"] == ["scores", "probability"]
    written = json.loads(path.read_text())
    assert next(iter(written)) == "exact_values"  # flagged at the top of the file
    assert written["exact_values"]["training_rows"] == {"bank": 3}
    assert written["scores"] == [1.5] * 10
    # new rows only: nothing to flag
    write_predictions(path, spec, _complete({}), "label")
    assert "exact_values" not in json.loads(path.read_text())


def test_scores_by_id_are_written_in_the_listings_order_beside_their_ids(netjob, tmp_path):
    job = netjob(
        [(name, "breast_cancer", (10 * k, 10 * k + 10)) for k, name in enumerate(PARTIES)],
        params={"iterations": 2},
    )
    spec = load_job(job.config)
    collector = PredictionCollector("p1", "new.csv", PARTIES)
    for m in _shares({name: np.arange(3.0) for name in PARTIES}):
        collector.add(m)
    path = tmp_path / "p1.json"
    listing = {
        "order": [2, 0, 1],
        "ids": ["C3", "C1", "C2"],
        "not_scored": {"rows": 1, "missing_at": {"bank": 1}, "ids": ["C9"]},
    }
    write_predictions(path, spec, collector, "label", listing)
    written = json.loads(path.read_text())
    assert written["ids"] == ["C3", "C1", "C2"]
    assert written["scores"] == [6.0, 0.0, 3.0]
    assert written["not_scored"]["ids"] == ["C9"]
    with pytest.raises(DpfedInputError, match="does not order the rows"):
        write_predictions(path, spec, collector, "label", {**listing, "order": [0, 0, 1]})
