"""A prediction by ID without a network: the recipient and two parties agree which rows to
score by private set intersection, then each scores its share of them."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed.protocols.psi_align.prediction import RowsById
from dpfed.runtime.messages import ProtocolError

pytest.importorskip("private_set_intersection.python")

PARTIES = ("label", "bank", "shop")


def _rows(held: dict[str, list[str]], *, training=frozenset(), recipient="label"):
    """Each party's side; its share of a row is the row's number times its weight."""
    weight = {"label": 1.0, "bank": 10.0, "shop": 100.0}

    def scorer(name):
        return lambda ids: np.array([weight[name] * int(i[1:]) for i in ids], dtype=float)

    return {
        name: RowsById(
            name,
            "p1",
            "new.csv",
            recipient,
            PARTIES,
            held[name],
            score=scorer(name),
            training_ids=frozenset(training),
        )
        for name in PARTIES
    }


def _run(roles) -> None:
    queue = [m for role in roles.values() for m in role.start()]
    while queue:
        message = queue.pop(0)
        queue += roles[message.recipient].handle(message)


def test_the_rows_every_party_holds_are_scored_in_the_recipients_order():
    held = {
        "label": [f"C{v}" for v in (7, 3, 9, 1, 5, 8)],
        "bank": [f"C{v}" for v in (1, 3, 5, 7, 9, 11)],  # lacks 8
        "shop": [f"C{v}" for v in (9, 8, 7, 5, 3, 2)],
    }  # lacks 1
    roles = _rows(held)
    _run(roles)
    assert all(role.finished and not role.refusal for role in roles.values())
    agreed = roles["label"].agreed
    assert sorted(agreed) == ["C3", "C5", "C7", "C9"]
    for role in roles.values():  # every party scores the same rows in the same order
        assert role.agreed == agreed
    total = sum(role.share().scores for role in roles.values())
    listing = roles["label"].listing()
    assert listing["ids"] == ["C7", "C3", "C9", "C5"]  # the label holder's file order
    np.testing.assert_array_equal(total[listing["order"]], [777.0, 333.0, 999.0, 555.0])
    assert listing["not_scored"] == {
        "rows": 2,
        "missing_at": {"bank": 1, "shop": 1},
        "ids": ["C1", "C8"],
    }
    assert not any(role.share().training.any() for role in roles.values())
    with pytest.raises(ProtocolError, match="not the recipient"):
        roles["bank"].listing()


def test_a_training_rows_id_is_flagged_at_every_party_and_another_prediction_refused():
    held = {name: ["C1", "C2", "C3"] for name in PARTIES}
    roles = _rows(held, training={"C2"})
    _run(roles)
    share = roles["shop"].share()
    assert share.training.sum() == 1
    assert share.training[roles["shop"].agreed.index("C2")]
    other = RowsById(
        "bank",
        "p2",
        "new.csv",
        "label",
        PARTIES,
        ["C1"],
        score=lambda ids: np.zeros(len(ids)),
        training_ids=frozenset(),
    )
    request = roles["label"].start()[0]
    with pytest.raises(ProtocolError, match="prediction 'p1'; this prediction is 'p2'"):
        other.handle(request)


def test_no_row_held_by_every_party_is_a_refusal_that_every_party_learns():
    held = {"label": ["C1", "C2"], "bank": ["C2", "C3"], "shop": ["C1", "C3"]}
    roles = _rows(held)
    _run(roles)
    for role in roles.values():
        assert role.finished
        assert role.refusal == "the parties' rows of 'new.csv' share no ID"
        with pytest.raises(ProtocolError, match="no agreed rows"):
            role.share()
