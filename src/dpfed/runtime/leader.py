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

A stopped job is resumed with ``dpfed run --resume``: the parties continue from their own
checkpoints, re-sending whatever was not acknowledged; nothing is handled twice.
"""

from __future__ import annotations

import hashlib
import json
import queue
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any, cast

import grpc
import numpy as np
from tqdm import tqdm

from dpfed import __version__
from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.runtime import wire
from dpfed.runtime.certs import TlsIdentity, load_identity
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint
from dpfed.runtime.control import (
    AbortJob,
    AccountRequest,
    BeginJob,
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
from dpfed.runtime.registry import JobRecord, RoundReport, get_protocol
from dpfed.runtime.transport import (
    Connection,
    Refused,
    RemoteError,
    connection_limit,
    serve,
)

#: Exit statuses of ``dpfed run`` besides 0 (done) and 2 (bad input or refused job).
EXIT_STOPPED = 1
#: ``dpfed run``'s status when a party was never reached (nothing ran, nothing to resume).
EXIT_UNREACHABLE = 4

_POLL = 0.25


class JobStopped(RuntimeError):
    """The job stopped (a party is gone, refused, or too slow); it can be resumed."""


class PartyUnreachable(RuntimeError):
    """A party never answered the job's opening: nothing ran, so there is nothing to resume."""


