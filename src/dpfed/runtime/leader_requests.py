"""The control requests a networked job's leader (:class:`~dpfed.runtime.leader.Leader`) sends
its parties once the job is open: read-only queries tried again within the grace period, the
status polls that stop the job when a party is gone or refused a message, messages to every
party (abort, suspend), and the stop itself (:class:`JobStopped`, resumable).

Every request goes through the leader's :meth:`~dpfed.runtime.leader.Leader._control` (a
subclass may watch or replace it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn

import grpc

from dpfed.runtime.control import AbortJob, ControlRequest, StatusRequest, SuspendJob
from dpfed.runtime.transport import RemoteError

if TYPE_CHECKING:  # the leader imports this module
    from dpfed.runtime.leader import Leader

__all__ = ["POLL", "JobStopped", "PartyRequests"]

#: Seconds between two polls of the parties (and between two looks at the round reports).
POLL = 0.25


class JobStopped(RuntimeError):
    """The job stopped (a party is gone, refused, or too slow); it can be resumed."""


class PartyRequests:
    """The leader's requests to the parties of its job.

    Parameters
    ----------
    leader : Leader
        The leader whose ``_control`` sends every request; its ``spec`` (``grace``), ``events``,
        ``active`` parties and ``history`` are read when used.
    """

    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    def query(self, name: str, op: type[ControlRequest], **fields: Any) -> dict[str, Any]:
        """A read-only request to party ``name``, tried again while the party is unreachable
        for up to ``grace`` seconds (then the job stops, resumable).

        A party that came back within the grace period may still be unknown to this process's
        channel, which fails calls at once until it has reconnected.

        Raises
        ------
        RemoteError
            The party refused the request (not tried again).
        JobStopped
            The party did not answer within ``grace``.
        """
        since = time.monotonic()
        while True:
            try:
                return self._leader._control(name, op, **fields)
            except RemoteError as exc:
                if not exc.retryable:
                    raise
                waited = time.monotonic() - since
                grace = self._leader.spec.grace
                if waited > grace:
                    self.stop(
                        f"party {name!r} did not answer {op.__name__} "
                        f"(for {waited:.1f} s; grace {grace:g} s): "
                        f"{exc.details}"
                    )
                time.sleep(0.2)

    def broadcast(
        self,
        op: type[ControlRequest],
        *,
        retry_for: float = 0.0,
        names: Iterable[str] | None = None,
        **fields: Any,
    ) -> None:
        """Send ``op`` to every party of ``names`` (default: all) that answers; a party that
        is not serving yet is tried again for ``retry_for`` seconds, then left alone."""
        deadline = time.monotonic() + retry_for
        pending = list(self._leader.spec.names if names is None else names)
        while pending:
            later = []
            for name in pending:
                try:
                    self._leader._control(name, op, timeout=2.0, **fields)
                except RemoteError as exc:
                    if exc.code == grpc.StatusCode.UNAVAILABLE:
                        later.append(name)
            if not later or time.monotonic() >= deadline:
                return
            pending = later
            time.sleep(0.2)

    def abort_all(self, reason: str, *, retry_for: float) -> None:
        """Tell every party the job will not run: the required ones are tried for
        ``retry_for`` seconds while not serving, the droppable ones once."""
        self.broadcast(AbortJob, reason=reason, retry_for=retry_for, names=self._leader.required)
        self.broadcast(AbortJob, reason=reason, names=self._leader.droppable)

    def poll(
        self,
        unreachable: dict[str, float],
        names: list[str] | None = None,
        *,
        on_refused: Callable[[str], NoReturn] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """The status of every party of ``names`` (default: all) that answers; stops the job
        when one is unreachable for longer than ``grace``, or when one refused a message
        (``on_refused(why)``, default :meth:`stop`).

        ``unreachable`` maps each party unreachable so far to the time it was first found so;
        it is updated.
        """
        leader = self._leader
        spec = leader.spec
        now = time.monotonic()
        statuses: dict[str, dict[str, Any]] = {}
        for name in spec.names if names is None else names:
            try:
                status = leader._control(name, StatusRequest, timeout=min(2.0, spec.grace))
            except RemoteError as exc:
                if not exc.retryable:
                    self.stop(f"party {name!r} failed: {exc.details}")
                leader.events.party(name, "unreachable")
                since = unreachable.setdefault(name, now)
                if now - since > spec.grace:
                    self.stop(
                        f"party {name!r} is unreachable (for {now - since:.1f} s; grace "
                        f"{spec.grace:g} s)"
                    )
                continue
            unreachable.pop(name, None)
            statuses[name] = status
            leader.events.party(name, "finished" if status["finished"] else "serving", status)
            for link in status["links"].values():
                if link["refused"]:
                    (on_refused or self.stop)(f"party {name!r} reports: {link['refused']}")
        return statuses

    def rounds(self, names: list[str] | None = None) -> str:
        """Where every party of ``names`` (default: all) is, for a message: ``"bank at round
        3, shop unreachable"``."""
        parts = []
        for name in self._leader.spec.names if names is None else names:
            try:
                status = self._leader._control(name, StatusRequest, timeout=1.0)
                parts.append(f"{name} at round {status['round']}")
            except RemoteError:
                parts.append(f"{name} unreachable")
        return ", ".join(parts)

    def stop(self, why: str) -> NoReturn:
        """Stop the job: every active party is told to suspend it (best effort).

        Raises
        ------
        JobStopped
            Always, naming ``why``, the round, the checkpoint and the command that resumes.
        """
        leader = self._leader
        self.broadcast(
            SuspendJob, reason=why, names=[n for n in leader.spec.names if n in leader.active]
        )
        raise JobStopped(
            f"job {leader.spec.id} stopped in round {len(leader.history) + 1}: {why}. "
            f"Checkpoint: {leader.checkpoint_path}. Once every party serves again, continue with "
            f"`{leader.resume_command()}`."
        )
