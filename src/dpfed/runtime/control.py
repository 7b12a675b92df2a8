"""The leader's control requests, as typed messages in the wire format.

The leader drives a job with nine requests (and a prediction with the trained model with four
more), each a frozen dataclass sent to one party as a wire frame (:mod:`dpfed.runtime.wire`:
versioned header, every field's type checked on decode) over the ``Control`` method; the party
answers with a JSON object. The requests never travel between parties: a party's ``Deliver``
refuses them, and its ``Control`` accepts them from the leader's certificate only.

The job opens with :class:`OpenJob`, which carries the leader's package version and a
fingerprint of the message kinds it speaks (the control requests and the protocol's
messages, with their fields); a party whose version or kinds differ refuses at open, naming
both, rather than failing on a message in the middle of the job.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfed import __version__
from dpfed._validation import DpfedInputError
from dpfed.runtime.jobspec import LEADER
from dpfed.runtime.messages import Message
from dpfed.runtime.wire import describe_kind, register_message

#: The round every control request carries (they belong to none).
CONTROL_ROUND = 0


@dataclass(frozen=True)
class ControlRequest(Message):
    """Base of the leader's requests; ``sender`` is the leader, ``recipient`` the party."""


@register_message
@dataclass(frozen=True)
class OpenJob(ControlRequest):
    """Check the job file (``digest``), the package ``version`` and the message ``kinds``,
    reserve the budget and describe the party's data; ``resume`` continues a stopped job."""

    digest: str
    resume: bool
    version: str
    kinds: str
    keys: str = "{}"  # JSON of JobSpec.key_digests(): where two job files differ
    #: The job file's text, for a party service that has no copy (dpfed.runtime.service);
    #: a party started for this one job checks ``digest`` against its own file and ignores it.
    text: str = ""


@register_message
@dataclass(frozen=True)
class BeginJob(ControlRequest):
    """Start (or continue) the protocol."""


@register_message
@dataclass(frozen=True)
class StatusRequest(ControlRequest):
    """The party's round and whether it has finished."""


@register_message
@dataclass(frozen=True)
class AccountRequest(ControlRequest):
    """The party's public account of the finished job (its releases)."""


@register_message
@dataclass(frozen=True)
class EvaluateRequest(ControlRequest):
    """The party's training losses at ``models`` (rows), under ``evaluate = "full"`` only."""

    models: np.ndarray


@register_message
@dataclass(frozen=True)
class CloseSubmissions(ControlRequest):
    """The submission deadline passed: stop waiting for the droppable parties' missing inputs
    (:meth:`dpfed.runtime.hosting.ProtocolHost.close`). Sending it again changes nothing."""


@register_message
@dataclass(frozen=True)
class FinishJob(ControlRequest):
    """Write the model, close the budget reservation and stop serving."""


@register_message
@dataclass(frozen=True)
class SuspendJob(ControlRequest):
    """The leader stops the job; the party keeps its state for a resume."""

    reason: str


@register_message
@dataclass(frozen=True)
class AbortJob(ControlRequest):
    """The job will not run; the party frees an unspent reservation and stops."""

    reason: str


@register_message
@dataclass(frozen=True)
class OpenPrediction(ControlRequest):
    """Check the job file, version and message kinds (as :class:`OpenJob` does) before a
    prediction with the model of the finished job; nothing is reserved."""

    digest: str
    version: str
    kinds: str
    keys: str = "{}"
    text: str = ""  # as OpenJob's


@register_message
@dataclass(frozen=True)
class PredictRequest(ControlRequest):
    """Score the rows named by ``data`` (as the party resolves it) with its part of the
    model, and send the share to party ``to`` (or the leader), under the prediction id
    ``request``."""

    request: str
    data: str
    to: str


@register_message
@dataclass(frozen=True)
class PredictionStatus(ControlRequest):
    """The recipient's progress on prediction ``request``: rows received from each party,
    and once complete where it wrote the scores."""

    request: str


@register_message
@dataclass(frozen=True)
class EndPrediction(ControlRequest):
    """The prediction is over (``reason``); the party stops serving."""

    reason: str


#: Every control request, in the order of a job (then of a prediction).
CONTROL_REQUESTS: tuple[type[ControlRequest], ...] = (
    OpenJob,
    BeginJob,
    CloseSubmissions,
    StatusRequest,
    AccountRequest,
    EvaluateRequest,
    FinishJob,
    SuspendJob,
    AbortJob,
    OpenPrediction,
    PredictRequest,
    PredictionStatus,
    EndPrediction,
)


def kinds_fingerprint(message_kinds: Iterable[type[Message]]) -> str:
    """SHA-256 of the control requests and ``message_kinds``: names, fields and field types.

    Two processes agree on it exactly when they encode and decode the same messages alike.
    """
    kinds = {*CONTROL_REQUESTS, *message_kinds}
    text = "\n".join(sorted(describe_kind(kind) for kind in kinds))
    return hashlib.sha256(text.encode()).hexdigest()


def check_open(
    request: OpenJob | OpenPrediction, message_kinds: Iterable[type[Message]], party: str
) -> None:
    """Refuse an :class:`OpenJob` or :class:`OpenPrediction` from a leader of another version
    or other message kinds.

    Raises
    ------
    DpfedInputError
        Naming both versions, or both fingerprints.
    """
    if request.version != __version__:
        raise DpfedInputError(
            f"the leader runs dpfed {request.version} and {party} runs dpfed {__version__}: "
            "every process of a job must run the same version."
        )
    ours = kinds_fingerprint(message_kinds)
    if request.kinds != ours:
        raise DpfedInputError(
            f"the leader's message kinds (fingerprint {request.kinds[:16]}) differ from "
            f"{party}'s ({ours[:16]}) although both run dpfed {__version__}: the installations "
            "differ; reinstall the same build everywhere."
        )


def control_request(op: type[ControlRequest], *, party: str, **fields: Any) -> ControlRequest:
    """A request of class ``op`` from the leader to ``party``."""
    return op(LEADER, party, CONTROL_ROUND, **fields)


__all__ = [
    "CONTROL_REQUESTS",
    "AbortJob",
    "AccountRequest",
    "BeginJob",
    "CloseSubmissions",
    "ControlRequest",
    "EndPrediction",
    "EvaluateRequest",
    "FinishJob",
    "OpenJob",
    "OpenPrediction",
    "PredictRequest",
    "PredictionStatus",
    "StatusRequest",
    "SuspendJob",
    "check_open",
    "control_request",
    "kinds_fingerprint",
]
