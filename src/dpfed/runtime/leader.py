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

A protocol whose job can do without some parties (:meth:`dpfed.runtime.registry.Protocol.dropouts`:
a secure sum's clients, up to ``tolerated`` of them) is led with a submission deadline: the
required parties are opened and begun as above, then the droppable ones are opened and begun as
they come, until the deadline. At the deadline a job missing more than ``tolerated`` of them is
aborted (a refusal, nothing summed); otherwise the required parties are told to close the
submissions (:class:`~dpfed.runtime.control.CloseSubmissions`) and the job ends without the
missing parties, which are never waited for again.

A stopped job is resumed with ``dpfed run --resume``: the parties continue from their own
checkpoints, re-sending whatever was not acknowledged; nothing is handled twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import queue
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn, cast

import grpc
import numpy as np
from tqdm import tqdm

from dpfed import __version__
from dpfed._io import jsonable, write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.runtime import wire
from dpfed.runtime.alignment import alignment_result_path, alignment_spec
from dpfed.runtime.certs import TlsIdentity, load_identity
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint
from dpfed.runtime.control import (
    AbortJob,
    AccountRequest,
    BeginJob,
    CloseSubmissions,
    ControlRequest,
    EvaluateRequest,
    FinishJob,
    OpenJob,
    StatusRequest,
    SuspendJob,
    control_request,
    kinds_fingerprint,
)
from dpfed.runtime.disclosure import with_simulation
from dpfed.runtime.jobfile import LEADER, SIMULATION_WARNING, JobSpec
from dpfed.runtime.links import InboundLinks, received_frames
from dpfed.runtime.logs import process_logger
from dpfed.runtime.monitor import MONITOR_KEEP, JobView, MonitorServer
from dpfed.runtime.registry import JobRecord, RoundReport, get_protocol
from dpfed.runtime.transport import (
    HANDSHAKE_CLOSED,
    Connection,
    Refused,
    RemoteError,
    connection_limit,
    serve,
    tls_failure,
)

#: Exit statuses of ``dpfed run`` besides 0 (done) and 2 (bad input or refused job).
EXIT_STOPPED = 1
#: ``dpfed run``'s status when a party was never reached (nothing ran, nothing to resume).
EXIT_UNREACHABLE = 4

_POLL = 0.25
#: With a job page, how often the parties are polled while round reports keep coming (s).
MONITOR_POLL = 2.0


class JobStopped(RuntimeError):
    """The job stopped (a party is gone, refused, or too slow); it can be resumed."""


class PartyUnreachable(RuntimeError):
    """A party never answered the job's opening: nothing ran, so there is nothing to resume."""


#: Seconds before the leader first says which parties it is still waiting for, and between
#: repeats.
WAITING_FIRST, WAITING_EVERY = 1.0, 10.0

#: A log (no terminal) shows the first rounds, then about this many lines per job.
LOG_FIRST_ROUNDS, LOG_LINES = 3, 20

#: Handshakes a party may close in a row before the leader concludes it refuses the leader's
#: certificate (a party going down closes one or two).
HANDSHAKE_CLOSED_TRIES = 5


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
    """Lead job ``spec``; :meth:`run` returns when it has finished or stopped."""

    def __init__(self, spec: JobSpec, *, resume: bool = False, progress: bool = True,
                 monitor: str | None = None, monitor_keep: float = MONITOR_KEEP) -> None:
        self.spec = spec
        self.view = JobView(spec)
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
        self.reports: queue.Queue[RoundReport] = queue.Queue()
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
        self._load_or_check_checkpoint()
        self.view.set_history(self.history)

    # -- checkpoint -------------------------------------------------------------------------
    def _load_or_check_checkpoint(self) -> None:
        exists = self.checkpoint_path.exists()
        if exists:
            _, state = load_checkpoint(self.checkpoint_path)
            if state.get("aborted"):
                raise DpfedInputError(
                    f"job {self.spec.id} was aborted: {state['aborted']} (see "
                    f"{str(self.checkpoint_path)!r}); give the job a new id to run it again."
                )
        if not self.resume:
            if exists:
                if not state.get("finished"):
                    raise DpfedInputError(
                        f"job {self.spec.id} has a checkpoint at round {len(state['history'])} "
                        f"in {str(self.checkpoint_path)!r}; continue it with --resume, or give "
                        "the job a new id to start afresh (never remove a party's work folder: it "
                        "holds the party's budget ledger)."
                    )
                raise DpfedInputError(
                    f"job {self.spec.id} has already finished (see {str(self.checkpoint_path)!r});"
                    " give the job a new id to run it again, or add --resume to write its result "
                    "again."
                )
            return
        if not exists:
            raise DpfedInputError(
                f"--resume needs the leader's checkpoint {str(self.checkpoint_path)!r}. "
                "Found none."
            )
        _, state = load_checkpoint(self.checkpoint_path)
        if state.get("digest") != self.spec.digest:
            raise DpfedInputError(
                f"the checkpoint {str(self.checkpoint_path)!r} belongs to another version of job "
                f"{self.spec.id} (the job file changed)."
            )
        if state.get("finished"):
            if state.get("result") is None:
                raise DpfedInputError(
                    f"job {self.spec.id} has already finished; nothing to resume.")
            # finished, but its result file may not have been written: write it again
            self.finished, self.result = True, state["result"]
            return
        self.history = state["history"]
        self.inbound.load(state["inbound"])
        self.elapsed = float(state["seconds"])
        self.protocol_done = bool(state["protocol_done"])
        self.deadline_passed = bool(state.get("deadline_passed", False))
        self.dropped = list(state.get("dropped", []))
        self.droppable_samples = dict(state.get("droppable_samples", {}))

    def _checkpoint(self, *, aborted: str | None = None) -> None:
        save_checkpoint(
            self.checkpoint_path, {},
            {
                "digest": self.spec.digest,
                "history": self.history,
                "inbound": self.inbound.state(),
                "seconds": self._seconds(),
                "finished": self.finished,
                "protocol_done": self.protocol_done,
                "deadline_passed": self.deadline_passed,
                "dropped": self.dropped,
                "droppable_samples": self.droppable_samples,
                "aborted": aborted,
                "result": self.result,
            },
            fsync=self.spec.fsync,
        )

    def _seconds(self) -> float:
        return self.elapsed + (time.monotonic() - self.started)

    # -- reports from the label holder ------------------------------------------------------
    def _deliver(self, payload: bytes, peer: str) -> bytes:
        holder = self.spec.names[0]
        if peer != holder:
            raise Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"the leader takes round reports from {holder!r} only. Found {peer!r}",
            )
        for frame in received_frames(payload, max_bytes=self.spec.max_message_bytes):
            self._take_report(frame, peer)
        return b"ok"

    def _take_report(self, payload: memoryview, peer: str) -> None:
        try:
            envelope = wire.decode(payload, job=self.spec.id, max_bytes=self.spec.max_message_bytes)
        except wire.WireError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        message = envelope.message
        if self.protocol.report is None or not isinstance(message, self.protocol.report) \
                or message.sender != peer:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "expected a round report")
        report = cast(RoundReport, message)
        digest = hashlib.sha256(payload).hexdigest()
        with self.lock:
            if not self.inbound.is_new(peer, envelope.seq, digest):
                return
            if report.round != len(self.history) + 1:
                raise Refused(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"expected the report of round {len(self.history) + 1}. "
                    f"Found round {report.round}",
                )
            entry = report.entry()
            entry["seconds"] = self._seconds()
            self.history.append(entry)
            self.view.set_history(self.history)
            self.protocol_done = bool(report.finished)
            self.inbound.mark(peer, envelope.seq, digest)
            self._checkpoint()
        self.reports.put(report)

    @staticmethod
    def _refuse_control(payload: bytes, peer: str) -> bytes:
        raise Refused(grpc.StatusCode.PERMISSION_DENIED, "the leader takes no control requests")

    # -- the job ----------------------------------------------------------------------------
    def run(self, out: str | Path,
            on_result: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
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
        page = None
        if self.monitor is not None:
            page = MonitorServer(self.view.snapshot, self.monitor).start()
            self.monitor_url = page.url
            self._log(f"job page: {page.url}")
        interrupted = False
        try:
            result = self._lead(out)
            if on_result is not None:
                on_result(result)
        except JobStopped as exc:
            self.view.set_state("stopped", str(exc))
            raise
        except KeyboardInterrupt:
            interrupted = True
            self.view.set_state("stopped", "interrupted")
            raise
        except BaseException as exc:
            self.view.set_state("failed", str(exc))
            raise
        finally:
            if page is not None:
                if not interrupted:
                    time.sleep(self.monitor_keep)
                page.stop()
        return result

    def _lead(self, out: str | Path) -> dict[str, Any]:
        self.out = Path(out)
        if self.finished and self.result is not None:  # --resume of a finished job
            self._write_result(out, self.result)
            self._log(f"job {self.spec.id} had finished; its result, kept in the checkpoint, "
                      f"is written again to {out}")
            self.view.set_result(self.result)
            self.view.set_state("finished")
            return self.result
        server = serve(
            self.identity, self.spec.leader.bind,
            {"Deliver": self._deliver, "Control": self._refuse_control},
            max_bytes=self.spec.max_message_bytes,
            max_connections=connection_limit(len(self.spec.names) + 1),
        )
        try:
            infos = self._open_all(self.required)
            n_samples = {info["n_samples"] for info in infos.values()}
            if self.protocol.same_rows and len(n_samples) != 1:
                self._abort_all("the parties hold different numbers of rows",
                                retry_for=self.spec.round_timeout)
                raise DpfedInputError(
                    "the parties must hold the same rows in the same order. Found row counts "
                    f"{ {n: i['n_samples'] for n, i in infos.items()} }."
                )
            if not self.resume:
                self._checkpoint()
            self._log(
                f"job {self.spec.id}: {len(infos)} parties open"
                + (f", resuming after round {len(self.history)}" if self.resume else "")
            )
            self.started = time.monotonic()
            for name in self.required:
                self._control(name, BeginJob)
            self.view.set_state("running")
            closing: set[str] = set()
            if self.dropouts is not None:
                infos |= self._gather()
                closing = self._deadline()
            if self.protocol.report is not None:
                self._follow()
                # the last report can reach the leader before the last messages reach every
                # party (a restarted party's link is still retrying): wait until all finished
                self._follow_status(self.required)
            else:
                self._follow_status(self.required,
                                    closing if self.deadline_passed else None)
            accounts = {name: self._query(name, AccountRequest) for name in self.required}
            samples = {name: int(info["n_samples"]) for name, info in infos.items()}
            record = JobRecord(
                history=self.history, accounts=accounts,
                n_samples=self.droppable_samples | samples,
                evaluate=self._evaluate, seconds=self._seconds(),
            )
            result = self.protocol.result(self.spec, record)
            for name in self.required:
                self._control(name, FinishJob)
            if self.dropouts is not None:
                self._end_droppable()
            if self.spec.simulation:
                result = with_simulation(result, SIMULATION_WARNING)
            with self.lock:
                # the finished checkpoint keeps the result: if writing `out` fails, --resume
                # writes it again (the parties have finished and cannot be asked twice)
                self.finished, self.result = True, jsonable(result)
                self._checkpoint()
            self._write_result(out, result)
            self.view.set_result(result)
            rounds = len(self.history) or None
            for name in self.required:
                self.view.set_party(name, "finished", {"round": rounds, "finished": True})
            self.view.set_state("finished")
            return result
        finally:
            for connection in self.connections.values():
                connection.close()
            server.stop(grace=0.5).wait()

    def _control(self, name: str, op: type[ControlRequest], *, timeout: float | None = None,
                 **fields: Any) -> dict[str, Any]:
        """Send party ``name`` the request ``op(**fields)`` and return its answer."""
        frame = wire.encode(control_request(op, party=name, **fields), job=self.spec.id, seq=0,
                            max_bytes=self.spec.max_message_bytes)
        return self.connections[name].control(frame, timeout=timeout or self.spec.round_timeout)

    def _query(self, name: str, op: type[ControlRequest], **fields: Any) -> dict[str, Any]:
        """A read-only request to party ``name``, tried again while the party is unreachable
        for up to ``grace`` seconds (then the job stops, resumable).

        A party that came back within the grace period may still be unknown to this process's
        channel, which fails calls at once until it has reconnected."""
        since = time.monotonic()
        while True:
            try:
                return self._control(name, op, **fields)
            except RemoteError as exc:
                if not exc.retryable:
                    raise
                waited = time.monotonic() - since
                if waited > self.spec.grace:
                    self._stop(f"party {name!r} did not answer {op.__name__} "
                               f"(for {waited:.1f} s; grace {self.spec.grace:g} s): "
                               f"{exc.details}")
                time.sleep(0.2)

    def _broadcast(self, op: type[ControlRequest], *, retry_for: float = 0.0,
                   names: Iterable[str] | None = None, **fields: Any) -> None:
        """Send ``op`` to every party of ``names`` (default: all) that answers; a party that
        is not serving yet is tried again for ``retry_for`` seconds, then left alone."""
        deadline = time.monotonic() + retry_for
        pending = list(self.spec.names if names is None else names)
        while pending:
            later = []
            for name in pending:
                try:
                    self._control(name, op, timeout=2.0, **fields)
                except RemoteError as exc:
                    if exc.code == grpc.StatusCode.UNAVAILABLE:
                        later.append(name)
            if not later or time.monotonic() >= deadline:
                return
            pending = later
            time.sleep(0.2)

    def _abort_all(self, reason: str, *, retry_for: float) -> None:
        """Tell every party the job will not run: the required ones are tried for
        ``retry_for`` seconds while not serving, the droppable ones once."""
        self._broadcast(AbortJob, reason=reason, retry_for=retry_for, names=self.required)
        self._broadcast(AbortJob, reason=reason, names=self.droppable)

    def _open(self, name: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Send party ``name`` the job's :class:`OpenJob` and return its description."""
        return self._control(
            name, OpenJob, timeout=timeout, digest=self.spec.digest, resume=self.resume,
            version=__version__, kinds=kinds_fingerprint(self.protocol.messages),
            keys=json.dumps(self.spec.key_digests(), sort_keys=True), text=self.spec.text,
        )

    def _open_all(self, parties: list[str]) -> dict[str, dict[str, Any]]:
        """Open the job at ``parties`` one at a time in name order, each waited for up to
        ``round_timeout``; any failure aborts the job everywhere."""
        infos: dict[str, dict[str, Any]] = {}
        started = time.monotonic()
        next_word = started + WAITING_FIRST
        names = sorted(parties)
        for name in names:
            deadline = time.monotonic() + self.spec.round_timeout
            closed = 0  # connections the party closed during the handshake, in a row
            while True:
                if time.monotonic() >= next_word:
                    waiting = [n for n in names if n not in infos]
                    self._log(
                        f"waiting for {waiting[0]} at {self.spec.party(waiting[0]).address} "
                        f"(not serving yet, {time.monotonic() - started:.0f} s)"
                        + (f"; not yet opened: {', '.join(waiting[1:])}" if waiting[1:] else "")
                        + f"; giving up after {self.spec.round_timeout:g} s"
                    )
                    next_word = time.monotonic() + WAITING_EVERY
                self.view.set_party(name, "waiting")
                try:
                    infos[name] = self._open(name)
                    self.view.set_party(name, "serving")
                    break
                except RemoteError as exc:
                    # retry while the party is not serving yet; never re-send an open that
                    # may still be running
                    starting = exc.code == grpc.StatusCode.UNAVAILABLE
                    address = self.spec.party(name).address
                    tls = tls_failure(name, address, exc.details) if starting else None
                    closed = closed + 1 if starting and HANDSHAKE_CLOSED in exc.details else 0
                    if closed >= HANDSHAKE_CLOSED_TRIES:
                        tls = (f"{name} at {address} closed the connection during the TLS "
                               f"handshake {closed} times in a row: it does not accept the "
                               "leader's certificate (not signed by the CA of its job file, "
                               "or not the leader's)")
                    if tls is not None:
                        self._abort_all(f"{name} could not open the job", retry_for=0.0)
                        raise DpfedInputError(
                            f"{tls}. Nothing ran and nothing was recorded; fix the certificate "
                            "and run this command again."
                        ) from None
                    if starting and time.monotonic() < deadline:
                        time.sleep(0.2)
                        continue
                    # every party of a job that cannot start stops, and frees its reservation;
                    # one never reached is not waited for again
                    never = starting
                    self._abort_all(f"{name} could not open the job",
                                    retry_for=0.0 if never else self.spec.round_timeout)
                    if never:
                        raise PartyUnreachable(
                            f"party {name!r} at {self.spec.party(name).address} was never "
                            f"reached within {self.spec.round_timeout:g} s ({exc.details}). "
                            "Nothing ran and nothing was recorded; start it (`dpfed party "
                            f"--config {shlex.quote(str(Path(self.spec.path).resolve()))} "
                            f"--name {name}`) and run this command again."
                        ) from None
                    if exc.retryable:
                        raise JobStopped(
                            f"party {name!r} at {self.spec.party(name).address} did not answer "
                            f"within {self.spec.round_timeout:g} s ({exc.details})"
                        ) from None
                    raise DpfedInputError(
                        f"party {name!r} refused the job: {exc.details}"
                    ) from None
        return infos

    # -- droppable parties and the submission deadline --------------------------------------
    def _gather(self) -> dict[str, dict[str, Any]]:
        """Open and begin the droppable parties as they come, in passes in name order, until
        the submission deadline (``deadline`` seconds from now) or until every required party
        has finished; return the descriptions of those opened.

        Meanwhile the required parties are polled as usual (unreachable beyond ``grace`` or a
        refused message stops the job) and the droppable ones for refused messages only. A
        droppable party that refuses the job is logged and left out. Resumed after the
        deadline had passed, nothing is opened again.
        """
        assert self.dropouts is not None
        infos: dict[str, dict[str, Any]] = {}
        if self.deadline_passed:
            return infos
        begun: set[str] = set()
        refused: set[str] = set()
        watched: set[str] = set()  # begun droppable parties not known to be done
        finished: set[str] = set()  # droppable parties whose input is out
        unreachable: dict[str, float] = {}
        started = time.monotonic()
        end = started + self.dropouts.deadline
        next_word = started + WAITING_FIRST
        while True:
            waiting = [n for n in self.droppable if n not in begun and n not in refused]
            for name in waiting:
                if time.monotonic() >= end:
                    break
                # a party that does not answer delays the deadline by 0.2 s at most
                timeout = max(0.2, min(2.0, end - time.monotonic()))
                try:
                    if name not in infos:
                        infos[name] = self._open(name, timeout=timeout)
                        self.active.add(name)
                    self._control(name, BeginJob, timeout=timeout)
                except RemoteError as exc:
                    if not exc.retryable:
                        refused.add(name)
                        self._log(f"{name} refused the job and is left out: {exc.details}",
                                  logging.WARNING)
                    continue  # not serving yet: tried again in the next pass
                begun.add(name)
                watched.add(name)
            statuses = self._poll(unreachable, self.required)
            self._watch(watched, finished)
            if len(statuses) == len(self.required) and all(
                status["finished"] for status in statuses.values()
            ):
                break  # every input arrived before the deadline
            now = time.monotonic()
            if now >= end:
                break
            if now >= next_word:
                missing = [n for n in self.droppable if n not in begun]
                if missing:
                    shown = ", ".join(f"{n} at {self.spec.party(n).address}"
                                      for n in missing[:10])
                    more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
                    self._log(
                        f"waiting for {len(missing)} of {len(self.droppable)} droppable parties "
                        f"({shown}{more}; not opened yet) until the submission deadline in "
                        f"{end - now:.0f} s; at most {self.dropouts.tolerated} may be dropped"
                    )
                next_word = now + WAITING_EVERY
            time.sleep(_POLL)
        self.droppable_samples = {n: int(info["n_samples"]) for n, info in infos.items()}
        self.unfinished = sorted(begun - finished)
        return infos

    def _watch(self, watched: set[str], finished: set[str]) -> None:
        """Poll the droppable parties of ``watched`` for refused messages, best effort (an
        unreachable one is ignored); one that has finished joins ``finished``, and is no
        longer watched once it has nothing left to send."""
        for name in sorted(watched):
            try:
                status = self._control(name, StatusRequest, timeout=0.5)
            except RemoteError:
                continue
            links = status["links"].values()
            for link in links:
                if link["refused"]:
                    self._stop(f"party {name!r} reports: {link['refused']}")
            if status["finished"]:
                finished.add(name)
                if not any(link["pending"] for link in links):
                    watched.discard(name)

    def _deadline(self) -> set[str]:
        """The submission deadline has passed (or every required party finished before it):
        refuse the job if more droppable parties than tolerated were never opened; otherwise
        record the deadline in the checkpoint and tell the required parties that have not
        finished to close the submissions. Returns those still to be told (unreachable now).
        """
        assert self.dropouts is not None
        if not self.deadline_passed:
            missing = [n for n in self.droppable if n not in self.droppable_samples]
            if len(missing) > self.dropouts.tolerated:
                shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more"
                                                   if len(missing) > 10 else "")
                self._refuse_dropouts(
                    f"{len(missing)} of {len(self.droppable)} droppable parties were not in by "
                    f"the submission deadline of {self.dropouts.deadline:g} s ({shown}), but at "
                    f"most tolerated = {self.dropouts.tolerated} may be dropped"
                )
            with self.lock:
                self.deadline_passed = True
                self.dropped = missing
                self._checkpoint()
        closing = set(self.required)
        statuses = self._poll({}, self.required)
        closing -= {n for n, status in statuses.items() if status["finished"]}
        if not closing:
            return closing
        self._log(
            f"submission deadline of {self.dropouts.deadline:g} s passed: "
            + (f"dropping {', '.join(self.dropped)} (never opened); " if self.dropped else "")
            + (f"not finished when last asked: {', '.join(self.unfinished)} (left out unless "
               "their input is in at the close); " if self.unfinished else "")
            + f"closing the submissions at {', '.join(sorted(closing))}"
        )
        self._close_submissions(closing)
        return closing

    def _close_submissions(self, closing: set[str]) -> None:
        """Send :class:`CloseSubmissions` to the parties of ``closing``; those that accept it
        leave the set, unreachable ones stay (tried again), a refusal refuses the job."""
        for name in sorted(closing):
            try:
                self._control(name, CloseSubmissions, timeout=min(2.0, self.spec.grace))
            except RemoteError as exc:
                if exc.retryable:
                    continue
                self._refuse_dropouts(f"{name} refused to close the submissions: {exc.details}")
            closing.discard(name)

    def _refuse_dropouts(self, why: str) -> NoReturn:
        """Abort a job that lost more droppable parties than it tolerates: the checkpoint
        records why (no resume), every reachable party is told to abort, and the run is
        refused."""
        with self.lock:
            self._checkpoint(aborted=why)
        self._log(f"job {self.spec.id} aborted: {why}", logging.WARNING)
        self._broadcast(AbortJob, reason=why,
                        names=[n for n in self.spec.names if n in self.active])
        raise DpfedInputError(
            f"job {self.spec.id} refused: {why}. Nothing was summed; the parties were told to "
            "abort (those that released nothing free their budget reservations)."
        )

    def _end_droppable(self) -> None:
        """Best effort, a few seconds at most: a droppable party that has finished is told to
        finish, any other to abort (it missed the submission deadline); those not reached are
        logged (they stop after ``idle_timeout``)."""

        def end(name: str) -> str | None:
            try:
                status = self._control(name, StatusRequest, timeout=2.0)
                if status["finished"]:
                    self._control(name, FinishJob, timeout=2.0)
                else:
                    self._control(name, AbortJob, timeout=2.0,
                                  reason=f"{name} missed the submission deadline")
            except RemoteError as exc:
                return f"{name} ({exc.code.name})"
            return None

        with ThreadPoolExecutor(max_workers=min(8, max(1, len(self.droppable)))) as pool:
            missed = [m for m in pool.map(end, self.droppable) if m is not None]
        if missed:
            self._log(f"not reached at the end of the job: {', '.join(missed)}; they stop after "
                      f"idle_timeout ({self.spec.idle_timeout:g} s)")

    def _follow(self) -> None:
        bar = self._bar()
        if bar is not None:
            bar.update(len(self.history))
        unreachable: dict[str, float] = {}
        last_progress = time.monotonic()
        last_poll = 0.0
        try:
            while not self.protocol_done:
                try:
                    report = self.reports.get(timeout=_POLL)
                except queue.Empty:
                    report = None
                now = time.monotonic()
                if report is not None:
                    last_progress = now
                    self._show(report, bar)
                    if self.monitor is None or now - last_poll < MONITOR_POLL:
                        continue
                    # the page shows every party's round and spending as the job goes
                if now - last_poll >= _POLL:
                    last_poll = now
                    self._poll(unreachable)
                if now - last_progress > self.spec.round_timeout:
                    self._stop(
                        f"round {len(self.history) + 1} did not finish within "
                        f"{self.spec.round_timeout:g} s (parties: {self._rounds()})"
                    )
        finally:
            if bar is not None:
                bar.close()

    def _evaluate(self, name: str, models: list[list[float]]) -> list[float]:
        """Party ``name``'s losses at ``models`` (evaluation after training)."""
        reply = self._query(name, EvaluateRequest, models=np.asarray(models, dtype=np.float64))
        return [float(v) for v in reply["losses"]]

    def _follow_status(self, names: list[str], closing: set[str] | None = None) -> None:
        """Follow a job without round reports: poll until every party of ``names`` has
        finished.

        ``closing`` (after the submission deadline): the parties still to be sent
        :class:`CloseSubmissions` (unreachable when the deadline passed), tried at every poll.
        A refused message then refuses the job for good (:meth:`_refuse_dropouts`): the
        received sets are final, so a resume could not change the outcome.
        """
        unreachable: dict[str, float] = {}
        last_round, last_progress = -1, time.monotonic()
        on_refused = self._stop if closing is None else self._refuse_dropouts
        while True:
            if closing:
                self._close_submissions(closing)
            statuses = self._poll(unreachable, names, on_refused=on_refused)
            if statuses and len(statuses) == len(names):
                if all(s["finished"] for s in statuses.values()):
                    return
                lowest = min(s["round"] for s in statuses.values())
                if lowest > last_round:
                    if self.progress and last_round >= 0:
                        self._log(f"round {lowest} reached by every party")
                    last_round, last_progress = lowest, time.monotonic()
            if time.monotonic() - last_progress > self.spec.round_timeout:
                self._stop(
                    f"round {last_round + 1} did not finish within "
                    f"{self.spec.round_timeout:g} s (parties: {self._rounds(names)})"
                )
            time.sleep(_POLL)

    def _poll(self, unreachable: dict[str, float], names: list[str] | None = None, *,
              on_refused: Callable[[str], NoReturn] | None = None) -> dict[str, dict[str, Any]]:
        """The status of every party of ``names`` (default: all) that answers; stops the job
        when one is unreachable for longer than ``grace``, or when one refused a message
        (``on_refused(why)``, default :meth:`_stop`)."""
        now = time.monotonic()
        statuses: dict[str, dict[str, Any]] = {}
        for name in self.spec.names if names is None else names:
            try:
                status = self._control(name, StatusRequest, timeout=min(2.0, self.spec.grace))
            except RemoteError as exc:
                if not exc.retryable:
                    self._stop(f"party {name!r} failed: {exc.details}")
                self.view.set_party(name, "unreachable")
                since = unreachable.setdefault(name, now)
                if now - since > self.spec.grace:
                    self._stop(
                        f"party {name!r} is unreachable (for {now - since:.1f} s; grace "
                        f"{self.spec.grace:g} s)"
                    )
                continue
            unreachable.pop(name, None)
            statuses[name] = status
            self.view.set_party(name, "finished" if status["finished"] else "serving", status)
            for link in status["links"].values():
                if link["refused"]:
                    (on_refused or self._stop)(f"party {name!r} reports: {link['refused']}")
        return statuses

    def _rounds(self, names: list[str] | None = None) -> str:
        parts = []
        for name in self.spec.names if names is None else names:
            try:
                status = self._control(name, StatusRequest, timeout=1.0)
                parts.append(f"{name} at round {status['round']}")
            except RemoteError:
                parts.append(f"{name} unreachable")
        return ", ".join(parts)

    def _stop(self, why: str) -> NoReturn:
        self._broadcast(SuspendJob, reason=why,
                        names=[n for n in self.spec.names if n in self.active])
        raise JobStopped(
            f"job {self.spec.id} stopped in round {len(self.history) + 1}: {why}. "
            f"Checkpoint: {self.checkpoint_path}. Once every party serves again, continue with "
            f"`{self.resume_command()}`."
        )

    def _write_result(self, out: str | Path, result: dict[str, Any]) -> None:
        """Write the finished job's result; a failed write names what was kept and how to get
        the file (the parties have finished: the checkpoint's copy is the only one)."""
        try:
            write_json_atomic(out, result)
        except OSError as err:
            raise DpfedInputError(
                f"job {self.spec.id} finished, but writing its result to {str(out)!r} failed "
                f"({err.strerror or err}). Nothing was written there; the result is kept in the "
                f"leader's checkpoint {str(self.checkpoint_path)!r}. Once the cause is fixed, "
                f"`{self.resume_command()}` writes it (add another --out to write it elsewhere)."
            ) from None

    def resume_command(self) -> str:
        """The command that continues this job, as it can be pasted into a shell."""
        out = self.out if self.out is not None else Path("result.json")
        return (
            f"dpfed run --config {shlex.quote(str(Path(self.spec.path).resolve()))} "
            f"--out {shlex.quote(str(out.resolve()))} --resume"
        )

    # -- output -----------------------------------------------------------------------------
    def _bar(self) -> Any:
        if not self.progress or not sys.stderr.isatty():
            return None

        iterations = self.spec.params.get("iterations")
        return tqdm(total=iterations, desc=f"job {self.spec.id}", unit="round", leave=False)

    def _show(self, report: RoundReport, bar: Any) -> None:
        entry = self.history[report.round - 1]
        figures = {
            k: entry[k] for k in ("train_objective", "test_log_loss", "epsilon")
            if entry.get(k) is not None
        }
        if bar is not None:
            bar.update(1)
            bar.set_postfix({k: f"{v:.4g}" for k, v in figures.items()})
        elif self.progress and self._logs_round(report.round):
            shown = ", ".join(f"{k} {v:.6g}" for k, v in figures.items())
            self._log(f"round {report.round}: {shown}")

    def _logs_round(self, round: int) -> bool:
        """Whether a log (not a terminal's progress bar) shows ``round``: the first
        :data:`LOG_FIRST_ROUNDS`, then about :data:`LOG_LINES` lines over the job's rounds, and
        the last round."""
        total = self.spec.params.get("iterations")
        if round <= LOG_FIRST_ROUNDS or not isinstance(total, int) or round >= total:
            return True
        return round % max(1, math.ceil(total / LOG_LINES)) == 0

    @staticmethod
    def _log(text: str, level: int = logging.INFO) -> None:
        process_logger(__name__, LEADER).log(level, text)


def run_alignment(spec: JobSpec, *, progress: bool = True) -> dict[str, Any]:
    """Lead aligned job ``spec``'s alignment job (:mod:`dpfed.runtime.alignment`) to the end,
    or continue it, unless it has finished: its result (shared rows and digests, no ID),
    kept in the leader's checkpoint folder."""
    out = alignment_result_path(spec)
    if out.exists():
        return dict(json.loads(out.read_text()))
    aligning = alignment_spec(spec)
    leader = Leader(aligning, resume=(aligning.checkpoint / "leader.npz").exists(),
                    progress=progress)
    return leader.run(out)


def run_job(
    spec: JobSpec, out: str | Path, *, resume: bool = False, progress: bool = True
) -> dict[str, Any]:
    """``dpfed run``: lead ``spec`` to the end and write ``out`` (an aligned job's alignment
    job first, :func:`run_alignment`)."""
    if spec.align:
        run_alignment(spec, progress=progress)
    return Leader(spec, resume=resume, progress=progress).run(out)
