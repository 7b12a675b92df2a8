"""The leader's events: subscribers get every event from when they subscribe, a late one
catches up with the history, and a failing one is dropped without stopping the job."""

from __future__ import annotations

import logging

from dpfed.runtime.job_events import JobEvents, JobListener
from dpfed.runtime.monitor import JobView


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def on_state(self, state, message=None):
        self.seen.append(("state", state, message))

    def on_party(self, name, status, reply=None):
        self.seen.append(("party", name, status, reply))

    def on_history(self, history):
        self.seen.append(("history", len(history)))

    def on_result(self, result):
        self.seen.append(("result", result))


def test_subscribers_get_every_event_in_order_until_they_unsubscribe():
    events = JobEvents()
    assert not events.watched
    first = Recorder()
    unsubscribe = events.subscribe(first)
    assert events.watched
    events.state("running")
    events.party("bank", "serving", {"round": 1})
    events.history([{"iteration": 1}])
    unsubscribe()
    events.result({"final": {}})
    assert first.seen == [
        ("state", "running", None),
        ("party", "bank", "serving", {"round": 1}),
        ("history", 1),
    ]
    assert not events.watched


def test_a_late_subscriber_catches_up_with_the_history():
    events = JobEvents()
    events.history([{"iteration": 1}, {"iteration": 2}])
    late = Recorder()
    events.subscribe(late)
    events.history([{"iteration": 1}, {"iteration": 2}, {"iteration": 3}])
    assert late.seen == [("history", 2), ("history", 3)]


def test_a_failing_subscriber_is_dropped_and_logged_and_the_others_still_hear(caplog):
    class Broken(Recorder):
        def on_state(self, state, message=None):
            raise RuntimeError("a dashboard bug")

    events = JobEvents()
    broken, fine = Broken(), Recorder()
    events.subscribe(broken)
    events.subscribe(fine)
    with caplog.at_level(logging.ERROR, logger="dpfed.leader"):
        events.state("running")
        events.state("finished")
    assert "on_state" in caplog.text and "a dashboard bug" in caplog.text
    assert fine.seen == [("state", "running", None), ("state", "finished", None)]
    assert broken.seen == []
    assert caplog.text.count("unsubscribed") == 1


def test_the_live_page_view_is_a_listener():
    view: JobListener = JobView.__new__(JobView)  # the structural type, checked by mypy too
    for member in ("on_state", "on_party", "on_history", "on_result"):
        assert callable(getattr(view, member))
