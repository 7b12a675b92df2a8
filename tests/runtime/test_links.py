"""Exactly-once numbering of the links between processes (no thread, no network)."""

from __future__ import annotations

import json

import grpc
import pytest

from dpfed.runtime.links import InboundLinks, OutboundLink
from dpfed.runtime.transport import Refused


def _handle(links: InboundLinks, sender: str, seq: int, digest: str) -> bool:
    """What a recipient does: check, and mark once handled."""
    new = links.is_new(sender, seq, digest)
    if new:
        links.mark(sender, seq, digest)
    return new


# -- InboundLinks ----------------------------------------------------------------------------
def test_messages_in_order_are_new():
    links = InboundLinks()
    assert links.last("bank") == 0
    for seq in (1, 2, 3):
        assert _handle(links, "bank", seq, f"d{seq}") is True
    assert links.last("bank") == 3
    assert links.last("shop") == 0


def test_faithful_repeat_is_not_new_and_changes_nothing():
    links = InboundLinks()
    for seq in (1, 2, 3):
        _handle(links, "bank", seq, f"d{seq}")
    before = links.state()
    for seq in (1, 2, 3, 3):
        assert links.is_new("bank", seq, f"d{seq}") is False
    assert links.state() == before
    assert links.is_new("bank", 4, "d4") is True  # the next one is still new


def _refusal(links, sender, seq, digest) -> Refused:
    with pytest.raises(Refused) as info:
        links.is_new(sender, seq, digest)
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    return info.value


def test_repeat_with_other_content_is_refused():
    links = InboundLinks()
    _handle(links, "bank", 1, "d1")
    _handle(links, "bank", 2, "d2")
    error = _refusal(links, "bank", 1, "forged")
    assert "message 1 from bank" in str(error)
    assert "different content" in str(error)
    _refusal(links, "bank", 2, "d1")  # a digest of another number is no excuse
    assert links.state() == {"bank": ["d1", "d2"]}


@pytest.mark.parametrize("seq", [2, 5, 0, -1])
def test_gaps_and_impossible_numbers_are_refused(seq):
    links = InboundLinks()
    error = _refusal(links, "bank", seq, "d")
    assert "expected 1" in str(error)
    assert links.state() == {}


def test_gap_after_some_messages_names_the_expected_number():
    links = InboundLinks()
    _handle(links, "bank", 1, "d1")
    assert "expected 2" in str(_refusal(links, "bank", 3, "d3"))


def test_senders_are_numbered_independently():
    links = InboundLinks()
    _handle(links, "bank", 1, "same")
    assert links.is_new("shop", 1, "same") is True
    _refusal(links, "shop", 2, "x")
    _handle(links, "shop", 1, "same")
    assert links.state() == {"bank": ["same"], "shop": ["same"]}


def test_mark_out_of_order_is_a_programming_error():
    links = InboundLinks()
    with pytest.raises(RuntimeError, match="out of order"):
        links.mark("bank", 2, "d2")
    links.mark("bank", 1, "d1")
    with pytest.raises(RuntimeError, match="out of order"):
        links.mark("bank", 1, "d1")


def test_inbound_state_round_trips_through_json():
    links = InboundLinks()
    for seq in (1, 2):
        _handle(links, "bank", seq, f"b{seq}")
    _handle(links, "label", 1, "l1")
    state = json.loads(json.dumps(links.state()))

    restored = InboundLinks()
    restored.load(state)
    assert restored.state() == links.state()
    assert restored.last("bank") == 2
    assert restored.is_new("bank", 2, "b2") is False
    assert restored.is_new("bank", 3, "b3") is True
    _refusal(restored, "bank", 1, "forged")
    _refusal(restored, "label", 3, "l3")


def test_inbound_state_is_a_copy_both_ways():
    links = InboundLinks()
    _handle(links, "bank", 1, "d1")
    state = links.state()
    state["bank"].append("smuggled")
    assert links.last("bank") == 1

    restored = InboundLinks()
    restored.load(state)
    state["bank"].append("later")
    assert restored.last("bank") == 2


# -- OutboundLink (numbering, queue and state only; its thread is never started) -------------
class DummyConnection:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = 0

    def close(self) -> None:
        self.closed += 1

    def deliver(self, payload, *, timeout):  # pragma: no cover - the thread never runs
        raise AssertionError("no delivery expected")


def _link(name: str = "bank") -> OutboundLink:
    return OutboundLink(DummyConnection(name), call_timeout=1.0)


def test_new_link_is_idle_and_numbers_from_one():
    link = _link()
    assert link.peer == "bank"
    assert link.idle()
    assert link.pending() == []
    assert link.state() == {"next_seq": 1}
    assert link.status() == {"pending": 0, "unreachable_for": None, "refused": None}
    assert [link.reserve() for _ in range(3)] == [1, 2, 3]
    assert link.state() == {"next_seq": 4}


def test_push_queues_in_order():
    link = _link()
    for payload in (b"a", b"b", b"c"):
        link.push(link.reserve(), payload)
    assert link.pending() == [(1, b"a"), (2, b"b"), (3, b"c")]
    assert not link.idle()
    assert link.status()["pending"] == 3
    link.pending().clear()  # a copy
    assert len(link.pending()) == 3


def test_outbound_state_and_queue_restore_in_a_new_link():
    link = _link()
    for payload in (b"one", b"two", b"three", b"four"):
        link.push(link.reserve(), payload)
    link.queue.popleft()  # message 1 was acknowledged
    state = json.loads(json.dumps(link.state()))
    pending = link.pending()

    restored = _link()
    restored.load(state, list(reversed(pending)))  # restored in number order
    assert restored.pending() == [(2, b"two"), (3, b"three"), (4, b"four")]
    assert restored.state() == {"next_seq": 5}
    assert restored.reserve() == 5
    restored.push(5, b"five")
    assert restored.pending()[-1] == (5, b"five")
    assert restored.status()["pending"] == 4


def test_loading_an_empty_queue_leaves_the_link_idle():
    link = _link()
    link.push(link.reserve(), b"stale")
    link.load({"next_seq": 7}, [])
    assert link.idle()
    assert link.reserve() == 7


def test_stop_without_start_closes_the_connection():
    link = _link()
    link.stop(timeout=0.1)
    assert link.connection.closed == 1
