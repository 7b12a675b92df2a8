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
from typing import Any

import grpc

from dpfed._validation import DpfedInputError
from dpfed.core.threads import vector_work
from dpfed.runtime import wire
from dpfed.runtime.budget import BudgetLedger
from dpfed.runtime.certs import load_identity
from dpfed.runtime.control import BeginJob, CloseSubmissions, ControlRequest, OpenJob
from dpfed.runtime.jobfile import LEADER, SIMULATION_WARNING, JobSpec
from dpfed.runtime.journal import Journal
from dpfed.runtime.links import InboundLinks, OutboundLink, received_frames
from dpfed.runtime.party_budget import PartyBudget
from dpfed.runtime.party_control import PartyControl
from dpfed.runtime.party_job import SNAPSHOT_BYTES as SNAPSHOT_BYTES
from dpfed.runtime.party_job import SNAPSHOT_RECORDS as SNAPSHOT_RECORDS
from dpfed.runtime.party_job import PartyJob
from dpfed.runtime.party_prediction import PredictionDesk
from dpfed.runtime.party_process import EXIT_ABORTED, EXIT_FINISHED, EXIT_IDLE, party_log
from dpfed.runtime.private_files import private_folder
from dpfed.runtime.registry import build_host
from dpfed.runtime.transport import Connection, Refused, connection_limit, serve


