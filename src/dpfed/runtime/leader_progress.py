"""What the leader of a networked job (:class:`~dpfed.runtime.leader.Leader`) says: its log lines,
and the rounds as they come, on a terminal's progress bar or, in a log, as lines for the first
rounds, then about :data:`LOG_LINES` over the job, and the last round.
"""

from __future__ import annotations

import logging
import math
import sys
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from dpfed.runtime.jobfile import LEADER, JobSpec
from dpfed.runtime.logs import process_logger
from dpfed.runtime.registry import ReportOfRound, get_protocol

if TYPE_CHECKING:  # the leader imports this module
    from dpfed.runtime.leader import Leader

__all__ = [
    "LEADER_LOGGER",
    "LOG_FIRST_ROUNDS",
    "LOG_LINES",
    "RoundDisplay",
    "leader_log",
    "logs_round",
]

#: The logger every line of the leader goes to (the ``logger`` of a JSON log line).
LEADER_LOGGER = "dpfed.runtime.leader"

#: A log (no terminal) shows the first rounds, then about this many lines per job.
LOG_FIRST_ROUNDS, LOG_LINES = 3, 20


def leader_log(text: str, level: int = logging.INFO) -> None:
    """Log ``text`` at ``level`` as the leader (:data:`LEADER_LOGGER`, process ``leader``)."""
    process_logger(LEADER_LOGGER, LEADER).log(level, text)


def logs_round(spec: JobSpec, round: int) -> bool:
    """Whether a log (not a terminal's progress bar) shows ``round`` of job ``spec``: the
    first :data:`LOG_FIRST_ROUNDS`, then about :data:`LOG_LINES` lines over the job's rounds,
    and the last round.

    Parameters
    ----------
    spec : JobSpec
        The job; its protocol's :meth:`~dpfed.runtime.registry.FederatedProtocol.planned_rounds`, if
        known, is its number of rounds (otherwise every round is shown).
    round : int
        The round, from 1.

    Returns
    -------
    bool
        Whether the round gets a log line.
    """
    total = get_protocol(spec.protocol).planned_rounds(spec)
    if round <= LOG_FIRST_ROUNDS or total is None or round >= total:
        return True
    return round % max(1, math.ceil(total / LOG_LINES)) == 0


class RoundDisplay:
    """The rounds of a job as its leader receives their reports: a progress bar when the
    leader's standard error is a terminal, otherwise a log line for the rounds
    :func:`logs_round` selects (none without ``progress``).

    Parameters
    ----------
    leader : Leader
        The leader whose job is shown (its ``spec``, ``progress`` and ``history``, read when
        used).
    """

    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    def bar(self) -> Any:
        """A progress bar over the job's rounds, or ``None`` (no ``progress``, or standard
        error is not a terminal)."""
        if not self._leader.progress or not sys.stderr.isatty():
            return None

        spec = self._leader.spec
        rounds = self._leader.protocol.planned_rounds(spec)
        return tqdm(total=rounds, desc=f"job {spec.id}", unit="round", leave=False)

    def show(self, report: ReportOfRound, bar: Any) -> None:
        """Show the round of ``report`` (already in the history) on ``bar`` or in the log."""
        entry = self._leader.history[report.round - 1]
        figures = {
            k: entry[k]
            for k in ("train_objective", "test_log_loss", "epsilon")
            if entry.get(k) is not None
        }
        if bar is not None:
            bar.update(1)
            bar.set_postfix({k: f"{v:.4g}" for k, v in figures.items()})
        elif self._leader.progress and logs_round(self._leader.spec, report.round):
            shown = ", ".join(f"{k} {v:.6g}" for k, v in figures.items())
            leader_log(f"round {report.round}: {shown}")
