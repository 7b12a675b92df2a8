"""The leader of a networked job: ``dpfed run``.

The leader holds no data and takes no part in the protocol's arithmetic. It

1. opens the job at every party, one at a time in name order (each party checks the job file
   digest and reserves the job's releases in its budget ledger; a refusal anywhere aborts the
   job and frees the reservations already made — the fixed order means two leaders competing
   for the same budgets cannot each take half);
2. tells every party to begin (or, resuming, to continue from its checkpoint);
3. receives the label holder's round reports, checkpointing the history before acknowledging
   each one, while it polls every party: a party unreachable for longer than the grace period,
   a party that refused a message, or a round that takes longer than the round timeout stops
   the job with a message naming the party and the round;
4. collects every party's public account (its releases) and writes ``result.json``.

A protocol whose job can do without some parties
(:meth:`dpfed.runtime.registry.FederatedProtocol.dropouts`:
a secure sum's clients, up to ``tolerated`` of them) is led with a submission deadline: the
required parties are opened and begun as above, then the droppable ones are opened and begun as
they come, until the deadline. At the deadline a job missing more than ``tolerated`` of them is
aborted (a refusal, nothing summed); otherwise the required parties are told to close the
submissions (:class:`~dpfed.runtime.control.CloseSubmissions`) and the job ends without the
missing parties, which are never waited for again.

A stopped job is resumed with ``dpfed run --resume``: the parties continue from their own
checkpoints, re-sending whatever was not acknowledged; nothing is handled twice.

:class:`Leader` keeps the job's state and its public interface; the work is done by its
collaborators, one module each: opening the job (:mod:`~dpfed.runtime.leader_open`), the
requests to the parties and the stop (:mod:`~dpfed.runtime.leader_requests`), the round reports
received (:mod:`~dpfed.runtime.leader_reports`), following the rounds
(:mod:`~dpfed.runtime.leader_rounds`), the droppable parties and the submission deadline
(:mod:`~dpfed.runtime.leader_dropouts`), the checkpoint (:mod:`~dpfed.runtime.leader_checkpoint`),
the result (:mod:`~dpfed.runtime.leader_result`) and what the leader says
(:mod:`~dpfed.runtime.leader_progress`).
"""

from __future__ import annotations

import json
import logging
import queue
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.runtime import wire
from dpfed.runtime.alignment import alignment_result_path, alignment_spec
from dpfed.runtime.certs import TlsIdentity, load_identity
from dpfed.runtime.control import BeginJob, ControlRequest, control_request
from dpfed.runtime.job_events import JobEvents
from dpfed.runtime.jobfile import LEADER, JobSpec
from dpfed.runtime.leader_checkpoint import LeaderCheckpoint
from dpfed.runtime.leader_dropouts import SubmissionDeadline
from dpfed.runtime.leader_open import (
    HANDSHAKE_CLOSED_TRIES,
    WAITING_EVERY,
    WAITING_FIRST,
    JobOpening,
    PartyUnreachable,
)
from dpfed.runtime.leader_progress import (
    LOG_FIRST_ROUNDS,
    LOG_LINES,
    RoundDisplay,
    leader_log,
    logs_round,
)
from dpfed.runtime.leader_reports import ReportInbox, refuse_control
from dpfed.runtime.leader_requests import JobStopped, PartyRequests
from dpfed.runtime.leader_result import JobResult
from dpfed.runtime.leader_rounds import MONITOR_POLL, RoundFollower
from dpfed.runtime.links import InboundLinks
from dpfed.runtime.monitor import MONITOR_KEEP, JobView, MonitorServer
from dpfed.runtime.registry import ReportOfRound, get_protocol
from dpfed.runtime.transport import Connection, connection_limit, serve

__all__ = [
    "EXIT_STOPPED",
    "EXIT_UNREACHABLE",
    "HANDSHAKE_CLOSED_TRIES",
    "LOG_FIRST_ROUNDS",
    "LOG_LINES",
    "MONITOR_POLL",
    "WAITING_EVERY",
    "WAITING_FIRST",
    "JobStopped",
    "Leader",
    "PartyUnreachable",
    "leader_connections",
    "run_alignment",
    "run_job",
]

#: Exit statuses of ``dpfed run`` besides 0 (done) and 2 (bad input or refused job).
EXIT_STOPPED = 1
#: ``dpfed run``'s status when a party was never reached (nothing ran, nothing to resume).
EXIT_UNREACHABLE = 4


def leader_connections(spec: JobSpec) -> tuple[TlsIdentity, dict[str, Connection]]:
    """The leader's identity (its certificate must name ``leader``) and a connection to every
    party of ``spec``.

    Raises
    ------
    DpfedInputError
        If the certificate is issued to another name (or does not load).
    """
    identity = load_identity(spec.leader.certificate, spec.leader.key, spec.ca)
    if identity.name != LEADER:
        raise DpfedInputError(
            f"the leader's certificate {str(spec.leader.certificate)!r} is issued to "
            f"{identity.name!r}, not to {LEADER!r}."
        )
    connections = {
        p.name: Connection(identity, p.name, p.address, max_bytes=spec.max_message_bytes)
        for p in spec.parties
    }
    return identity, connections


