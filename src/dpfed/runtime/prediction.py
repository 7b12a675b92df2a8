"""Prediction with the model of a finished networked job: ``dpfed predict``.

After a vertical job every party holds its own part of the model, so scoring new rows is a
protocol too: each party scores its own columns of the rows and sends its share to one
recipient, which alone adds them up. The parties serve again with the job's usual
``dpfed party`` command (a party whose job has finished serves predictions of its model);
the leader, ``dpfed predict``,

1. opens the prediction at every party (job file digest, version, message kinds; nothing is
   reserved: scoring new rows with released models spends no budget),
2. asks the recipient, then every other party, to score the rows named by ``data`` (each
   party resolves the name at its own site, see :func:`dpfed.data.prediction.prediction_rows`)
   and to send its share (:class:`PredictionShare`, in blocks of rows) to the recipient,
3. follows the parties until the recipient holds every share, which it adds in the job's
   party order and writes to ``<workdir>/<job id>/predictions/<request>.json`` (the scores and
   what the protocol makes of them,
   :meth:`dpfed.runtime.registry.FederatedProtocol.prediction_output`),
4. ends the prediction at every party and writes a receipt: the recipient, where its file is
   and the file's SHA-256, but no score.

The recipient is the label holder unless another party, or the leader itself, is named, and
only one the job file lists in ``[job].prediction_recipients`` (by default the label holder
alone): every party refuses to send its share anywhere else, so a leader cannot redirect the
scores to itself. Only the recipient sees the scores. A share is exact: it tells the recipient
the sender's part of the score of every new row (a function of the sender's final model and its
columns of the new rows).

On the parties' own tables (``[job].align``) the rows are matched by ID: each party reads its
own file ``data`` and, before scoring, the parties agree by private set intersection which of
the recipient's IDs every party holds (:mod:`dpfed.runtime.party_prediction`); the recipient
must then be a party (only a party holds IDs) and writes the scores beside their IDs.

Training rows are not new rows: the share of a training row is the exact score that training
released only with noise, and the recipient, who subtracts its own share, would get every
other party's exact scores of its training rows. So every party checks, on its own columns,
whether any requested row equals one of its training rows
(:meth:`dpfed.runtime.hosting.ProtocolHost.prediction_share`) and refuses to score them
(``NAME:train`` among them), unless the job file opts in with
``[job].predict_training_rows = true``; even then a party with a privacy budget refuses unless
its own command line allows exact disclosure (``dpfed party --allow-exact-disclosure``). When
training rows are scored, each share says how many of the sender's training rows it covers,
and the recipient's file and the receipt flag the exact values at their top
(``exact_values``, :func:`training_rows_disclosure`).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from dpfed import __version__
from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.runtime import wire
from dpfed.runtime.certs import TlsIdentity
from dpfed.runtime.control import (
    ControlRequest,
    EndPrediction,
    OpenPrediction,
    PredictionStatus,
    PredictRequest,
    control_request,
    kinds_fingerprint,
)
from dpfed.runtime.disclosure import exact_values, with_exact_values
from dpfed.runtime.jobfile import LEADER, JobSpec
from dpfed.runtime.leader import leader_connections
from dpfed.runtime.links import received_frames
from dpfed.runtime.logs import process_logger
from dpfed.runtime.messages import Message
from dpfed.runtime.private_files import private_folder
from dpfed.runtime.registry import FederatedProtocol, get_protocol
from dpfed.runtime.transport import Connection, Refused, RemoteError, connection_limit, serve
from dpfed.runtime.wire import register_message

#: The folder of a party's job folder that holds the predictions it received.
PREDICTIONS_FOLDER = "predictions"
#: What a prediction id may look like (it names the recipient's file).
REQUEST_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@register_message
@dataclass(frozen=True)
class PredictionShare(Message):
    """Party -> the recipient: the sender's share of the scores of rows ``[first, first +
    len(scores))`` of prediction ``request``, which scores ``n_rows`` rows in all, of which
    ``training_rows`` are the sender's training rows (the same count in every block)."""

    request: str
    first: int
    n_rows: int
    scores: np.ndarray
    training_rows: int = 0


