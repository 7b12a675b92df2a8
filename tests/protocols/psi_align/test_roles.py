"""The alignment job's roles without a network: the label holder and two parties pass
their messages by hand."""

from __future__ import annotations

import pytest

from dpfed.data.psi import alignment_digest, new_psi_key, order_key
from dpfed.protocols.psi_align import AlignmentHolder, AlignmentSeeker, PsiOrder
from dpfed.protocols.psi_align.roles import column_hashes
from dpfed.runtime.messages import ProtocolError

pytest.importorskip("private_set_intersection.python")


def _ids(prefix: str, values) -> list[str]:
    return [f"{prefix}{v:05d}" for v in values]


def _parties(*, min_rows: int = 1, bank_columns=("balance",), keys=None):
    keys = keys or {n: new_psi_key() for n in ("label", "bank", "shop")}
    label = AlignmentSeeker(
        "label",
        ["bank", "shop"],
        {"train": _ids("C", range(0, 100)), "test": _ids("T", range(10))},
        width=3,
        columns=column_hashes("j", ["age", "income"]),
        psi_key=keys["label"],
        order_key=keys.get("order", order_key()),
        min_rows=min_rows,
    )
    bank = AlignmentHolder(
        "bank",
        "label",
        {"train": _ids("C", range(20, 130)), "test": _ids("T", range(5, 12))},
        width=4,
        columns=column_hashes("j", list(bank_columns)),
        psi_key=keys["bank"],
    )
    shop = AlignmentHolder(
        "shop",
        "label",
        {"train": _ids("C", range(10, 90, 1)), "test": _ids("T", range(10))},
        width=2,
        columns=column_hashes("j", ["basket"]),
        psi_key=keys["shop"],
    )
    return label, {"bank": bank, "shop": shop}


def _run(label, holders) -> list:
    """Deliver every message until none is left; returns every message sent."""
    queue, sent = list(label.start()), []
    while queue:
        message = queue.pop(0)
        sent.append(message)
        target = label if message.recipient == "label" else holders[message.recipient]
        queue += target.handle(message)
    return sent


def test_every_party_keeps_the_rows_all_hold_in_one_agreed_order():
    label, holders = _parties()
    _run(label, holders)
    shared = sorted(set(_ids("C", range(20, 90))))
    assert sorted(label.orders["train"]) == shared
    assert label.orders["train"] != shared  # an HMAC order, not the IDs' own
    for holder in holders.values():
        assert holder.finished
        assert holder.orders == label.orders
        assert holder.widths == [3, 4, 2]
        assert holder.digests["train"] == alignment_digest(label.orders["train"])
    assert sorted(label.orders["test"]) == _ids("T", range(5, 10))


def test_orders_carry_tags_not_ids():
    label, holders = _parties()
    sent = _run(label, holders)
    orders = [m for m in sent if isinstance(m, PsiOrder)]
    assert len(orders) == 4  # train and test, to each party
    raw = b"".join(m.tags.tobytes() for m in orders)
    assert b"C000" not in raw and b"T000" not in raw


def test_the_same_keys_send_the_same_bytes_again():
    """What a restarted party needs: its kept keys make every message identical."""
    keys = {n: new_psi_key() for n in ("label", "bank", "shop")} | {"order": order_key()}
    first = _run(*_parties(keys=keys))
    again = _run(*_parties(keys=keys))
    for a, b in zip(first, again, strict=True):
        assert type(a) is type(b)
        for field in vars(a):
            va, vb = getattr(a, field), getattr(b, field)
            assert (va == vb).all() if hasattr(va, "shape") else va == vb, field


def test_a_snapshot_midway_restores_the_answers_taken():
    keys = {n: new_psi_key() for n in ("label", "bank", "shop")} | {"order": order_key()}
    label, holders = _parties(keys=keys)
    queue = list(label.start())
    answers = [holders[m.recipient].handle(m)[0] for m in queue]
    label.handle(answers[0])
    arrays, meta = label.state_dict()
    restored, _ = _parties(keys=keys)  # a restarted party reads its kept keys
    restored.load_state_dict(arrays, meta)
    out = [m for a in answers[1:] for m in restored.handle(a)]
    assert restored.finished and len(out) == 4
    assert sorted(restored.orders["train"]) == sorted(set(_ids("C", range(20, 90))))


def test_too_few_rows_or_a_column_declared_twice_is_refused_to_everyone():
    label, holders = _parties(min_rows=1000)
    _run(label, holders)
    assert "fewer than [job].min_rows = 1000" in label.refusal
    assert all(h.refusal == label.refusal and h.orders["train"] == [] for h in holders.values())
    label, holders = _parties(bank_columns=("income",))
    _run(label, holders)
    assert "both declare a column of the same name" in label.refusal


def test_a_message_out_of_place_is_refused():
    label, holders = _parties()
    request = label.start()[0]
    with pytest.raises(ProtocolError, match="takes PSI answers"):
        label.handle(request)
    answer = holders["bank"].handle(request)[0]
    label.handle(answer)
    with pytest.raises(ProtocolError, match="unexpected answer"):
        label.handle(answer)
