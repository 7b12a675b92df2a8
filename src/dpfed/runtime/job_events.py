"""What a leader tells whoever watches its job: its state, each party's status, the history of
round reports and the result.

The leader publishes these events on its :class:`JobEvents` and reads nothing back; a watcher
(the live page's :class:`~dpfed.runtime.monitor.JobView`, a test's recorder, a user's
dashboard) implements :class:`JobListener` and subscribes with
``leader.events.subscribe(listener)``. Every event carries only what the leader already holds
(public settings, status replies, round reports' entries, the written result), so a listener
learns nothing the leader does not.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["JobEvents", "JobListener"]

_log = logging.getLogger("dpfed.leader")


class JobListener(Protocol):
    """A watcher of a job. Its methods are called from the leader's threads, one event at a
    time, and must return quickly (copy what is needed; do the slow work elsewhere)."""

    def on_state(self, state: str, message: str | None = None) -> None:
        """The job's state: ``opening``, ``running``, ``finished``, ``stopped`` or ``failed``,
        with the reason of a stop or failure."""
        ...

    def on_party(self, name: str, status: str, reply: dict[str, Any] | None = None) -> None:
        """Party ``name``'s status (``waiting``, ``serving``, ``unreachable``, ``finished``)
        and its last status reply (its round, whether it finished, this job's epsilon on its
        budget), if any."""
        ...

    def on_history(self, history: list[dict[str, Any]]) -> None:
        """The round reports' history entries so far (it only grows, one entry per report;
        the whole history is passed, so a late subscriber catches up)."""
        ...

    def on_result(self, result: dict[str, Any]) -> None:
        """The result as written to the job's ``result.json``."""
        ...


class JobEvents:
    """A leader's events and their subscribers.

    A listener that raises is unsubscribed and the error logged: watching a job never stops
    it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[JobListener] = []
        self._history: list[dict[str, Any]] = []

    @property
    def watched(self) -> bool:
        """Whether anyone is subscribed (the leader then polls the parties' status during
        rounds too, so that watchers see every party's round and spending)."""
        with self._lock:
            return bool(self._listeners)

    def subscribe(self, listener: JobListener) -> Callable[[], None]:
        """Send ``listener`` every event from now on, starting with the history so far;
        return the function that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)
            history = list(self._history)
        if history:
            self._send(listener, "on_history", history)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def state(self, state: str, message: str | None = None) -> None:
        """Publish the job's state (:meth:`JobListener.on_state`)."""
        self._publish("on_state", state, message)

    def party(self, name: str, status: str, reply: dict[str, Any] | None = None) -> None:
        """Publish party ``name``'s status (:meth:`JobListener.on_party`)."""
        self._publish("on_party", name, status, reply)

    def history(self, history: list[dict[str, Any]]) -> None:
        """Publish the history of round reports so far (:meth:`JobListener.on_history`)."""
        with self._lock:
            self._history = list(history)
        self._publish("on_history", list(history))

    def result(self, result: dict[str, Any]) -> None:
        """Publish the written result (:meth:`JobListener.on_result`)."""
        self._publish("on_result", result)

    def _publish(self, event: str, *args: Any) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            self._send(listener, event, *args)

    def _send(self, listener: JobListener, event: str, *args: Any) -> None:
        try:
            getattr(listener, event)(*args)
        except Exception:
            _log.exception("a watcher of the job failed on %s and was unsubscribed", event)
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)
