"""One party of a networked job, serving in its own process: ``dpfed party``.

The party hosts its protocol role behind a gRPC server (mutual TLS, see
:mod:`dpfed.runtime.transport`). What it does with each message, in this order:

1. check the connection's certificate names a party of the job and the message's sender;
2. decode and validate the message (:mod:`dpfed.runtime.wire`: job, size, dtype, shape,
   finite values) and its number on the sender's link (:mod:`dpfed.runtime.links`);
3. hand it to the role (which refuses anything its protocol does not expect at this stage);
4. append the message to its journal (:mod:`dpfed.runtime.journal`);
5. record every noisy release the role made in the privacy-budget ledger (write-ahead:
   before anything leaves the party; a release the job did not reserve is refused);
6. acknowledge, and queue the role's messages on the links to their recipients.

Now and then, while nothing it sent waits for an acknowledgement, the party snapshots its
state and empties the journal. A restarted party loads its snapshot and replays its journal;
roles are deterministic, so it reproduces the same messages and releases (the ledger checks
each replayed release against the recorded one and refuses a different one).

A refused message changes nothing and is answered with an error naming the reason; the party
keeps serving. The leader drives the job through ``Control`` requests (open, begin, close
submissions, status, finish, suspend, abort); nobody else may send them.

Exact disclosure is the party's own decision. The job file is written by the leader, so a key
in it can ask for values computed exactly from a party's rows (``[job].evaluate = "full"``,
``[job].predict_training_rows = true``) but cannot grant them: a party with a privacy budget
on its data refuses both unless its own command line allows exact disclosure
(``dpfed party --allow-exact-disclosure``, ``allow_exact_disclosure`` here). It refuses
``evaluate = "full"`` when the job opens, before it reserves or releases anything.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import numpy as np

from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.core.threads import vector_work
from dpfed.runtime import wire
from dpfed.runtime.alignment import alignment_job_id
from dpfed.runtime.budget import BudgetLedger
from dpfed.runtime.certs import load_identity
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint
from dpfed.runtime.control import (
    AbortJob,
    AccountRequest,
    BeginJob,
    CloseSubmissions,
    ControlRequest,
    EndPrediction,
    EvaluateRequest,
    FinishJob,
    OpenJob,
    OpenPrediction,
    PredictionStatus,
    PredictRequest,
    StatusRequest,
    SuspendJob,
    check_open,
)
from dpfed.runtime.jobfile import LEADER, SIMULATION_WARNING, JobSpec
from dpfed.runtime.jobspec import differing_keys
from dpfed.runtime.journal import Journal
from dpfed.runtime.links import InboundLinks, OutboundLink, received_frames
from dpfed.runtime.logs import process_logger
from dpfed.runtime.messages import Message, ProtocolError
from dpfed.runtime.party_prediction import PredictionDesk
from dpfed.runtime.private_files import private_folder
from dpfed.runtime.registry import build_host, get_protocol
from dpfed.runtime.transport import Connection, Refused, connection_limit, serve

#: Exit statuses of ``dpfed party``.
EXIT_FINISHED, EXIT_ABORTED, EXIT_IDLE = 0, 1, 3

#: A snapshot is taken (when nothing sent awaits an acknowledgement) once the journal holds
#: this many records or bytes.
SNAPSHOT_RECORDS, SNAPSHOT_BYTES = 64, 64 * 2**20


def _log(name: str, text: str, level: int = logging.INFO) -> None:
    process_logger(__name__, name).log(level, text)


class PartyNode:
    """Serve party ``name`` of ``spec`` until the job ends.

    On start it loads its data and builds its role; if its work folder holds a checkpoint of
    this job it restores it (a restarted party rejoins where it stopped).

    Parameters
    ----------
    spec : JobSpec
    name : str
        The party this process serves.
    allow_exact_disclosure : bool
        The party's own policy (its command line, not the job file): whether it may send
        values computed exactly from its rows, which no epsilon covers, although its ledger
        holds a privacy budget on them (``[job].evaluate = "full"``, the scores of its
        training rows under ``[job].predict_training_rows = true``). A party without a budget
        needs no permission; one with a budget refuses such jobs and predictions without it.
    """

    def __init__(self, spec: JobSpec, name: str, *, allow_exact_disclosure: bool = False) -> None:
        self.spec = spec
        self.name = name
        self.allow_exact_disclosure = allow_exact_disclosure
        self.party = spec.party(name)
        self.identity = load_identity(self.party.certificate, self.party.key, spec.ca)
        if self.identity.name != name:
            raise DpfedInputError(
                f"the certificate {str(self.party.certificate)!r} is issued to "
                f"{self.identity.name!r}, not to party {name!r}."
            )
        # the work folder holds the party's noise secret, journal and state: owner-only
        private_folder(self.party.workdir)
        private_folder(self.party.workdir / spec.id)
        self.host = build_host(spec, name)
        self.lock = threading.RLock()
        self.inbound = InboundLinks()
        peers = [n for n in [*spec.names, LEADER] if n != name]
        self.links = {
            peer: OutboundLink(
                Connection(
                    self.identity, peer, spec.endpoint(peer).address,
                    max_bytes=spec.max_message_bytes,
                ),
                call_timeout=spec.round_timeout,
                max_bytes=spec.max_message_bytes,
                on_refused=lambda peer, why: _log(self.name, why, logging.WARNING),
            )
            for peer in peers
        }
        self.folder = self.party.workdir / spec.id
        self.checkpoint_path = self.folder / "state.npz"
        self.opened = False
        self.begun = False
        self.ledger: BudgetLedger | None = None
        self._epsilon_cache: tuple[int, float] | None = None  # (releases, epsilon)
        self.done = threading.Event()
        self.exit_code = EXIT_FINISHED
        self.exit_message = ""
        self.last_contact = time.monotonic()
        self.refusals = 0
        self.counter = 0  # inputs handled since the job began (messages and the begin)
        self.snapshot_counter = 0
        self.journal = Journal(self.folder / "journal.bin", fsync=spec.fsync)
        # a finished job's party serves predictions with its part of the model
        self.predictions = PredictionDesk(
            spec, name, self.host, self.identity, self.folder,
            allow_exact_disclosure=allow_exact_disclosure, budgeted=self._budgeted)
        self.restored = self.checkpoint_path.exists() or self.journal.size() > 0
        if self.restored:
            self._restore()

    # -- lifecycle --------------------------------------------------------------------------
    def serve(self) -> int:
        """Serve until the job finishes, is aborted, or the leader is gone too long."""
        server = serve(
            self.identity, self.party.bind,
            {"Deliver": self._deliver, "Control": self._control},
            max_bytes=self.spec.max_message_bytes,
            max_connections=connection_limit(len(self.spec.names) + 1),
        )
        self.start()
        drain = False
        try:
            while not self.done.wait(0.2):
                if self.idle_expired():
                    break
            drain = True
        finally:
            self.close(drain=drain, server=server)
        return self.exit_code

    def start(self) -> None:
        """Say what is served and start the outbound links (the server is the caller's)."""
        what = f"restored at round {self.host.round}" if self.restored else "ready"
        if self.restored and self.host.finished:
            what = "finished: serving predictions with its part of the model (dpfed predict)"
        _log(self.name, f"serving job {self.spec.id} on {self.party.address} ({what})")
        if self.spec.simulation:
            _log(self.name, f"SIMULATION, seed {self.spec.params['seed']}: {SIMULATION_WARNING}")
        for link in self.links.values():
            link.start()

    def idle_expired(self) -> bool:
        """Whether the leader has been silent longer than ``[job].idle_timeout`` (then the exit
        code and message say so)."""
        if time.monotonic() - self.last_contact <= self.spec.idle_timeout:
            return False
        self.exit_code = EXIT_IDLE
        self.exit_message = (
            f"no word from the leader for {self.spec.idle_timeout:g} s; stopping "
            f"(state kept in {self.folder})"
        )
        return True

    def close(self, *, drain: bool = True, server: Any = None) -> None:
        """Let the links hand over what is still queued (the final report, say) when
        ``drain``, then stop them (and ``server``, this node's own), and close the ledger and
        the journal once no request is being handled."""
        try:
            deadline = time.monotonic() + 2.0
            while drain and time.monotonic() < deadline and not all(
                link.idle() or link.refused for link in self.links.values()
            ):
                time.sleep(0.02)
        finally:
            self.predictions.stop()
            for link in self.links.values():
                link.stop()
            if server is not None:
                server.stop(grace=0.5).wait()
            with self.lock:
                if self.ledger is not None:
                    self.ledger.close()
                self.journal.close()
        if self.exit_message:
            _log(self.name, self.exit_message)

    # -- data plane -------------------------------------------------------------------------
    def _deliver(self, payload: bytes, peer: str) -> bytes:
        try:
            for frame in received_frames(payload, max_bytes=self.spec.max_message_bytes):
                self._deliver_checked(frame, peer)
            return b"ok"
        except Refused as exc:
            self.refusals += 1
            _log(self.name, f"refused a message from {peer}: {exc}", logging.WARNING)
            raise

    def _deliver_checked(self, payload: memoryview, peer: str) -> None:
        if peer not in self.spec.names and peer != LEADER:
            raise Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{peer!r} is not a party of job {self.spec.id} (parties: {self.spec.names})",
            )
        try:
            envelope = wire.decode(payload, job=self.spec.id, max_bytes=self.spec.max_message_bytes)
        except wire.WireError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        message = envelope.message
        if isinstance(message, ControlRequest):
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{type(message).__name__} is a control request: only the leader sends it, "
                "through Control",
            )
        if message.sender != peer:
            raise Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"the message claims to come from {message.sender!r} but the connection is "
                f"{peer!r}'s",
            )
        if message.recipient != self.name:
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the message is addressed to {message.recipient!r}, not to {self.name!r}",
            )
        sha = hashlib.sha256(payload).digest()
        if self.predictions.takes(message):
            with self.lock:
                self.predictions.take(message, sha)
                self.last_contact = time.monotonic()
            return
        digest = sha.hex()
        with self.lock:
            if not self.opened and not self.begun:
                raise Refused(grpc.StatusCode.UNAVAILABLE, "the job is not open yet")
            if not self.inbound.is_new(peer, envelope.seq, digest):
                return  # a repeat of a handled message: acknowledge again
            self._maybe_snapshot()
            n_events = len(self.host.events)
            try:
                out = self.host.handle(message)  # refuses before changing anything
            except (ProtocolError, DpfedInputError) as exc:
                raise Refused(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None
            self.counter += 1
            self.journal.append(b"M", self.counter, payload, sha256=sha)
            self.inbound.mark(peer, envelope.seq, digest)
            self._emit(out, n_events)
            self.last_contact = time.monotonic()

    def _emit(self, messages: Sequence[Message], n_events: int) -> None:
        """Record the releases (write-ahead), then queue ``messages`` (caller holds the lock)."""
        encoded = []
        for m in messages:
            link = self.links[m.recipient]
            seq = link.reserve()
            encoded.append((link, seq, wire.encode(m, job=self.spec.id, seq=seq,
                                                   max_bytes=self.spec.max_message_bytes)))
        new_events = self.host.events[n_events:]
        if new_events and not self.spec.simulation:  # a simulation has nothing to account
            if self.ledger is None:
                raise RuntimeError("a release before the job was opened in the ledger")
            digest = hashlib.sha256(b"".join(p for _, _, p in encoded)).hexdigest()
            self.ledger.record(self.spec.id, new_events, digest=digest)
        for link, seq, payload in encoded:
            link.push(seq, payload)

    # -- snapshots and the journal ----------------------------------------------------------
    def _maybe_snapshot(self) -> None:
        """Snapshot if the journal is long and nothing sent awaits an acknowledgement."""
        since = self.counter - self.snapshot_counter
        if since < SNAPSHOT_RECORDS and self.journal.size() < SNAPSHOT_BYTES:
            return
        if not all(link.idle() for link in self.links.values()):
            return
        self.snapshot()

    def snapshot(self, *, truncate: bool = True) -> None:
        """Write the state (no message may be pending) and empty the journal (unless
        ``truncate`` is False: a restart replays only the records after the snapshot)."""
        arrays, meta = self.host.state_dict()
        state = {
            "digest": self.spec.digest,
            "counter": self.counter,
            "role": meta,
            "inbound": self.inbound.state(),
            "links": {peer: link.state() for peer, link in self.links.items()},
            "begun": self.begun,
        }
        save_checkpoint(
            self.checkpoint_path, {f"role/{k}": v for k, v in arrays.items()}, state,
            fsync=self.spec.fsync,
        )
        if truncate:
            self.journal.truncate()
        self.snapshot_counter = self.counter

    def _restore(self) -> None:
        """Load the snapshot (if any) and replay the journal after it."""
        if self.checkpoint_path.exists():
            arrays, state = load_checkpoint(self.checkpoint_path)
            if state.get("digest") != self.spec.digest:
                raise DpfedInputError(
                    f"the checkpoint {str(self.checkpoint_path)!r} belongs to another version of "
                    f"job {self.spec.id} (the job file changed); remove {self.folder} to start "
                    "afresh."
                )
            self.host.load_state_dict(
                {k[5:]: v for k, v in arrays.items() if k.startswith("role/")}, state["role"]
            )
            self.inbound.load(state["inbound"])
            for peer, link in self.links.items():
                link.load(state["links"][peer], [])
            self.begun = bool(state["begun"])
            self.counter = self.snapshot_counter = int(state["counter"])
        if not self.host.exact_release and not self.spec.simulation:
            # the job was opened in the ledger before anything was journaled
            self.ledger = BudgetLedger(self.party.ledger)
        for kind, counter, payload in self.journal.records(after=self.counter):
            n_events = len(self.host.events)
            if kind == b"B":
                self.begun = True
                out = self.host.start()
            elif kind == b"C":
                out = self.host.close()
            else:
                envelope = wire.decode(payload, job=self.spec.id,
                                       max_bytes=self.spec.max_message_bytes)
                sender = envelope.message.sender
                digest = hashlib.sha256(payload).hexdigest()
                if not self.inbound.is_new(sender, envelope.seq, digest):
                    continue
                out = self.host.handle(envelope.message)
                self.inbound.mark(sender, envelope.seq, digest)
            self.counter = counter
            self._emit(out, n_events)

    # -- control plane ----------------------------------------------------------------------
    def _control(self, payload: bytes, peer: str) -> bytes:
        try:
            return self._control_checked(payload, peer)
        except Refused as exc:
            _log(self.name, f"refused a control request from {peer}: {exc}", logging.WARNING)
            raise

    def _control_checked(self, payload: bytes, peer: str) -> bytes:
        if peer != LEADER:
            raise Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"only the leader may control a job. Found {peer!r}",
            )
        try:
            envelope = wire.decode(payload, max_bytes=self.spec.max_message_bytes)
        except wire.WireError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                          f"not a control request: {exc}") from None
        request = envelope.message
        if envelope.job != self.spec.id:
            if self.spec.id == alignment_job_id(envelope.job):
                # the aligned job itself, which this process serves next: not up yet
                raise Refused(grpc.StatusCode.UNAVAILABLE,
                              f"{self.name} is finishing job {envelope.job}'s alignment")
            raise Refused(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{self.name} serves job {self.spec.id!r}. Found {envelope.job!r}",
            )
        handlers: dict[type, Callable[[Any], dict[str, Any]]] = {
            OpenJob: self._open,
            BeginJob: self._begin,
            CloseSubmissions: self._close,
            StatusRequest: self._status,
            FinishJob: self._finish,
            AccountRequest: self._account,
            EvaluateRequest: self._evaluate,
            SuspendJob: self._suspend,
            AbortJob: self._abort,
            OpenPrediction: self._open_prediction,
            PredictRequest: self.predictions.predict,
            PredictionStatus: self.predictions.status,
            EndPrediction: self._end_prediction,
        }
        handler = handlers.get(type(request))
        if handler is None or request.sender != LEADER or request.recipient != self.name:
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"expected a control request from the leader to {self.name}. Found "
                f"{type(request).__name__} from {request.sender!r} to {request.recipient!r}",
            )
        self.last_contact = time.monotonic()
        with self.lock:
            try:
                reply = handler(request)
            except DpfedInputError as exc:
                raise Refused(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None
        return json.dumps(reply).encode()

    def _check_job_file(self, request: OpenJob | OpenPrediction) -> None:
        """Refuse a leader whose job file differs, naming the keys where it does."""
        if request.digest != self.spec.digest:
            try:
                theirs = json.loads(request.keys)
            except ValueError:
                theirs = {}
            where = differing_keys(self.spec.key_digests(), theirs) if theirs else []
            raise DpfedInputError(
                f"{self.name}'s job file differs from the leader's"
                + (f" at {', '.join(where)}" if where else
                   " (job, parameters, parties or addresses)")
                + "; every process must run the same job file."
            )

    def _open(self, request: OpenJob) -> dict[str, Any]:
        check_open(request, get_protocol(self.spec.protocol).messages, self.name)
        self._check_job_file(request)
        resume = request.resume
        if self.begun and not resume:
            raise DpfedInputError(
                f"{self.name} holds a checkpoint of job {self.spec.id} at round "
                f"{self.host.round}; continue it with the leader's `dpfed run --config "
                f"{self.spec.path} --out RESULT --resume` (RESULT: the stopped run's --out), "
                f"or remove {self.folder} to start afresh."
            )
        if not self.opened:
            if self.ledger is not None:
                self.ledger.close()
                self.ledger = None  # a refusal below must not leave a closed ledger attached
            self._open_budget()
            self.opened = True
        reply = self.host.describe() | {
            "round": self.host.round,
            "begun": self.begun,
            "planned_releases": len(self.host.plan),
        }
        return reply

    def _open_budget(self) -> None:
        party, host = self.party, self.host
        if not host.holds_data:
            return  # e.g. a consensus server: nothing of its own to protect
        if self.spec.simulation:
            if party.budget is not None or self._stored_budget() is not None:
                raise DpfedInputError(
                    f"job {self.spec.id} is a simulation ([job].simulation = true): every "
                    "party's noise comes from [params].seed, which every party holds, so it "
                    f"protects nothing; {self.name} has a privacy budget on {party.dataset!r} "
                    "and refuses to run it. Leave the seed out to run a private job."
                )
            return  # no privacy to account: nothing enters the ledger
        if not host.ledger_support and not host.exact_release:
            if party.budget is not None or self._stored_budget() is not None:
                reason = host.ledger_refusal
                raise DpfedInputError(
                    f"job {self.spec.id}: {reason}; {self.name} refuses to run it against "
                    f"{party.dataset!r}, which has a privacy budget."
                )
            return
        if host.exact_release:
            if self._stored_budget() is not None or party.budget is not None:
                raise DpfedInputError(
                    f"job {self.spec.id} would release {self.name}'s data on {party.dataset!r} "
                    f"without noise (mechanism {self.spec.params.get('mechanism', 'none')!r}), "
                    "but that data set has a privacy budget."
                )
            return
        if self.spec.evaluate == "full" and not self.allow_exact_disclosure and self._budgeted():
            # before the ledger is touched: nothing is reserved, nothing recorded
            raise DpfedInputError(
                f'job {self.spec.id} has [job].evaluate = "full": {self.name} would send values '
                f"computed exactly from its rows of {party.dataset!r} (exact training scores or "
                "losses, which no epsilon covers), but it has a privacy budget on that data set "
                "and its own configuration does not allow exact disclosure (the job file cannot "
                'grant it). Run the job with evaluate = "test" or "none", or start '
                f"{self.name} with `dpfed party --allow-exact-disclosure` if its own policy "
                "allows it."
            )
        ledger = BudgetLedger(party.ledger)
        try:
            self._reserve(ledger)
        except BaseException:
            ledger.close()
            raise
        self.ledger = ledger

    def _budgeted(self) -> bool:
        """Whether this party has a privacy budget on its data set (in the job file or its
        ledger)."""
        return self.party.budget is not None or self._stored_budget() is not None

    def _stored_budget(self) -> tuple[float, float] | None:
        """The ledger's budget on this data set, without creating a ledger to look."""
        if not self.party.ledger.exists():
            return None
        with BudgetLedger(self.party.ledger) as ledger:
            return ledger.budget(self.party.dataset, self.name)

    def _reserve(self, ledger: BudgetLedger) -> None:
        """Check the budget and reserve this job's releases (one transaction)."""
        party, host = self.party, self.host
        stored = ledger.budget(party.dataset, self.name)
        if stored is None:
            if party.budget is None:
                raise DpfedInputError(
                    f"no privacy budget is set for {self.name} on {party.dataset!r}: give the "
                    "party a budget in the job file or run `dpfed budget set`."
                )
            ledger.set_budget(party.dataset, self.name, party.budget.epsilon, party.budget.delta)
        elif party.budget is not None and (party.budget.epsilon, party.budget.delta) != stored:
            raise DpfedInputError(
                f"the job file gives {self.name} the budget epsilon={party.budget.epsilon}, "
                f"delta={party.budget.delta} on {party.dataset!r}, but the ledger holds "
                f"epsilon={stored[0]}, delta={stored[1]}; change it with `dpfed budget set`."
            )
        ledger.open_job(self.spec.id, party.dataset, self.name, host.plan,
                        rows=host.rows_digest)

    def _begin(self, request: BeginJob) -> dict[str, Any]:
        if not self.opened:
            raise DpfedInputError("begin before open")
        if not self.begun:
            self.begun = True
            n_events = len(self.host.events)
            out = self.host.start()
            self.counter += 1
            self.journal.append(b"B", self.counter, b"")
            self._emit(out, n_events)
        for link in self.links.values():
            if link.refused:
                link.refused = None  # the leader resumes after a refusal was dealt with
        return {"round": self.host.round}

    def _close(self, request: CloseSubmissions) -> dict[str, Any]:
        """The submission deadline passed: the host stops waiting for missing inputs. The
        close is journaled like a message, so a restarted party closes again on replay."""
        if not self.begun:
            raise DpfedInputError(
                f"{self.name} cannot close the submissions of job {self.spec.id}: it has not "
                "begun."
            )
        n_events = len(self.host.events)
        out = self.host.close()  # refuses before changing anything
        self.counter += 1
        self.journal.append(b"C", self.counter, b"")
        self._emit(out, n_events)
        _log(self.name, f"submissions closed by the leader (the submission deadline passed); "
                        f"{len(out)} messages follow")
        return {"round": self.host.round, "finished": self.host.finished}

    def _status(self, request: StatusRequest) -> dict[str, Any]:
        return {
            "round": self.host.round,
            "finished": self.host.finished,
            "refusals": self.refusals,
            "links": {peer: link.status() for peer, link in self.links.items()},
            "epsilon": self._job_epsilon(),
        }

    def _job_epsilon(self) -> float | None:
        """What this job has spent so far on the party's budget (its ledger's accountant at
        the budget's delta), or None without a ledger. A function of the job's public
        parameters and round, so telling the leader widens nothing; recomputed only when a
        release was recorded since the last answer."""
        if self.ledger is None:
            return None
        releases = len(self.host.events)
        if self._epsilon_cache is None or self._epsilon_cache[0] != releases:
            epsilon = self.ledger.spent_epsilon(self.party.dataset, self.name,
                                                job_id=self.spec.id)
            self._epsilon_cache = (releases, epsilon)
        return self._epsilon_cache[1]

    def _account(self, request: AccountRequest) -> dict[str, Any]:
        """The party's public account of a finished job (its releases, what evaluation needs)."""
        if not self.host.finished:
            raise DpfedInputError(f"{self.name} has not finished (round {self.host.round}).")
        return self.host.final()

    def _evaluate(self, request: EvaluateRequest) -> dict[str, Any]:
        """The party's mean training loss at each model it is sent (evaluation after training).

        These losses are exact functions of the party's rows, covered by no epsilon, so they
        are answered only when the job file asks for them (``[job].evaluate = "full"``), only
        after training, and only once: the answer is recorded in the job folder and a repeat
        of the same request (a resumed leader) gets the same answer; any other is refused.
        """
        if self.spec.evaluate != "full":
            raise DpfedInputError(
                f"job {self.spec.id} has [job].evaluate = {self.spec.evaluate!r}: {self.name} "
                "sends no losses computed from its training rows (exact values that no epsilon "
                'covers); the job file must ask for them with evaluate = "full".'
            )
        if not self.allow_exact_disclosure and self.host.holds_data and self._budgeted():
            raise DpfedInputError(
                f"{self.name} has a privacy budget on {self.party.dataset!r} and its own "
                "configuration does not allow exact disclosure: it sends no exact training "
                'losses ([job].evaluate = "full"; start it with `dpfed party '
                "--allow-exact-disclosure` if its own policy allows it)."
            )
        if not self.host.finished:
            raise DpfedInputError(
                f"{self.name} evaluates only after training. It is at round {self.host.round}."
            )
        array = np.asarray(request.models, dtype=np.float64)
        if array.ndim != 2:
            raise DpfedInputError(
                f"evaluate needs a matrix of models, one per row. Found shape {array.shape}."
            )
        digest = hashlib.sha256(array.tobytes() + repr(array.shape).encode()).hexdigest()
        record_path = self.folder / "evaluation.json"
        if record_path.exists():
            record = json.loads(record_path.read_text())
            if record.get("models") != digest:
                raise DpfedInputError(
                    f"{self.name} has already disclosed its training losses of job "
                    f"{self.spec.id} once (recorded in {record_path}); it answers no other "
                    "evaluation."
                )
            return {"losses": record["losses"]}
        try:
            losses = self.host.losses(array.tolist())
        except ValueError as exc:
            raise DpfedInputError(f"evaluate: {exc}") from None
        write_json_atomic(record_path, {"job": self.spec.id, "models": digest,
                                        "n_models": int(array.shape[0]), "losses": losses})
        _log(self.name, f"disclosed its exact mean training loss at {array.shape[0]} models to "
                        'the leader ([job].evaluate = "full"); recorded in ' + str(record_path))
        return {"losses": losses}

    def _finish(self, request: FinishJob) -> dict[str, Any]:
        if not self.host.finished:
            raise DpfedInputError(f"{self.name} has not finished (round {self.host.round}).")
        model_path = self.folder / "model.json"
        # the final state, so that a restart serves predictions without replaying the journal
        # (whose releases the ledger has closed); the journal stays as the record of the job
        self.snapshot(truncate=False)
        write_json_atomic(model_path, {
            "job": self.spec.id, "party": self.name,
            "columns": None if self.party.columns is None else list(self.party.columns),
            "rows": None if self.party.rows is None else list(self.party.rows),
            "coef": self.host.model(),
            **self.host.model_details(),
        })
        if self.ledger is not None:
            self.ledger.close_job(self.spec.id, self.name)
        self.host.discard_replay_files()  # the final state is saved: no replay needs them
        self._stop(EXIT_FINISHED, f"job {self.spec.id} finished; model in {model_path}")
        return self.host.final() | {"model": str(model_path)}

    def _suspend(self, request: SuspendJob) -> dict[str, Any]:
        _log(self.name, f"job suspended by the leader: {request.reason}; state kept, waiting "
                        "for the leader's `dpfed run ... --resume`")
        self.opened = False
        return {"round": self.host.round}

    def _abort(self, request: AbortJob) -> dict[str, Any]:
        released = bool(self.host.events)
        freed = False
        if self.opened and self.ledger is not None and not released:
            # nothing spent: withdraw the reservation, so that the same job can run again
            self.ledger.withdraw_job(self.spec.id, self.name, reason=request.reason)
            freed = True
        if self.begun:
            message = (f"job {self.spec.id} not continued: {request.reason}; its state is kept "
                       f"in {self.folder} for the leader's `dpfed run ... --resume`")
        else:
            message = (f"job {self.spec.id} aborted before it began: {request.reason}; nothing "
                       "ran" + ("; its budget reservation is withdrawn and the job can run "
                                "again" if freed else ""))
        self._stop(EXIT_ABORTED, message)
        return {"released": released}

    # -- prediction with the trained model ---------------------------------------------------
    def _open_prediction(self, request: OpenPrediction) -> dict[str, Any]:
        self._check_job_file(request)
        return self.predictions.open(request)

    def _end_prediction(self, request: EndPrediction) -> dict[str, Any]:
        self.predictions.stop()
        self._stop(EXIT_FINISHED, f"prediction over: {request.reason}")
        return {}

    def _stop(self, code: int, message: str) -> None:
        self.exit_code, self.exit_message = code, message
        threading.Timer(0.1, self.done.set).start()


@vector_work
def run_party(spec: JobSpec, name: str, *, allow_exact_disclosure: bool = False) -> int:
    """``dpfed party``: build party ``name`` and serve it; returns the exit status.

    ``allow_exact_disclosure``: the party's own policy, see :class:`PartyNode`."""
    node = PartyNode(spec, name, allow_exact_disclosure=allow_exact_disclosure)
    return node.serve()


__all__ = ["EXIT_ABORTED", "EXIT_FINISHED", "EXIT_IDLE", "PartyNode", "run_party"]
