"""The droppable parties of a networked job and its submission deadline, as its leader
(:class:`~dpfed.runtime.leader.Leader`) handles them: a protocol that can do without some
parties (:meth:`~dpfed.runtime.registry.FederatedProtocol.dropouts`) has them opened and begun
as they come until the deadline; then a job missing more than ``tolerated`` of them is aborted,
otherwise the required parties are told to close the submissions
(:class:`~dpfed.runtime.control.CloseSubmissions`), and at the end each droppable party is
told to finish or to abort.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NoReturn

from dpfed._validation import DpfedInputError
from dpfed.runtime.control import AbortJob, BeginJob, CloseSubmissions, FinishJob, StatusRequest
from dpfed.runtime.leader_open import WAITING_EVERY, WAITING_FIRST
from dpfed.runtime.leader_progress import leader_log
from dpfed.runtime.leader_requests import POLL
from dpfed.runtime.registry import Dropouts
from dpfed.runtime.transport import RemoteError

if TYPE_CHECKING:  # the leader imports this module
    from dpfed.runtime.leader import Leader

__all__ = ["SubmissionDeadline"]


class SubmissionDeadline:
    """Lead the droppable parties of a job up to its submission deadline and after it.

    What is known of them is the leader's state (``dropouts``, ``droppable``, ``active``,
    ``deadline_passed``, ``dropped``, ``droppable_samples``, ``unfinished``), kept in its
    checkpoint. Requests go through the leader's ``_control``; closing the submissions through
    its ``_close_submissions``.

    Parameters
    ----------
    leader : Leader
        The leader of a job with droppable parties (``leader.dropouts`` is not ``None``).
    """

    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    def _dropouts(self) -> Dropouts:
        dropouts = self._leader.dropouts
        assert dropouts is not None
        return dropouts

    def gather(self) -> dict[str, dict[str, Any]]:
        """Open and begin the droppable parties as they come, in passes in name order, until
        the submission deadline (``deadline`` seconds from now) or until every required party
        has finished; return the descriptions of those opened.

        Meanwhile the required parties are polled as usual (unreachable beyond ``grace`` or a
        refused message stops the job) and the droppable ones for refused messages only. A
        droppable party that refuses the job is logged and left out. Resumed after the
        deadline had passed, nothing is opened again.
        """
        leader = self._leader
        dropouts = self._dropouts()
        infos: dict[str, dict[str, Any]] = {}
        if leader.deadline_passed:
            return infos
        begun: set[str] = set()
        refused: set[str] = set()
        watched: set[str] = set()  # begun droppable parties not known to be done
        finished: set[str] = set()  # droppable parties whose input is out
        unreachable: dict[str, float] = {}
        started = time.monotonic()
        end = started + dropouts.deadline
        next_word = started + WAITING_FIRST
        while True:
            waiting = [n for n in leader.droppable if n not in begun and n not in refused]
            for name in waiting:
                if time.monotonic() >= end:
                    break
                # a party that does not answer delays the deadline by 0.2 s at most
                timeout = max(0.2, min(2.0, end - time.monotonic()))
                try:
                    if name not in infos:
                        infos[name] = leader.opening.open(name, timeout=timeout)
                        leader.active.add(name)
                    leader._control(name, BeginJob, timeout=timeout)
                except RemoteError as exc:
                    if not exc.retryable:
                        refused.add(name)
                        leader_log(
                            f"{name} refused the job and is left out: {exc.details}",
                            logging.WARNING,
                        )
                    continue  # not serving yet: tried again in the next pass
                begun.add(name)
                watched.add(name)
            statuses = leader.requests.poll(unreachable, leader.required)
            self.watch(watched, finished)
            if len(statuses) == len(leader.required) and all(
                status["finished"] for status in statuses.values()
            ):
                break  # every input arrived before the deadline
            now = time.monotonic()
            if now >= end:
                break
            if now >= next_word:
                self._say_waiting(begun, end - now)
                next_word = now + WAITING_EVERY
            time.sleep(POLL)
        leader.droppable_samples = {n: int(info["n_samples"]) for n, info in infos.items()}
        leader.unfinished = sorted(begun - finished)
        return infos

    def _say_waiting(self, begun: set[str], left: float) -> None:
        """Log the droppable parties not ``begun`` yet, ``left`` seconds before the
        deadline (nothing if every one has begun)."""
        leader = self._leader
        missing = [n for n in leader.droppable if n not in begun]
        if missing:
            shown = ", ".join(f"{n} at {leader.spec.party(n).address}" for n in missing[:10])
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            leader_log(
                f"waiting for {len(missing)} of {len(leader.droppable)} droppable parties "
                f"({shown}{more}; not opened yet) until the submission deadline in "
                f"{left:.0f} s; at most {self._dropouts().tolerated} may be dropped"
            )

    def watch(self, watched: set[str], finished: set[str]) -> None:
        """Poll the droppable parties of ``watched`` for refused messages, best effort (an
        unreachable one is ignored); one that has finished joins ``finished``, and is no
        longer watched once it has nothing left to send."""
        leader = self._leader
        for name in sorted(watched):
            try:
                status = leader._control(name, StatusRequest, timeout=0.5)
            except RemoteError:
                continue
            links = status["links"].values()
            for link in links:
                if link["refused"]:
                    leader.requests.stop(f"party {name!r} reports: {link['refused']}")
            if status["finished"]:
                finished.add(name)
                if not any(link["pending"] for link in links):
                    watched.discard(name)

    def pass_deadline(self) -> set[str]:
        """The submission deadline has passed (or every required party finished before it):
        refuse the job if more droppable parties than tolerated were never opened; otherwise
        record the deadline in the checkpoint and tell the required parties that have not
        finished to close the submissions. Returns those still to be told (unreachable now).

        Raises
        ------
        DpfedInputError
            More droppable parties than tolerated were not in (:meth:`refuse`).
        """
        leader = self._leader
        dropouts = self._dropouts()
        if not leader.deadline_passed:
            missing = [n for n in leader.droppable if n not in leader.droppable_samples]
            if len(missing) > dropouts.tolerated:
                shown = ", ".join(missing[:10]) + (
                    f" and {len(missing) - 10} more" if len(missing) > 10 else ""
                )
                self.refuse(
                    f"{len(missing)} of {len(leader.droppable)} droppable parties were not in by "
                    f"the submission deadline of {dropouts.deadline:g} s ({shown}), but at "
                    f"most tolerated = {dropouts.tolerated} may be dropped"
                )
            with leader.lock:
                leader.deadline_passed = True
                leader.dropped = missing
                leader.checkpoints.save()
        closing = set(leader.required)
        statuses = leader.requests.poll({}, leader.required)
        closing -= {n for n, status in statuses.items() if status["finished"]}
        if not closing:
            return closing
        leader_log(
            f"submission deadline of {dropouts.deadline:g} s passed: "
            + (f"dropping {', '.join(leader.dropped)} (never opened); " if leader.dropped else "")
            + (
                f"not finished when last asked: {', '.join(leader.unfinished)} (left out unless "
                "their input is in at the close); "
                if leader.unfinished
                else ""
            )
            + f"closing the submissions at {', '.join(sorted(closing))}"
        )
        leader._close_submissions(closing)
        return closing

    def close_submissions(self, closing: set[str]) -> None:
        """Send :class:`CloseSubmissions` to the parties of ``closing``; those that accept it
        leave the set, unreachable ones stay (tried again), a refusal refuses the job."""
        leader = self._leader
        for name in sorted(closing):
            try:
                leader._control(name, CloseSubmissions, timeout=min(2.0, leader.spec.grace))
            except RemoteError as exc:
                if exc.retryable:
                    continue
                self.refuse(f"{name} refused to close the submissions: {exc.details}")
            closing.discard(name)

    def refuse(self, why: str) -> NoReturn:
        """Abort a job that lost more droppable parties than it tolerates: the checkpoint
        records why (no resume), every reachable party is told to abort, and the run is
        refused.

        Raises
        ------
        DpfedInputError
            Always, naming ``why``.
        """
        leader = self._leader
        with leader.lock:
            leader.checkpoints.save(aborted=why)
        leader_log(f"job {leader.spec.id} aborted: {why}", logging.WARNING)
        leader.requests.broadcast(
            AbortJob, reason=why, names=[n for n in leader.spec.names if n in leader.active]
        )
        raise DpfedInputError(
            f"job {leader.spec.id} refused: {why}. Nothing was summed; the parties were told to "
            "abort (those that released nothing free their budget reservations)."
        )

    def end(self) -> None:
        """Best effort, a few seconds at most: a droppable party that has finished is told to
        finish, any other to abort (it missed the submission deadline); those not reached are
        logged (they stop after ``idle_timeout``)."""
        leader = self._leader

        def end_one(name: str) -> str | None:
            try:
                status = leader._control(name, StatusRequest, timeout=2.0)
                if status["finished"]:
                    leader._control(name, FinishJob, timeout=2.0)
                else:
                    leader._control(
                        name, AbortJob, timeout=2.0, reason=f"{name} missed the submission deadline"
                    )
            except RemoteError as exc:
                return f"{name} ({exc.code.name})"
            return None

        with ThreadPoolExecutor(max_workers=min(8, max(1, len(leader.droppable)))) as pool:
            missed = [m for m in pool.map(end_one, leader.droppable) if m is not None]
        if missed:
            leader_log(
                f"not reached at the end of the job: {', '.join(missed)}; they stop "
                f"after idle_timeout ({leader.spec.idle_timeout:g} s)"
            )
