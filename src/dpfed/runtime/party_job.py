"""The job as a party runs it (the job side of :class:`~dpfed.runtime.party.PartyNode`): its
lifecycle (opened, begun), every input its role takes (the begin, the peers' messages, the
close of submissions) counted and appended to the journal, the role's messages queued on the
links after their releases are recorded, and the snapshots that empty the journal.

A restarted party loads its snapshot and replays its journal; roles are deterministic, so it
reproduces the same messages and releases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import grpc

from dpfed._validation import DpfedInputError
from dpfed.runtime import wire
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint
from dpfed.runtime.hosting import ProtocolHost
from dpfed.runtime.jobfile import JobSpec
from dpfed.runtime.journal import Journal
from dpfed.runtime.links import InboundLinks, OutboundLink
from dpfed.runtime.messages import Message, ProtocolError
from dpfed.runtime.party_budget import PartyBudget
from dpfed.runtime.transport import Refused

__all__ = ["SNAPSHOT_BYTES", "SNAPSHOT_RECORDS", "PartyJob"]

#: A snapshot is taken (when nothing sent awaits an acknowledgement) once the journal holds
#: this many records or bytes.
SNAPSHOT_RECORDS, SNAPSHOT_BYTES = 64, 64 * 2**20


class PartyJob:
    """Job ``spec`` as a party runs it: its lifecycle, journal and snapshots.

    The caller holds the party's lock around every call.

    Parameters
    ----------
    spec : JobSpec
    host : ProtocolHost
        The party's side of the job.
    links : dict of str to OutboundLink
        The links to its peers, which carry the role's messages.
    inbound : InboundLinks
        The numbers of the messages handled from each peer.
    budget : PartyBudget
        Where the role's releases are recorded before their messages leave.
    folder : Path
        The party's folder of the job (journal and snapshot).

    Attributes
    ----------
    opened : bool
        Whether the leader has opened the job (and not suspended it since).
    begun : bool
        Whether the role has started.
    counter : int
        Inputs handled since the job began (messages, the begin, the close of submissions).
    snapshot_counter : int
        The counter at the last snapshot.
    journal : Journal
    checkpoint_path : Path
    """

    def __init__(
        self,
        spec: JobSpec,
        host: ProtocolHost,
        links: dict[str, OutboundLink],
        inbound: InboundLinks,
        budget: PartyBudget,
        folder: Path,
    ) -> None:
        self.spec = spec
        self.host = host
        self.links = links
        self.inbound = inbound
        self.budget = budget
        self.folder = folder
        self.checkpoint_path = folder / "state.npz"
        self.opened = False
        self.begun = False
        self.counter = 0  # inputs handled since the job began (messages and the begin)
        self.snapshot_counter = 0
        self.journal = Journal(folder / "journal.bin", fsync=spec.fsync)

    def saved(self) -> bool:
        """Whether a snapshot or journal of this job is on disk (a restarted party)."""
        return self.checkpoint_path.exists() or self.journal.size() > 0

    # -- the inputs of the role -----------------------------------------------------------
    def begin(self) -> None:
        """Start the role, once (a repeated begin changes nothing)."""
        if not self.begun:
            self.begun = True
            n_events = len(self.host.events)
            out = self.host.start()
            self._journal(b"B", b"")
            self.emit(out, n_events)

    def take(
        self, message: Message, payload: memoryview, sha256: bytes, sender: str, seq: int
    ) -> bool:
        """Hand message number ``seq`` from ``sender`` (``payload``, its SHA-256 ``sha256``)
        to the role; journal it and queue the role's answer. False for a repeat of a handled
        message (to acknowledge again).

        Raises
        ------
        Refused
            If the number is out of order or the role refuses the message (nothing changed).
        """
        digest = sha256.hex()
        if not self.inbound.is_new(sender, seq, digest):
            return False
        self.maybe_snapshot()
        n_events = len(self.host.events)
        try:
            out = self.host.handle(message)  # refuses before changing anything
        except (ProtocolError, DpfedInputError) as exc:
            raise Refused(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None
        self._journal(b"M", payload, sha256=sha256)
        self.inbound.mark(sender, seq, digest)
        self.emit(out, n_events)
        return True

    def close_submissions(self) -> list[Message]:
        """The host stops waiting for missing inputs; the close is journaled like a message,
        so a restarted party closes again on replay. Returns the messages that follow."""
        n_events = len(self.host.events)
        out = self.host.close()  # refuses before changing anything
        self._journal(b"C", b"")
        self.emit(out, n_events)
        return out

    def _journal(
        self, kind: bytes, payload: bytes | memoryview, *, sha256: bytes | None = None
    ) -> None:
        self.counter += 1
        self.journal.append(kind, self.counter, payload, sha256=sha256)

    def emit(self, messages: Sequence[Message], n_events: int) -> None:
        """Record the releases (write-ahead), then queue ``messages``."""
        encoded = []
        for m in messages:
            link = self.links[m.recipient]
            seq = link.reserve()
            encoded.append(
                (
                    link,
                    seq,
                    wire.encode(
                        m, job=self.spec.id, seq=seq, max_bytes=self.spec.max_message_bytes
                    ),
                )
            )
        self.budget.record(self.host.events[n_events:], [p for _, _, p in encoded])
        for link, seq, payload in encoded:
            link.push(seq, payload)

    # -- snapshots and the journal --------------------------------------------------------
    def maybe_snapshot(self) -> None:
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
            self.checkpoint_path,
            {f"role/{k}": v for k, v in arrays.items()},
            state,
            fsync=self.spec.fsync,
        )
        if truncate:
            self.journal.truncate()
        self.snapshot_counter = self.counter

    def restore(self) -> None:
        """Load the snapshot (if any) and replay the journal after it."""
        if self.checkpoint_path.exists():
            self._load_snapshot()
        self.budget.reattach()
        for kind, counter, payload in self.journal.records(after=self.counter):
            n_events = len(self.host.events)
            if kind == b"B":
                self.begun = True
                out = self.host.start()
            elif kind == b"C":
                out = self.host.close()
            else:
                envelope = wire.decode(
                    payload, job=self.spec.id, max_bytes=self.spec.max_message_bytes
                )
                sender = envelope.message.sender
                digest = hashlib.sha256(payload).hexdigest()
                if not self.inbound.is_new(sender, envelope.seq, digest):
                    continue
                out = self.host.handle(envelope.message)
                self.inbound.mark(sender, envelope.seq, digest)
            self.counter = counter
            self.emit(out, n_events)

    def _load_snapshot(self) -> None:
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