class PartyNode:
    """Serve party ``name`` of ``spec`` until the job ends.

    On start it loads its data and builds its role; if its work folder holds a checkpoint of
    this job it restores it (a restarted party rejoins where it stopped). The node serves and
    checks the messages; its collaborators run the job (:class:`PartyJob`: lifecycle, journal,
    snapshots), its budget (:class:`PartyBudget`), the leader's control requests
    (:class:`PartyControl`) and predictions (:class:`PredictionDesk`).

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
                    self.identity,
                    peer,
                    spec.endpoint(peer).address,
                    max_bytes=spec.max_message_bytes,
                ),
                call_timeout=spec.round_timeout,
                max_bytes=spec.max_message_bytes,
                on_refused=lambda peer, why: party_log(self.name, why, logging.WARNING),
            )
            for peer in peers
        }
        self.folder = self.party.workdir / spec.id
        self.budget = PartyBudget(
            spec, self.party, self.host, allow_exact_disclosure=allow_exact_disclosure
        )
        self.job = PartyJob(spec, self.host, self.links, self.inbound, self.budget, self.folder)
        self.checkpoint_path = self.job.checkpoint_path
        self.journal: Journal = self.job.journal
        self.done = threading.Event()
        self.exit_code = EXIT_FINISHED
        self.exit_message = ""
        self.last_contact = time.monotonic()
        self.refusals = 0
        # a finished job's party serves predictions with its part of the model
        self.predictions = PredictionDesk(
            spec,
            name,
            self.host,
            self.identity,
            self.folder,
            allow_exact_disclosure=allow_exact_disclosure,
            budgeted=self.budget.budgeted,
        )
        self.control = PartyControl(
            spec,
            self.party,
            self.host,
            self.links,
            self.job,
            self.budget,
            self.predictions,
            allow_exact_disclosure=allow_exact_disclosure,
            refusals=lambda: self.refusals,
            stop=self._stop,
        )
        self.restored = self.job.saved()
        if self.restored:
            self.job.restore()

    # -- the state of its collaborators -------------------------------------------------------
    @property
    def opened(self) -> bool:
        """Whether the leader has opened the job (:attr:`PartyJob.opened`)."""
        return self.job.opened

    @opened.setter
    def opened(self, value: bool) -> None:
        self.job.opened = value

    @property
    def begun(self) -> bool:
        """Whether the role has started (:attr:`PartyJob.begun`)."""
        return self.job.begun

    @begun.setter
    def begun(self, value: bool) -> None:
        self.job.begun = value

    @property
    def counter(self) -> int:
        """Inputs handled since the job began (:attr:`PartyJob.counter`)."""
        return self.job.counter

    @counter.setter
    def counter(self, value: int) -> None:
        self.job.counter = value

    @property
    def snapshot_counter(self) -> int:
        """The counter at the last snapshot (:attr:`PartyJob.snapshot_counter`)."""
        return self.job.snapshot_counter

    @snapshot_counter.setter
    def snapshot_counter(self, value: int) -> None:
        self.job.snapshot_counter = value

    @property
    def ledger(self) -> BudgetLedger | None:
        """The ledger the job is opened in (:attr:`PartyBudget.ledger`)."""
        return self.budget.ledger

    @ledger.setter
    def ledger(self, value: BudgetLedger | None) -> None:
        self.budget.ledger = value

    # -- lifecycle --------------------------------------------------------------------------
    def serve(self) -> int:
        """Serve until the job finishes, is aborted, or the leader is gone too long."""
        server = serve(
            self.identity,
            self.party.bind,
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
        party_log(self.name, f"serving job {self.spec.id} on {self.party.address} ({what})")
        if self.spec.simulation:
            party_log(
                self.name, f"SIMULATION, seed {self.spec.params['seed']}: {SIMULATION_WARNING}"
            )
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
            while (
                drain
                and time.monotonic() < deadline
                and not all(link.idle() or link.refused for link in self.links.values())
            ):
                time.sleep(0.02)
        finally:
            self.predictions.stop()
            for link in self.links.values():
                link.stop()
            if server is not None:
                server.stop(grace=0.5).wait()
            with self.lock:
                self.budget.close()
                self.journal.close()
        if self.exit_message:
            party_log(self.name, self.exit_message)

    # -- data plane -------------------------------------------------------------------------
    def _deliver(self, payload: bytes, peer: str) -> bytes:
        try:
            for frame in received_frames(payload, max_bytes=self.spec.max_message_bytes):
                self._deliver_checked(frame, peer)
            return b"ok"
        except Refused as exc:
            self.refusals += 1
            party_log(self.name, f"refused a message from {peer}: {exc}", logging.WARNING)
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
        with self.lock:
            if not self.job.opened and not self.job.begun:
                raise Refused(grpc.StatusCode.UNAVAILABLE, "the job is not open yet")
            if not self.job.take(message, payload, sha, peer, envelope.seq):
                return  # a repeat of a handled message: acknowledge again
            self.last_contact = time.monotonic()

    def snapshot(self, *, truncate: bool = True) -> None:
        """Write the state (no message may be pending) and empty the journal (unless
        ``truncate`` is False): :meth:`PartyJob.snapshot`."""
        self.job.snapshot(truncate=truncate)

    # -- control plane ----------------------------------------------------------------------
    def _control(self, payload: bytes, peer: str) -> bytes:
        try:
            return self._control_checked(payload, peer)
        except Refused as exc:
            party_log(self.name, f"refused a control request from {peer}: {exc}", logging.WARNING)
            raise

    def _control_checked(self, payload: bytes, peer: str) -> bytes:
        handler, request = self.control.dispatch(payload, peer)
        self.last_contact = time.monotonic()
        with self.lock:
            try:
                reply = handler(request)
            except DpfedInputError as exc:
                raise Refused(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None
        return json.dumps(reply).encode()

    def _open(self, request: OpenJob) -> dict[str, Any]:
        """:meth:`PartyControl.open_job` (the caller holds the lock)."""
        return self.control.open_job(request)

    def _begin(self, request: BeginJob) -> dict[str, Any]:
        """:meth:`PartyControl.begin_job` (the caller holds the lock)."""
        return self.control.begin_job(request)

    def _close(self, request: CloseSubmissions) -> dict[str, Any]:
        """:meth:`PartyControl.close_submissions` (the caller holds the lock)."""
        return self.control.close_submissions(request)

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
