"""A party's side of predictions with its part of a finished job's model (``dpfed predict``,
:mod:`dpfed.runtime.prediction`).

Once its job has finished, a party scores rows the leader names and sends its share of their
scores to the recipient, which adds them up and writes them. Two ways of naming rows:

- **by position** (a job on column ranges of one data set): every party reads the rows named
  by ``data`` at its own site and shares the scores of all of them, in their order
  (:meth:`dpfed.runtime.hosting.ProtocolHost.prediction_share`);
- **by ID** (an aligned job, ``[job].align``): every party reads its own table ``data`` in its
  data folder, and the parties first agree which of the recipient's IDs every party holds
  and in what order (:meth:`dpfed.runtime.hosting.ProtocolHost.prediction_by_id`, whose
  messages travel party to party, never through the leader); each party then shares the
  scores of those rows, and the recipient writes them beside their IDs.

Training rows are not new rows: a party refuses to share the scores of rows it recognises as
its training rows (by position: its training part, file or a copy of it; by ID: its training
rows' IDs) unless the job file opts in with ``[job].predict_training_rows = true``, and even
then a party with a privacy budget refuses unless its own configuration allows exact
disclosure. A refusal found after the rows are agreed (by ID) is reported in the party's
status, which the leader follows.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.runtime.certs import TlsIdentity
from dpfed.runtime.control import OpenPrediction, PredictionStatus, PredictRequest, check_open
from dpfed.runtime.hosting import PartyShare, PredictionById, ProtocolHost
from dpfed.runtime.jobspec import JobSpec
from dpfed.runtime.logs import process_logger
from dpfed.runtime.messages import Message, ProtocolError
from dpfed.runtime.prediction import (
    PREDICTIONS_FOLDER,
    PredictionCollector,
    PredictionShare,
    ShareSender,
    check_request_id,
    prediction_message_kinds,
    share_messages,
    write_predictions,
)
from dpfed.runtime.registry import get_protocol
from dpfed.runtime.transport import Refused

__all__ = ["PredictionDesk"]


class PredictionDesk:
    """Party ``name``'s predictions with its part of the model of finished job ``spec``.

    The caller (:class:`dpfed.runtime.party.PartyNode`) holds its lock around every call.

    Parameters
    ----------
    spec : JobSpec
    name : str
    host : ProtocolHost
        Its side of the job (finished, to predict).
    identity : TlsIdentity
        Its certificate, to send shares and messages to its peers.
    folder : Path
        Its folder of the job (the recipient writes to ``predictions/`` in it).
    allow_exact_disclosure : bool
        Its own policy on exact disclosure.
    budgeted : callable
        Whether it holds a privacy budget on its data.
    """

    def __init__(
        self,
        spec: JobSpec,
        name: str,
        host: ProtocolHost,
        identity: TlsIdentity,
        folder: Path,
        *,
        allow_exact_disclosure: bool,
        budgeted: Callable[[], bool],
    ) -> None:
        self.spec, self.name, self.host, self.identity = spec, name, host, identity
        self.folder = folder
        self.allow_exact_disclosure, self.budgeted = allow_exact_disclosure, budgeted
        self.kinds = tuple(get_protocol(spec.protocol).prediction_messages)
        self.open_ = False
        self.collector: PredictionCollector | None = None
        self.receipt: dict[str, Any] | None = None
        self.senders: dict[str, list[ShareSender]] = {}
        # prediction id -> the reply to its PredictRequest (rows scored, training rows among them)
        self.scored: dict[str, dict[str, Any]] = {}
        self.error: str | None = None
        # a prediction by ID: its request, rows' name, recipient, role, and the messages handled
        self.by_id: tuple[str, str, str, PredictionById] | None = None
        self.handled: set[bytes] = set()

    def _log(self, text: str, level: int = logging.INFO) -> None:
        process_logger(__name__, self.name).log(level, text)

    def takes(self, message: Message) -> bool:
        """Whether ``message`` belongs to a prediction (a share, or a message agreeing rows by
        ID) rather than to the job."""
        return isinstance(message, (PredictionShare, *self.kinds))

    # -- control requests -----------------------------------------------------------------
    def open(self, request: OpenPrediction) -> dict[str, Any]:
        """Open a prediction (the caller has checked the job file)."""
        check_open(request, prediction_message_kinds(get_protocol(self.spec.protocol)), self.name)
        if not self.host.finished:
            raise DpfedInputError(
                f"{self.name} has not finished job {self.spec.id} (round {self.host.round}): "
                "there is no trained model to predict with."
            )
        self.open_ = True
        return {"finished": True}

    def predict(self, request: PredictRequest) -> dict[str, Any]:
        """Score the rows ``request`` names (by ID: start agreeing them) and send the share."""
        if not self.open_:
            raise DpfedInputError("predict before the prediction was opened")
        request_id = check_request_id(request.request)
        if request.to not in self.spec.allowed_recipients:
            raise DpfedInputError(
                f"job {self.spec.id} lets a prediction's scores go to "
                f"{', '.join(self.spec.allowed_recipients)} only ([job].prediction_recipients). "
                f"Found {request.to!r}."
            )
        if request_id in self.scored:  # the leader asked again: the share is on its way
            return self.scored[request_id]
        if request.to == self.name:
            self.collector = PredictionCollector(request_id, request.data, self.spec.names)
            self.receipt = None
        if self.spec.align:
            role = self.host.prediction_by_id(request_id, request.data, request.to)
            self.by_id = (request_id, request.data, request.to, role)
            self._send(request_id, role.start())
            self.scored[request_id] = {"rows": None, "by_id": True}
            self._log(
                f"matching the rows of {request.data!r} by ID with {request.to} "
                f"(prediction {request_id})"
            )
            return self.scored[request_id]
        share = self.host.prediction_share(request.data)
        return self._share(request_id, request.data, request.to, share)

    def status(self, request: PredictionStatus) -> dict[str, Any]:
        senders = self.senders.get(request.request, [])
        errors = [s.error for s in senders if s.error]
        reply: dict[str, Any] = {
            "scored": self.scored.get(request.request),
            "sent": all(s.done for s in senders) if senders else None,
            "error": self.error or (errors[0] if errors else None),
        }
        collector = self.collector
        if collector is not None and collector.request == request.request:
            reply |= {
                "received": collector.received(),
                "done": self.receipt is not None,
                **(self.receipt or {}),
            }
        return reply

    def stop(self) -> None:
        """Stop every sender (the prediction is over, or the party stops)."""
        for senders in self.senders.values():
            for sender in senders:
                sender.stop()

    # -- messages from the other parties ----------------------------------------------------
    def take(self, message: Message, sha256: bytes) -> None:
        """A share (the recipient), or a message agreeing the rows of a prediction by ID.

        Raises
        ------
        Refused
            UNAVAILABLE while the prediction has not reached this party yet (the sender
            retries), else naming why the message does not belong here.
        """
        if isinstance(message, PredictionShare):
            self._take_share(message)
            return
        if self.by_id is None:
            if self.open_:
                raise Refused(
                    grpc.StatusCode.UNAVAILABLE, f"the prediction has not reached {self.name} yet"
                )
            raise Refused(
                grpc.StatusCode.FAILED_PRECONDITION, f"{self.name} has no prediction by ID open"
            )
        request_id, data, to, role = self.by_id
        if sha256 in self.handled:
            return  # a repeat (its acknowledgement was lost): acknowledge again
        try:
            out = role.handle(message)
        except (ProtocolError, DpfedInputError) as exc:
            raise Refused(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None
        self.handled.add(sha256)
        self._send(request_id, out)
        if role.finished and self.scored[request_id].get("rows") is None:
            self._agreed(request_id, data, to, role)

    def _agreed(self, request_id: str, data: str, to: str, role: PredictionById) -> None:
        """The rows by ID are agreed (or refused): share their scores."""
        if role.refusal:
            self.error = f"no rows were scored: {role.refusal}"
            self.scored[request_id] = {"rows": 0}
            self._log(self.error, logging.WARNING)
            return
        try:
            self._share(request_id, data, to, role.share())
        except DpfedInputError as exc:
            self.error = str(exc)
            self.scored[request_id] = {"rows": 0}
            self._log(f"refused to score {data!r}: {exc}", logging.WARNING)

    def _take_share(self, share: PredictionShare) -> None:
        """The recipient takes a share of a prediction (no journal: it is not training)."""
        collector = self.collector
        if collector is None or collector.request != share.request:
            if collector is None and self.open_:
                raise Refused(
                    grpc.StatusCode.UNAVAILABLE,
                    f"prediction {share.request!r} has not reached {self.name} yet",
                )
            raise Refused(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{self.name} is not the recipient of prediction {share.request!r}",
            )
        try:
            collector.add(share)
        except DpfedInputError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        self._maybe_write()

    # -- sending ----------------------------------------------------------------------------
    def _send(self, request_id: str, messages: Sequence[Message]) -> None:
        """Send ``messages`` from threads, one per peer, retrying until taken."""
        peers = sorted({m.recipient for m in messages})
        for peer in peers:
            self.senders.setdefault(request_id, []).append(
                ShareSender(
                    self.identity,
                    self.spec,
                    [m for m in messages if m.recipient == peer],
                    timeout=self.spec.round_timeout,
                )
            )

    def _share(self, request_id: str, data: str, to: str, share: PartyShare) -> dict[str, Any]:
        """Send its share of the rows' scores to ``to`` (or take it, as the recipient)."""
        scores = np.asarray(share.scores, dtype=np.float64)
        training = np.asarray(share.training, dtype=bool).reshape(-1)
        found = int(training.sum())
        if found:
            self._check_training_rows(data, found)
        messages = share_messages(
            self.name,
            to,
            request_id,
            scores,
            max_bytes=self.spec.max_message_bytes,
            training_rows=found,
        )
        self.scored[request_id] = {"rows": int(scores.shape[0]), "training_rows": found}
        if to == self.name:
            assert self.collector is not None
            for message in messages:
                self.collector.add(message)
            self._maybe_write()
        else:
            self._send(request_id, messages)
        self._log(
            f"scored {scores.shape[0]} rows of {data!r} with its part of the model "
            f"(prediction {request_id}); its share goes to {to}"
        )
        if found and to != self.name:
            self._log(
                f"the share holds the EXACT scores of {found} of its training rows "
                "([job].predict_training_rows = true), which training released only "
                f"with noise; {to} learns them",
                logging.WARNING,
            )
        return self.scored[request_id]

    def _check_training_rows(self, data: str, found: int) -> None:
        """Refuse to score ``found`` rows that are this party's training rows unless the job
        file opts in and, for a party with a budget, its own configuration allows exact
        disclosure."""
        which = (
            "rows whose IDs are its training rows'"
            if self.spec.align
            else "its training part or file, or a copy of it"
        )
        what = (
            f"rows {data!r} are its training rows ({found} rows: {which}), and their shares "
            f"would give the recipient {self.name}'s exact scores of its training rows, which "
            "training released only with noise"
        )
        if not self.spec.predict_training_rows:
            raise DpfedInputError(
                f"{what}. Score new rows, or let the job file opt in with "
                "[job].predict_training_rows = true."
            )
        if not self.allow_exact_disclosure and self.budgeted():
            raise DpfedInputError(
                f"{what}. [job].predict_training_rows = true asks for them, but {self.name} "
                f"has a privacy budget on {self.spec.party(self.name).dataset!r} and its own "
                "configuration does not allow exact disclosure (the job file cannot grant "
                f"it): start {self.name} with `dpfed party --allow-exact-disclosure` if its "
                "own policy allows it."
            )

    def _maybe_write(self) -> None:
        collector = self.collector
        if collector is None or self.receipt is not None or not collector.complete:
            return
        listing = None
        if self.by_id is not None:
            listing = self.by_id[3].listing()
        counted = copy.copy(collector)  # the peers' shares as its model counts them
        counted.shares = {
            sender: scores if sender == self.name else self.host.peer_share(sender, scores)
            for sender, scores in collector.shares.items()
        }
        path = self.folder / PREDICTIONS_FOLDER / f"{collector.request}.json"
        self.receipt = write_predictions(path, self.spec, counted, self.name, listing)
        self._log(
            f"wrote the scores of {collector.n_rows} rows (prediction "
            f"{collector.request}) to {path}"
        )
