"""How a networked job's leader (:class:`~dpfed.runtime.leader.Leader`) follows the rounds once
the job has begun: it shows the label holder's round reports as they come while it polls every
party, or, for a protocol without round reports, polls until every party has finished; a party
gone for longer than the grace period, a refused message or a round slower than the round
timeout stops the job.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from dpfed.runtime.leader_progress import leader_log
from dpfed.runtime.leader_requests import POLL
from dpfed.runtime.registry import ReportOfRound

if TYPE_CHECKING:  # the leader imports this module
    from dpfed.runtime.leader import Leader

__all__ = ["MONITOR_POLL", "RoundFollower"]

#: With a job page, how often the parties are polled while round reports keep coming (s).
MONITOR_POLL = 2.0


class RoundFollower:
    """Follow a leader's job from its beginning until every required party has finished.

    Parameters
    ----------
    leader : Leader
        The leader whose job is followed (its ``spec``, ``protocol``, ``required`` parties,
        ``reports`` queue and ``history``, read when used).
    """

    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    def follow_to_the_end(self, closing: set[str]) -> None:
        """Follow the job until every required party has finished: through the round
        reports first if the protocol sends them; otherwise by status alone, closing the
        submissions at the parties of ``closing`` once the submission deadline has passed.
        """
        leader = self._leader
        if leader.protocol.report is not None:
            self.follow()
            # the last report can reach the leader before the last messages reach every
            # party (a restarted party's link is still retrying): wait until all finished
            self.follow_status(leader.required)
        else:
            self.follow_status(leader.required, closing if leader.deadline_passed else None)

    def follow(self) -> None:
        """Show the round reports as they come until the last one, polling every party
        meanwhile (every :data:`MONITOR_POLL` seconds with a job page while reports keep
        coming).

        Raises
        ------
        JobStopped
            A party is gone or refused a message, or a round took longer than
            ``round_timeout``.
        """
        leader = self._leader
        bar = leader.display.bar()
        if bar is not None:
            bar.update(len(leader.history))
        unreachable: dict[str, float] = {}
        last_progress = time.monotonic()
        last_poll = 0.0
        try:
            while not leader.protocol_done:
                report: ReportOfRound | None
                try:
                    report = leader.reports.get(timeout=POLL)
                except queue.Empty:
                    report = None
                now = time.monotonic()
                if report is not None:
                    last_progress = now
                    leader.display.show(report, bar)
                    if not leader.events.watched or now - last_poll < MONITOR_POLL:
                        continue
                    # the page shows every party's round and spending as the job goes
                if now - last_poll >= POLL:
                    last_poll = now
                    leader.requests.poll(unreachable)
                if now - last_progress > leader.spec.round_timeout:
                    leader.requests.stop(
                        f"round {len(leader.history) + 1} did not finish within "
                        f"{leader.spec.round_timeout:g} s (parties: {leader.requests.rounds()})"
                    )
        finally:
            if bar is not None:
                bar.close()

    def follow_status(self, names: list[str], closing: set[str] | None = None) -> None:
        """Follow a job without round reports: poll until every party of ``names`` has
        finished.

        ``closing`` (after the submission deadline): the parties still to be sent
        :class:`~dpfed.runtime.control.CloseSubmissions` (unreachable when the deadline
        passed), tried at every poll. A refused message then refuses the job for good
        (:meth:`~dpfed.runtime.leader_dropouts.SubmissionDeadline.refuse`): the received sets
        are final, so a resume could not change the outcome.

        Raises
        ------
        JobStopped
            A party is gone or refused a message (before the deadline), or no round finished
            within ``round_timeout``.
        DpfedInputError
            A party refused a message or the close after the submission deadline.
        """
        leader = self._leader
        unreachable: dict[str, float] = {}
        last_round, last_progress = -1, time.monotonic()
        on_refused: Callable[[str], NoReturn] = (
            leader.requests.stop if closing is None else leader.submissions.refuse
        )
        while True:
            if closing:
                leader._close_submissions(closing)
            statuses = leader.requests.poll(unreachable, names, on_refused=on_refused)
            if statuses and len(statuses) == len(names):
                if all(s["finished"] for s in statuses.values()):
                    return
                lowest = min(s["round"] for s in statuses.values())
                if lowest > last_round:
                    if leader.progress and last_round >= 0:
                        leader_log(f"round {lowest} reached by every party")
                    last_round, last_progress = lowest, time.monotonic()
            if time.monotonic() - last_progress > leader.spec.round_timeout:
                leader.requests.stop(
                    f"round {last_round + 1} did not finish within "
                    f"{leader.spec.round_timeout:g} s (parties: {leader.requests.rounds(names)})"
                )
            time.sleep(POLL)