#: Seconds before the leader first says which parties it is still waiting for, and between
#: repeats.
WAITING_FIRST, WAITING_EVERY = 1.0, 10.0


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

    def __init__(self, spec: JobSpec, *, resume: bool = False, progress: bool = True) -> None:
        self.spec = spec
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
        self.protocol_done = False  # the last round's report has arrived
        self._load_or_check_checkpoint()

    # -- checkpoint -------------------------------------------------------------------------
    def _load_or_check_checkpoint(self) -> None:
        exists = self.checkpoint_path.exists()
        if not self.resume:
            if exists:
                _, state = load_checkpoint(self.checkpoint_path)
                if not state.get("finished"):
                    raise DpfedInputError(
                        f"job {self.spec.id} has a checkpoint at round {len(state['history'])} "
                        f"in {str(self.checkpoint_path)!r}; continue it with --resume, or remove "
                        "the checkpoint folder (and the parties' work folders) to start afresh."
                    )
                raise DpfedInputError(
                    f"job {self.spec.id} has already finished (see {str(self.checkpoint_path)!r});"
                    " give the job a new id to run it again."
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
            raise DpfedInputError(f"job {self.spec.id} has already finished; nothing to resume.")
        self.history = state["history"]
        self.inbound.load(state["inbound"])
        self.elapsed = float(state["seconds"])
        self.protocol_done = bool(state["protocol_done"])

    def _checkpoint(self) -> None:
        save_checkpoint(
            self.checkpoint_path, {},
            {
                "digest": self.spec.digest,
                "history": self.history,
                "inbound": self.inbound.state(),
                "seconds": self._seconds(),
                "finished": self.finished,
                "protocol_done": self.protocol_done,
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
            self.protocol_done = bool(report.finished)
            self.inbound.mark(peer, envelope.seq, digest)
            self._checkpoint()
        self.reports.put(report)

    @staticmethod
    def _refuse_control(payload: bytes, peer: str) -> bytes:
        raise Refused(grpc.StatusCode.PERMISSION_DENIED, "the leader takes no control requests")

    # -- the job ----------------------------------------------------------------------------
    def run(self, out: str | Path) -> dict[str, Any]:
        """Run (or resume) the job and write ``out``; return the result.

        Raises
        ------
        DpfedInputError
            A party refused the job (budget, job file, checkpoint); nothing ran.
        JobStopped
            The job stopped part-way; the parties keep their state for ``--resume``.
        """
        self.out = Path(out)
        server = serve(
            self.identity, self.spec.leader.bind,
            {"Deliver": self._deliver, "Control": self._refuse_control},
            max_bytes=self.spec.max_message_bytes,
            max_connections=connection_limit(len(self.spec.names) + 1),
        )
        try:
            infos = self._open_all()
            n_samples = {info["n_samples"] for info in infos.values()}
            if self.protocol.same_rows and len(n_samples) != 1:
                self._broadcast(
                    AbortJob, reason="the parties hold different numbers of rows",
                    retry_for=self.spec.round_timeout,
                )
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
            for name in self.spec.names:
                self._control(name, BeginJob)
            if self.protocol.report is not None:
                self._follow()
            else:
                self._follow_status()
            accounts = {name: self._control(name, AccountRequest) for name in self.spec.names}
            record = JobRecord(
                history=self.history, accounts=accounts,
                n_samples={name: int(info["n_samples"]) for name, info in infos.items()},
                evaluate=self._evaluate, seconds=self._seconds(),
            )
            result = self.protocol.result(self.spec, record)
            for name in self.spec.names:
                self._control(name, FinishJob)
            if self.spec.simulation:
                result = with_simulation(result, SIMULATION_WARNING)
            with self.lock:
                self.finished = True
                self._checkpoint()
            write_json_atomic(out, result)
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

    def _broadcast(self, op: type[ControlRequest], *, retry_for: float = 0.0,
                   **fields: Any) -> None:
        """Send ``op`` to every party that answers; a party that is not serving yet is tried
        again for ``retry_for`` seconds, then left alone."""
        deadline = time.monotonic() + retry_for
        pending = list(self.spec.names)
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

    def _open_all(self) -> dict[str, dict[str, Any]]:
        infos: dict[str, dict[str, Any]] = {}
        started = time.monotonic()
        next_word = started + WAITING_FIRST
        names = sorted(self.spec.names)
        for name in names:
            deadline = time.monotonic() + self.spec.round_timeout
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
                try:
                    infos[name] = self._control(
                        name, OpenJob, digest=self.spec.digest, resume=self.resume,
                        version=__version__, kinds=kinds_fingerprint(self.protocol.messages),
                        keys=json.dumps(self.spec.key_digests(), sort_keys=True),
                    )
                    break
                except RemoteError as exc:
                    # retry while the party is not serving yet; never re-send an open that
                    # may still be running
                    starting = exc.code == grpc.StatusCode.UNAVAILABLE
                    if starting and time.monotonic() < deadline:
                        time.sleep(0.2)
                        continue
                    # every party of a job that cannot start stops, and frees its reservation;
                    # one never reached is not waited for again
                    never = starting
                    self._broadcast(
                        AbortJob, reason=f"{name} could not open the job",
                        retry_for=0.0 if never else self.spec.round_timeout,
                    )
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
                    continue
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
        reply = self._control(name, EvaluateRequest, models=np.asarray(models, dtype=np.float64))
        return [float(v) for v in reply["losses"]]

    def _follow_status(self) -> None:
        """Follow a job without round reports: poll until every party has finished."""
        unreachable: dict[str, float] = {}
        last_round, last_progress = -1, time.monotonic()
        while True:
            statuses = self._poll(unreachable)
            if statuses and len(statuses) == len(self.spec.names):
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
                    f"{self.spec.round_timeout:g} s (parties: {self._rounds()})"
                )
            time.sleep(_POLL)

    def _poll(self, unreachable: dict[str, float]) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        statuses: dict[str, dict[str, Any]] = {}
        for name in self.spec.names:
            try:
                status = self._control(name, StatusRequest, timeout=min(2.0, self.spec.grace))
            except RemoteError as exc:
                if not exc.retryable:
                    self._stop(f"party {name!r} failed: {exc.details}")
                since = unreachable.setdefault(name, now)
                if now - since > self.spec.grace:
                    self._stop(
                        f"party {name!r} is unreachable (for {now - since:.1f} s; grace "
                        f"{self.spec.grace:g} s)"
                    )
                continue
            unreachable.pop(name, None)
            statuses[name] = status
            for link in status["links"].values():
                if link["refused"]:
                    self._stop(f"party {name!r} reports: {link['refused']}")
        return statuses

    def _rounds(self) -> str:
        parts = []
        for name in self.spec.names:
            try:
                status = self._control(name, StatusRequest, timeout=1.0)
                parts.append(f"{name} at round {status['round']}")
            except RemoteError:
                parts.append(f"{name} unreachable")
        return ", ".join(parts)

    def _stop(self, why: str) -> None:
        self._broadcast(SuspendJob, reason=why)
        raise JobStopped(
            f"job {self.spec.id} stopped in round {len(self.history) + 1}: {why}. "
            f"Checkpoint: {self.checkpoint_path}. Once every party serves again, continue with "
            f"`{self.resume_command()}`."
        )

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
        elif self.progress:
            shown = ", ".join(f"{k} {v:.6g}" for k, v in figures.items())
            self._log(f"round {report.round}: {shown}")

    @staticmethod
    def _log(text: str) -> None:
        process_logger(__name__, LEADER).info(text)


def run_job(
    spec: JobSpec, out: str | Path, *, resume: bool = False, progress: bool = True
) -> dict[str, Any]:
    """``dpfed run``: lead ``spec`` to the end and write ``out``."""
    return Leader(spec, resume=resume, progress=progress).run(out)