class Leader:
    """Lead job ``spec``; :meth:`run` returns when it has finished or stopped.

    The leader holds the job's state (its history, what it knows of the parties, its
    checkpoint's path); its collaborators, each given the leader, do the work: ``opening``
    (:class:`~dpfed.runtime.leader_open.JobOpening`), ``requests``
    (:class:`~dpfed.runtime.leader_requests.PartyRequests`), ``inbox``
    (:class:`~dpfed.runtime.leader_reports.ReportInbox`), ``follower``
    (:class:`~dpfed.runtime.leader_rounds.RoundFollower`), ``submissions``
    (:class:`~dpfed.runtime.leader_dropouts.SubmissionDeadline`), ``checkpoints``
    (:class:`~dpfed.runtime.leader_checkpoint.LeaderCheckpoint`), ``job_result``
    (:class:`~dpfed.runtime.leader_result.JobResult`) and ``display``
    (:class:`~dpfed.runtime.leader_progress.RoundDisplay`).

    Watchers subscribe to its events (``leader.events``, a
    :class:`~dpfed.runtime.job_events.JobEvents`): the live page's view is one.

    Every control request to a party goes through :meth:`_control`, every read-only query
    through :meth:`_query` and every close of the submissions through
    :meth:`_close_submissions`: a subclass may watch or replace them.
    """

    def __init__(
        self,
        spec: JobSpec,
        *,
        resume: bool = False,
        progress: bool = True,
        monitor: str | None = None,
        monitor_keep: float = MONITOR_KEEP,
    ) -> None:
        self.spec = spec
        self.events = JobEvents()
        self.monitor = monitor
        self.monitor_keep = float(monitor_keep)
        self.monitor_url: str | None = None
        self.protocol = get_protocol(spec.protocol)
        self.resume = resume
        self.progress = progress
        self.out: Path | None = None
        self.identity, self.connections = leader_connections(spec)
        self.checkpoint_path = spec.checkpoint / "leader.npz"
        self.lock = threading.Lock()
        self.inbound = InboundLinks()
        self.history: list[dict[str, Any]] = []
        self.reports: queue.Queue[ReportOfRound] = queue.Queue()
        self.elapsed = 0.0
        self.started = time.monotonic()
        self.finished = False
        self.result: dict[str, Any] | None = None  # kept in the finished checkpoint
        self.protocol_done = False  # the last round's report has arrived
        # a job with droppable parties: the required ones are opened as usual, the droppable
        # ones until the submission deadline
        self.dropouts = self.protocol.dropouts(spec)
        droppable = set(self.dropouts.parties) if self.dropouts is not None else set()
        self.required = [n for n in spec.names if n not in droppable]
        self.droppable = sorted(droppable)
        self.active = set(spec.names) if self.dropouts is None else set(self.required)
        self.deadline_passed = False
        self.dropped: list[str] = []  # droppable parties never opened by the deadline
        self.droppable_samples: dict[str, int] = {}  # n_samples of those opened
        self.unfinished: list[str] = []  # opened droppable parties not finished at the deadline
        self.requests = PartyRequests(self)
        self.checkpoints = LeaderCheckpoint(self)
        self.inbox = ReportInbox(self)
        self.opening = JobOpening(self)
        self.submissions = SubmissionDeadline(self)
        self.follower = RoundFollower(self)
        self.job_result = JobResult(self)
        self.display = RoundDisplay(self)
        self.checkpoints.load_or_check()
        self.events.history(self.history)

    # -- the job ----------------------------------------------------------------------------
    def run(
        self, out: str | Path, on_result: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Run (or resume) the job and write ``out``; return the result.

        With ``monitor`` (``[HOST:]PORT``), the job's page is served while it runs
        (:mod:`dpfed.runtime.monitor`) and ``monitor_keep`` seconds after it ends, so an open
        page shows the end; ``on_result`` (e.g. printing the summary) is called with the
        result as soon as it is written, before that wait.

        Raises
        ------
        DpfedInputError
            A party refused the job (budget, job file, checkpoint); nothing ran. Or, with a
            submission deadline, more droppable parties than tolerated were not in by then:
            the job is aborted and nothing is summed.
        JobStopped
            The job stopped part-way; the parties keep their state for ``--resume``.
        """
        page, unsubscribe = None, None
        if self.monitor is not None:
            view = JobView(self.spec)
            unsubscribe = self.events.subscribe(view)
            page = MonitorServer(view.snapshot, self.monitor).start()
            self.monitor_url = page.url
            self._log(f"job page: {page.url}")
        interrupted = False
        try:
            result = self._lead(out)
            if on_result is not None:
                on_result(result)
        except JobStopped as exc:
            self.events.state("stopped", str(exc))
            raise
        except KeyboardInterrupt:
            interrupted = True
            self.events.state("stopped", "interrupted")
            raise
        except BaseException as exc:
            self.events.state("failed", str(exc))
            raise
        finally:
            if page is not None:
                if not interrupted:
                    time.sleep(self.monitor_keep)
                page.stop()
            if unsubscribe is not None:
                unsubscribe()
        return result

    def _lead(self, out: str | Path) -> dict[str, Any]:
        """Serve the round reports while the job is opened, begun, followed to its end and
        its result written to ``out``; or, resuming a finished job, write its kept result."""
        self.out = Path(out)
        if self.finished and self.result is not None:  # --resume of a finished job
            return self.job_result.write_again(out, self.result)
        server = serve(
            self.identity,
            self.spec.leader.bind,
            {"Deliver": self.inbox.deliver, "Control": refuse_control},
            max_bytes=self.spec.max_message_bytes,
            max_connections=connection_limit(len(self.spec.names) + 1),
        )
        try:
            infos = self.opening.open_required()
            self.started = time.monotonic()
            for name in self.required:
                self._control(name, BeginJob)
            self.events.state("running")
            closing: set[str] = set()
            if self.dropouts is not None:
                infos |= self.submissions.gather()
                closing = self.submissions.pass_deadline()
            self.follower.follow_to_the_end(closing)
            return self.job_result.finish(out, infos)
        finally:
            for connection in self.connections.values():
                connection.close()
            server.stop(grace=0.5).wait()

    # -- requests to the parties ------------------------------------------------------------
    def _control(
        self, name: str, op: type[ControlRequest], *, timeout: float | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Send party ``name`` the request ``op(**fields)`` and return its answer."""
        frame = wire.encode(
            control_request(op, party=name, **fields),
            job=self.spec.id,
            seq=0,
            max_bytes=self.spec.max_message_bytes,
        )
        return self.connections[name].control(frame, timeout=timeout or self.spec.round_timeout)

    def _query(self, name: str, op: type[ControlRequest], **fields: Any) -> dict[str, Any]:
        """A read-only request to party ``name``, tried again while the party is unreachable
        for up to ``grace`` seconds (then the job stops, resumable):
        :meth:`PartyRequests.query <dpfed.runtime.leader_requests.PartyRequests.query>`."""
        return self.requests.query(name, op, **fields)

    def _close_submissions(self, closing: set[str]) -> None:
        """Send :class:`~dpfed.runtime.control.CloseSubmissions` to the parties of
        ``closing``; those that accept it leave the set, unreachable ones stay (tried again),
        a refusal refuses the job: :meth:`SubmissionDeadline.close_submissions
        <dpfed.runtime.leader_dropouts.SubmissionDeadline.close_submissions>`."""
        self.submissions.close_submissions(closing)

    def resume_command(self) -> str:
        """The command that continues this job, as it can be pasted into a shell."""
        out = self.out if self.out is not None else Path("result.json")
        return (
            f"dpfed run --config {shlex.quote(str(Path(self.spec.path).resolve()))} "
            f"--out {shlex.quote(str(out.resolve()))} --resume"
        )

    # -- output -----------------------------------------------------------------------------
    def _logs_round(self, round: int) -> bool:
        """Whether a log (not a terminal's progress bar) shows ``round``: the first
        :data:`LOG_FIRST_ROUNDS`, then about :data:`LOG_LINES` lines over the job's rounds, and
        the last round (:func:`~dpfed.runtime.leader_progress.logs_round`)."""
        return logs_round(self.spec, round)

    @staticmethod
    def _log(text: str, level: int = logging.INFO) -> None:
        leader_log(text, level)


def run_alignment(spec: JobSpec, *, progress: bool = True) -> dict[str, Any]:
    """Lead aligned job ``spec``'s alignment job (:mod:`dpfed.runtime.alignment`) to the end,
    or continue it, unless it has finished: its result (shared rows and digests, no ID),
    kept in the leader's checkpoint folder."""
    out = alignment_result_path(spec)
    if out.exists():
        return dict(json.loads(out.read_text()))
    aligning = alignment_spec(spec)
    leader = Leader(
        aligning, resume=(aligning.checkpoint / "leader.npz").exists(), progress=progress
    )
    return leader.run(out)


def run_job(
    spec: JobSpec, out: str | Path, *, resume: bool = False, progress: bool = True
) -> dict[str, Any]:
    """``dpfed run``: lead ``spec`` to the end and write ``out`` (an aligned job's alignment
    job first, :func:`run_alignment`)."""
    if spec.align:
        run_alignment(spec, progress=progress)
    return Leader(spec, resume=resume, progress=progress).run(out)
