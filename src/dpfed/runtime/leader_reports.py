"""The round reports a networked job's leader (:class:`~dpfed.runtime.leader.Leader`) serves for:
the label holder (the job's first party) sends one per round; each is checked, added to the
history and checkpointed before it is acknowledged, then queued for the round loop.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, cast

import grpc

from dpfed.runtime import wire
from dpfed.runtime.links import received_frames
from dpfed.runtime.registry import ReportOfRound
from dpfed.runtime.transport import Refused

if TYPE_CHECKING:  # the leader imports this module
    from dpfed.runtime.leader import Leader

__all__ = ["ReportInbox", "refuse_control"]


def refuse_control(payload: bytes, peer: str) -> bytes:
    """The leader's ``Control`` handler: the leader takes no control requests.

    Raises
    ------
    Refused
        Always (``PERMISSION_DENIED``).
    """
    raise Refused(grpc.StatusCode.PERMISSION_DENIED, "the leader takes no control requests")


class ReportInbox:
    """The leader's ``Deliver`` handler: take the label holder's round reports.

    Parameters
    ----------
    leader : Leader
        The leader whose history, received links and checkpoint a report advances (under
        its ``lock``), and whose ``reports`` queue gets each new report.
    """

    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    def deliver(self, payload: bytes, peer: str) -> bytes:
        """Take the frames of ``payload`` from ``peer``, which must be the label holder.

        Raises
        ------
        Refused
            From another party; or a frame that is not the report of the next round.
        """
        spec = self._leader.spec
        holder = self._leader.protocol.reporter(spec)
        if peer != holder:
            raise Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"the leader takes round reports from {holder!r} only. Found {peer!r}",
            )
        for frame in received_frames(payload, max_bytes=spec.max_message_bytes):
            self.take(frame, peer)
        return b"ok"

    def take(self, payload: memoryview, peer: str) -> None:
        """Take one frame from ``peer``: a report seen before is ignored; the next round's is
        recorded, checkpointed and queued.

        Raises
        ------
        Refused
            A frame that does not decode, is not a round report from ``peer``, or is not the
            report of the next round.
        """
        leader = self._leader
        try:
            envelope = wire.decode(
                payload, job=leader.spec.id, max_bytes=leader.spec.max_message_bytes
            )
        except wire.WireError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        message = envelope.message
        if (
            leader.protocol.report is None
            or not isinstance(message, leader.protocol.report)
            or message.sender != peer
        ):
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "expected a round report")
        report = cast(ReportOfRound, message)
        digest = hashlib.sha256(payload).hexdigest()
        with leader.lock:
            if not leader.inbound.is_new(peer, envelope.seq, digest):
                return
            if report.round != len(leader.history) + 1:
                raise Refused(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"expected the report of round {len(leader.history) + 1}. "
                    f"Found round {report.round}",
                )
            entry = report.entry()
            entry["seconds"] = leader.checkpoints.seconds()
            leader.history.append(entry)
            leader.events.history(leader.history)
            leader.protocol_done = bool(report.finished)
            leader.inbound.mark(peer, envelope.seq, digest)
            leader.checkpoints.save()
        leader.reports.put(report)