def prediction_message_kinds(protocol: FederatedProtocol) -> list[type[Message]]:
    """Every message class a prediction with ``protocol``'s model may carry."""
    return [*protocol.messages, *protocol.prediction_messages, PredictionShare]


def prediction_kinds(protocol: FederatedProtocol) -> str:
    """The message-kinds fingerprint a prediction's open compares."""
    return kinds_fingerprint(prediction_message_kinds(protocol))


def check_request_id(request: str) -> str:
    """``request`` if it can name a file (letters, digits, ``.``, ``_``, ``-``; at most 64).

    Raises
    ------
    DpfedInputError
        Naming the id found.
    """
    if not REQUEST_PATTERN.fullmatch(request):
        raise DpfedInputError(
            "a prediction id has 1 to 64 letters, digits, '.', '_' or '-' and starts with a "
            f"letter or digit. Found {request!r}."
        )
    return request


def new_request_id() -> str:
    """A fresh prediction id: the UTC time and 6 random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def share_messages(
    sender: str,
    recipient: str,
    request: str,
    scores: np.ndarray,
    *,
    max_bytes: int,
    training_rows: int = 0,
) -> list[PredictionShare]:
    """``scores`` (shape ``(n_rows,)``) cut into shares of at most a quarter of ``max_bytes``
    each (at least one message, even for no rows); ``training_rows``: how many of the rows
    are the sender's training rows."""
    n_rows = int(scores.shape[0])
    block = max(1, max_bytes // 32)
    return [
        PredictionShare(
            sender,
            recipient,
            0,
            request,
            first,
            n_rows,
            np.ascontiguousarray(scores[first : first + block], dtype=np.float64),
            training_rows,
        )
        for first in range(0, max(n_rows, 1), block)
    ]


def training_rows_disclosure(
    training: Mapping[str, int], n_rows: int, figures: Sequence[str]
) -> dict[str, Any] | None:
    """The ``exact_values`` section of a prediction that scored training rows, or None.

    Parameters
    ----------
    training : mapping of str to int
        How many of the rows each party recognised as its training rows.
    n_rows : int
        The rows scored.
    figures : sequence of str
        The output's fields computed from the scores.
    """
    found = {name: int(count) for name, count in training.items() if count}
    if not found:
        return None
    shares = ", ".join(
        f"{name}'s share of {count} of its training rows" for name, count in found.items()
    )
    section = exact_values(
        figures,
        left_parties=True,
        because="[job].predict_training_rows = true",
        what=f"the exact scores of training rows among the {n_rows} rows scored ({shares}), "
        "which training released only with noise",
    )
    assert section is not None  # figures or what: always something to flag
    return {**section, "training_rows": found}


class PredictionCollector:
    """The recipient's side of prediction ``request``: every party's share of every row.

    Parameters
    ----------
    request : str
    data : str
        The name of the rows, as the leader sent it.
    parties : sequence of str
        The job's parties, in the job file's order (the order the shares are added in).
    """

    def __init__(self, request: str, data: str, parties: Sequence[str]) -> None:
        self.request, self.data, self.parties = request, data, list(parties)
        self.n_rows: int | None = None
        self.shares: dict[str, np.ndarray] = {}
        self.filled: dict[str, np.ndarray] = {}
        self.training: dict[str, int] = {}  # the sender's training rows among the rows
        self.output: dict[str, Any] | None = None

    def add(self, share: PredictionShare) -> None:
        """Take one block; a faithful repeat is a no-op.

        Raises
        ------
        DpfedInputError
            A share of another prediction, from a party outside the job, of another row count
            than the others', reaching outside the rows, or repeating rows with other values.
        """
        if share.request != self.request:
            raise DpfedInputError(
                f"a share of prediction {share.request!r}; this prediction is {self.request!r}"
            )
        if share.sender not in self.parties:
            raise DpfedInputError(f"{share.sender!r} is not a party of the job")
        if self.n_rows is None:
            self.n_rows = share.n_rows
        if share.n_rows != self.n_rows:
            raise DpfedInputError(
                f"{share.sender} scored {share.n_rows} rows of {self.data!r} and another "
                f"party {self.n_rows}: the parties must hold the same rows in the same order"
            )
        scores = np.asarray(share.scores, dtype=np.float64).reshape(-1)
        end = share.first + scores.shape[0]
        if share.first < 0 or end > self.n_rows:
            raise DpfedInputError(
                f"{share.sender}'s share covers rows [{share.first}, {end}) of {self.n_rows}"
            )
        if share.training_rows < 0 or share.training_rows > self.n_rows:
            raise DpfedInputError(
                f"{share.sender} counts {share.training_rows} training rows among the "
                f"{self.n_rows} rows of {self.data!r}"
            )
        if self.training.setdefault(share.sender, share.training_rows) != share.training_rows:
            raise DpfedInputError(
                f"{share.sender} sent other counts of its training rows among the rows"
            )
        own = self.shares.setdefault(share.sender, np.zeros(self.n_rows))
        filled = self.filled.setdefault(share.sender, np.zeros(self.n_rows, dtype=bool))
        seen = filled[share.first : end]
        if np.any(seen) and not np.array_equal(own[share.first : end][seen], scores[seen]):
            raise DpfedInputError(f"{share.sender} sent other scores for rows it already sent")
        own[share.first : end] = scores
        filled[share.first : end] = True

    def received(self) -> dict[str, int]:
        """Rows received from each party."""
        return {
            name: int(self.filled[name].sum()) if name in self.filled else 0
            for name in self.parties
        }

    @property
    def complete(self) -> bool:
        return self.n_rows is not None and all(
            name in self.filled and bool(self.filled[name].all()) for name in self.parties
        )

    def total(self) -> np.ndarray:
        """The summed scores, shape ``(n_rows,)``, added in the job's party order."""
        if not self.complete or self.n_rows is None:
            raise DpfedInputError(f"prediction {self.request!r} is not complete")
        total = np.zeros(self.n_rows)
        for name in self.parties:
            total += self.shares[name]
        return total


def write_predictions(
    path: Path,
    spec: JobSpec,
    collector: PredictionCollector,
    recipient: str,
    listing: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the complete prediction to ``path``; return where, how many rows, its SHA-256,
    the output's fields (``figures``) and each party's training rows among them.

    The scores are for the recipient alone: the folder is made ``0700`` and the file is
    ``0600``, whatever the umask. Scores of training rows are flagged at the file's top
    (``exact_values``). A prediction by ID passes the recipient's ``listing``
    (:meth:`dpfed.runtime.hosting.PredictionById.listing`): the rows are written in the
    order of its ``order`` (positions among the collected rows) beside their ``ids``, with
    what was not scored."""
    total = collector.total()
    by_id: dict[str, Any] = {}
    if listing is not None:
        order = np.asarray(listing["order"], dtype=np.int64)
        if sorted(order.tolist()) != list(range(total.shape[0])):
            raise DpfedInputError("the listing does not order the rows scored")
        total = total[order]
        by_id = {
            "ids": list(listing["ids"]),
            **{k: v for k, v in listing.items() if k not in ("order", "ids")},
        }
    output = get_protocol(spec.protocol).prediction_output(spec, total)
    private_folder(path.parent)
    exact = training_rows_disclosure(collector.training, collector.n_rows or 0, list(output))
    write_json_atomic(
        path,
        with_exact_values(
            {
                "job": spec.id,
                "request": collector.request,
                "data": collector.data,
                "recipient": recipient,
                "parties": collector.parties,
                "n_rows": collector.n_rows,
                **by_id,
                **output,
            },
            exact,
        ),
    )
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "path": str(path.resolve()),
        "n_rows": collector.n_rows,
        "sha256": sha256,
        "figures": list(output),
        "training": dict(collector.training),
    }


class ShareSender:
    """Deliver one party's prediction messages to one peer (its shares to the recipient, or
    the messages that agree the rows of a prediction by ID) from a thread, retrying while the
    peer is not ready or not reachable, until acknowledged or ``timeout`` seconds."""

    def __init__(
        self, identity: TlsIdentity, spec: JobSpec, messages: Sequence[Message], *, timeout: float
    ) -> None:
        recipient = messages[0].recipient
        self.connection = Connection(
            identity, recipient, spec.endpoint(recipient).address, max_bytes=spec.max_message_bytes
        )
        self.frames = [
            wire.encode(m, job=spec.id, seq=0, max_bytes=spec.max_message_bytes) for m in messages
        ]
        self.timeout = timeout
        self.sent = 0
        self.error: str | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"shares-{recipient}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + self.timeout
        backoff = 0.02
        try:
            while self.sent < len(self.frames) and not self._stopped.is_set():
                try:
                    self.connection.deliver(self.frames[self.sent], timeout=10.0)
                except RemoteError as exc:
                    if not exc.retryable:
                        self.error = f"{exc.peer} refused the share: {exc.details}"
                        return
                    if time.monotonic() > deadline:
                        self.error = (
                            f"{exc.peer} did not take the share within "
                            f"{self.timeout:g} s ({exc.details})"
                        )
                        return
                    self._stopped.wait(backoff)
                    backoff = min(2 * backoff, 0.5)
                    continue
                self.sent += 1
                backoff = 0.02
        finally:
            self.connection.close()

    @property
    def done(self) -> bool:
        return self.sent == len(self.frames)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(2.0)


class PredictionFailed(RuntimeError):
    """A prediction could not finish (a party unreachable, a share refused)."""


class Predictor:
    """Lead a prediction with the model of finished job ``spec``: ``dpfed predict``.

    Parameters
    ----------
    spec : JobSpec
    recipient : str or None
        The party that receives the shares and writes the scores, or ``"leader"`` (then this
        process writes them to ``out``); None: the label holder (the first party).
    request : str or None
        The prediction's id (it names the recipient's file); None: a fresh one.
    """

    def __init__(
        self, spec: JobSpec, *, recipient: str | None = None, request: str | None = None
    ) -> None:
        self.spec = spec
        self.protocol = get_protocol(spec.protocol)
        self.recipient = recipient or spec.names[0]
        if self.recipient not in spec.allowed_recipients:
            raise DpfedInputError(
                f"--to must name one of {', '.join(spec.allowed_recipients)}, whom job {spec.id} "
                f"lets receive a prediction's scores ([job].prediction_recipients; by default "
                f"the label holder alone). Found {self.recipient!r}."
            )
        if spec.align and self.recipient == LEADER:
            raise DpfedInputError(
                f"job {spec.id} scores its parties' own rows by ID, and only a party holds "
                "IDs: name a party with --to (the leader cannot receive scores by ID)."
            )
        self.request = check_request_id(request or new_request_id())
        self.identity, self.connections = leader_connections(spec)
        self.lock = threading.Lock()
        self.collector: PredictionCollector | None = None

    def _control(
        self, name: str, op: type[ControlRequest], *, timeout: float | None = None, **fields: Any
    ) -> dict[str, Any]:
        frame = wire.encode(
            control_request(op, party=name, **fields),
            job=self.spec.id,
            seq=0,
            max_bytes=self.spec.max_message_bytes,
        )
        return self.connections[name].control(frame, timeout=timeout or self.spec.round_timeout)

    def _ask(self, name: str, op: type[ControlRequest], **fields: Any) -> dict[str, Any]:
        """:meth:`_control`, with a refusal raised as :class:`DpfedInputError` and a party
        gone as :class:`PredictionFailed`, each naming the party."""
        try:
            return self._control(name, op, **fields)
        except RemoteError as exc:
            if exc.retryable:
                raise PredictionFailed(f"party {name!r} did not answer ({exc.details})") from None
            raise DpfedInputError(f"party {name!r} refused the prediction: {exc.details}") from None

    def _deliver(self, payload: bytes, peer: str) -> bytes:
        """The leader as recipient: take shares; acknowledge (and drop) anything a restored
        party re-sends from its finished job."""
        for frame in received_frames(payload, max_bytes=self.spec.max_message_bytes):
            try:
                envelope = wire.decode(
                    frame, job=self.spec.id, max_bytes=self.spec.max_message_bytes
                )
            except wire.WireError as exc:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
            message = envelope.message
            if message.sender != peer:
                raise Refused(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"a message from {message.sender!r} on {peer!r}'s connection",
                )
            if not isinstance(message, PredictionShare):
                continue
            with self.lock:
                if self.collector is None:
                    raise Refused(grpc.StatusCode.UNAVAILABLE, "no prediction open yet")
                try:
                    self.collector.add(message)
                except DpfedInputError as exc:
                    raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        return b"ok"

    @staticmethod
    def _refuse_control(payload: bytes, peer: str) -> bytes:
        raise Refused(grpc.StatusCode.PERMISSION_DENIED, "the leader takes no control requests")

    def run(self, data: str, out: str | Path) -> dict[str, Any]:
        """Score the rows named by ``data``; write ``out`` (the receipt, or with the leader
        as recipient the scores) and return it.

        Raises
        ------
        DpfedInputError
            A party refused (job not finished, rows it cannot read, another job file).
        PredictionFailed
            A party was unreachable or a share did not arrive in time.
        """
        started = time.monotonic()
        as_leader = self.recipient == LEADER
        server = None
        if as_leader:
            self.collector = PredictionCollector(self.request, data, self.spec.names)
            server = serve(
                self.identity,
                self.spec.leader.bind,
                {"Deliver": self._deliver, "Control": self._refuse_control},
                max_bytes=self.spec.max_message_bytes,
                max_connections=connection_limit(len(self.spec.names) + 1),
            )
        try:
            self._open_all()
            order = sorted(self.spec.names, key=lambda n: n != self.recipient)
            replies = {
                name: self._ask(
                    name, PredictRequest, request=self.request, data=data, to=self.recipient
                )
                for name in order
            }
            rows = {name: reply["rows"] for name, reply in replies.items()}
            training = {name: int(reply.get("training_rows", 0)) for name, reply in replies.items()}
            # by ID, the parties agree their rows after this (each reply's rows are None)
            if not self.spec.align and len(set(rows.values())) != 1:
                raise DpfedInputError(
                    f"the parties read different numbers of rows from {data!r}: {rows}; every "
                    "party must score the same rows in the same order."
                )
            status = self._follow(as_leader)
            figures: list[str] = []
            if as_leader:
                assert self.collector is not None
                output = self.protocol.prediction_output(self.spec, self.collector.total())
                figures = list(output)
                result: dict[str, Any] = {"n_rows": self.collector.n_rows, **output}
            else:
                figures = list(status.get("figures", []))
                result = {
                    "path": status["path"],
                    "n_rows": status["n_rows"],
                    "sha256": status["sha256"],
                }
                training = status.get("training", training)
            result = with_exact_values(
                {
                    "job": self.spec.id,
                    "request": self.request,
                    "data": data,
                    "recipient": self.recipient,
                    "parties": self.spec.names,
                    **result,
                    "seconds": time.monotonic() - started,
                },
                training_rows_disclosure(training, int(result["n_rows"] or 0), figures),
            )
            write_json_atomic(out, result)
        except BaseException as exc:
            self._end_all(f"the prediction failed: {exc}")
            raise
        else:
            self._end_all("the prediction is complete")
            return result
        finally:
            for connection in self.connections.values():
                connection.close()
            if server is not None:
                server.stop(grace=0.5).wait()

    def _open_all(self) -> None:
        kinds = prediction_kinds(self.protocol)
        keys = json.dumps(self.spec.key_digests(), sort_keys=True)
        for name in self.spec.names:
            deadline = time.monotonic() + self.spec.round_timeout
            next_word = time.monotonic() + 2.0
            while True:
                try:
                    self._control(
                        name,
                        OpenPrediction,
                        digest=self.spec.digest,
                        version=__version__,
                        kinds=kinds,
                        keys=keys,
                        text=self.spec.text,
                    )
                    break
                except RemoteError as exc:
                    if not exc.retryable:
                        raise DpfedInputError(
                            f"party {name!r} refused the prediction: {exc.details}"
                        ) from None
                    now = time.monotonic()
                    if now >= deadline:
                        raise PredictionFailed(
                            f"party {name!r} at {self.spec.party(name).address} was not "
                            f"reached within {self.spec.round_timeout:g} s ({exc.details}); "
                            "start it with its usual `dpfed party` command"
                        ) from None
                    if now >= next_word:
                        self._log(
                            f"waiting for {name} at {self.spec.party(name).address} "
                            "(not serving yet)"
                        )
                        next_word = now + 10.0
                    time.sleep(0.2)

    def _follow(self, as_leader: bool) -> dict[str, Any]:
        """Poll the parties until the recipient holds every share; the recipient's status."""
        last, last_change = -1, time.monotonic()
        while True:
            statuses = {}
            for name in self.spec.names:
                try:
                    statuses[name] = self._control(
                        name, PredictionStatus, timeout=5.0, request=self.request
                    )
                except RemoteError as exc:
                    if not exc.retryable:
                        raise DpfedInputError(f"party {name!r}: {exc.details}") from None
                    if time.monotonic() - last_change > self.spec.grace:
                        raise PredictionFailed(
                            f"party {name!r} is unreachable ({exc.details})"
                        ) from None
                    continue
                if statuses[name].get("error"):
                    raise PredictionFailed(f"party {name!r}: {statuses[name]['error']}")
            if as_leader:
                assert self.collector is not None
                with self.lock:
                    if self.collector.complete:
                        return {}
                    progress = sum(self.collector.received().values())
            else:
                status = statuses.get(self.recipient)
                if status is not None and status.get("done"):
                    return status
                progress = sum(status["received"].values()) if status else last
            if progress > last:
                last, last_change = progress, time.monotonic()
            elif time.monotonic() - last_change > self.spec.round_timeout:
                raise PredictionFailed(
                    f"the shares did not reach {self.recipient} within "
                    f"{self.spec.round_timeout:g} s"
                )
            time.sleep(0.1)

    def _end_all(self, reason: str) -> None:
        for name in self.spec.names:
            try:
                self._control(name, EndPrediction, timeout=2.0, reason=reason)
            except RemoteError:
                self._log(
                    f"{name} did not take the end of the prediction; it stops on its idle timeout"
                )

    @staticmethod
    def _log(text: str) -> None:
        process_logger(__name__, LEADER).info(text)


def run_prediction(
    spec: JobSpec,
    data: str,
    out: str | Path,
    *,
    recipient: str | None = None,
    request: str | None = None,
) -> dict[str, Any]:
    """``dpfed predict``: score the rows named by ``data`` with the trained model of ``spec``."""
    return Predictor(spec, recipient=recipient, request=request).run(data, out)


__all__ = [
    "PREDICTIONS_FOLDER",
    "PredictionCollector",
    "PredictionFailed",
    "PredictionShare",
    "Predictor",
    "ShareSender",
    "check_request_id",
    "new_request_id",
    "prediction_kinds",
    "prediction_message_kinds",
    "run_prediction",
    "share_messages",
    "training_rows_disclosure",
    "write_predictions",
]
