"""The leader's control requests to a party (the control side of
:class:`~dpfed.runtime.party.PartyNode`): open, begin, close submissions, status, account,
evaluate, finish, suspend, abort, and the requests of a prediction with the trained model.

Only the leader may send them, for the job the party serves and to this party; anything else
is refused. The node calls a request's handler under its lock and answers with its reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np

from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.runtime import wire
from dpfed.runtime.alignment import alignment_job_id
from dpfed.runtime.control import (
    AbortJob,
    AccountRequest,
    BeginJob,
    CloseSubmissions,
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
from dpfed.runtime.hosting import ProtocolHost
from dpfed.runtime.jobfile import LEADER, JobSpec
from dpfed.runtime.jobspec import PartySpec, differing_keys
from dpfed.runtime.links import OutboundLink
from dpfed.runtime.messages import Message
from dpfed.runtime.party_budget import PartyBudget
from dpfed.runtime.party_job import PartyJob
from dpfed.runtime.party_prediction import PredictionDesk
from dpfed.runtime.party_process import EXIT_ABORTED, EXIT_FINISHED, party_log
from dpfed.runtime.registry import get_protocol
from dpfed.runtime.transport import Refused

__all__ = ["ControlHandler", "PartyControl"]

#: A control request's handler: its reply, or DpfedInputError if the party refuses it.
ControlHandler = Callable[[Any], dict[str, Any]]


class PartyControl:
    """Party ``party``'s handling of the leader's control requests for job ``spec``.

    Parameters
    ----------
    spec : JobSpec
    party : PartySpec
        The party served.
    host : ProtocolHost
        Its side of the job.
    links : dict of str to OutboundLink
        Its links to its peers.
    job : PartyJob
        The job's lifecycle, journal and snapshots.
    budget : PartyBudget
        Its budget reservations for the job.
    predictions : PredictionDesk
        Its predictions with the trained model.
    allow_exact_disclosure : bool
        The party's own policy on exact disclosure (see
        :class:`~dpfed.runtime.party.PartyNode`).
    refusals : callable
        The number of messages the party has refused so far (for the status).
    stop : callable
        ``stop(code, message)``: end the process with this exit status and last word.
    """

    def __init__(
        self,
        spec: JobSpec,
        party: PartySpec,
        host: ProtocolHost,
        links: dict[str, OutboundLink],
        job: PartyJob,
        budget: PartyBudget,
        predictions: PredictionDesk,
        *,
        allow_exact_disclosure: bool,
        refusals: Callable[[], int],
        stop: Callable[[int, str], None],
    ) -> None:
        self.spec, self.party, self.name, self.host = spec, party, party.name, host
        self.links, self.job, self.budget, self.predictions = links, job, budget, predictions
        self.folder = job.folder
        self.allow_exact_disclosure = allow_exact_disclosure
        self.refusals, self.stop = refusals, stop

    def dispatch(self, payload: bytes, peer: str) -> tuple[ControlHandler, Message]:
        """The request in ``payload`` from ``peer`` and its handler.

        Raises
        ------
        Refused
            If ``peer`` is not the leader, or the payload is not a control request of this
            job from the leader to this party.
        """
        if peer != LEADER:
            raise Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"only the leader may control a job. Found {peer!r}",
            )
        try:
            envelope = wire.decode(payload, max_bytes=self.spec.max_message_bytes)
        except wire.WireError as exc:
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT, f"not a control request: {exc}"
            ) from None
        request = envelope.message
        if envelope.job != self.spec.id:
            if self.spec.id == alignment_job_id(envelope.job):
                # the aligned job itself, which this process serves next: not up yet
                raise Refused(
                    grpc.StatusCode.UNAVAILABLE,
                    f"{self.name} is finishing job {envelope.job}'s alignment",
                )
            raise Refused(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{self.name} serves job {self.spec.id!r}. Found {envelope.job!r}",
            )
        handler = self._handlers().get(type(request))
        if handler is None or request.sender != LEADER or request.recipient != self.name:
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"expected a control request from the leader to {self.name}. Found "
                f"{type(request).__name__} from {request.sender!r} to {request.recipient!r}",
            )
        return handler, request

    def _handlers(self) -> dict[type, ControlHandler]:
        return {
            OpenJob: self.open_job,
            BeginJob: self.begin_job,
            CloseSubmissions: self.close_submissions,
            StatusRequest: self.status,
            FinishJob: self.finish_job,
            AccountRequest: self.account,
            EvaluateRequest: self.evaluate,
            SuspendJob: self.suspend_job,
            AbortJob: self.abort_job,
            OpenPrediction: self.open_prediction,
            PredictRequest: self.predictions.predict,
            PredictionStatus: self.predictions.status,
            EndPrediction: self.end_prediction,
        }

    def check_job_file(self, request: OpenJob | OpenPrediction) -> None:
        """Refuse a leader whose job file differs, naming the keys where it does."""
        if request.digest != self.spec.digest:
            try:
                theirs = json.loads(request.keys)
            except ValueError:
                theirs = {}
            where = differing_keys(self.spec.key_digests(), theirs) if theirs else []
            raise DpfedInputError(
                f"{self.name}'s job file differs from the leader's"
                + (
                    f" at {', '.join(where)}"
                    if where
                    else " (job, parameters, parties or addresses)"
                )
                + "; every process must run the same job file."
            )

    # -- the job ----------------------------------------------------------------------------
    def open_job(self, request: OpenJob) -> dict[str, Any]:
        """Open the job (or resume it): check the job file and reserve the budget."""
        check_open(request, get_protocol(self.spec.protocol).messages, self.name)
        self.check_job_file(request)
        resume = request.resume
        if self.job.begun and not resume:
            raise DpfedInputError(
                f"{self.name} holds a checkpoint of job {self.spec.id} at round "
                f"{self.host.round}; continue it with the leader's `dpfed run --config "
                f"{self.spec.path} --out RESULT --resume` (RESULT: the stopped run's --out), "
                f"or remove {self.folder} to start afresh."
            )
        if not self.job.opened:
            self.budget.open()
            self.job.opened = True
        reply = self.host.describe() | {
            "round": self.host.round,
            "begun": self.job.begun,
            "planned_releases": len(self.host.plan),
        }
        return reply

    def begin_job(self, request: BeginJob) -> dict[str, Any]:
        """Start the role (once), and let the links resume after a refusal was dealt with."""
        if not self.job.opened:
            raise DpfedInputError("begin before open")
        self.job.begin()
        for link in self.links.values():
            if link.refused:
                link.refused = None  # the leader resumes after a refusal was dealt with
        return {"round": self.host.round}

    def close_submissions(self, request: CloseSubmissions) -> dict[str, Any]:
        """The submission deadline passed: the host stops waiting for missing inputs. The
        close is journaled like a message, so a restarted party closes again on replay."""
        if not self.job.begun:
            raise DpfedInputError(
                f"{self.name} cannot close the submissions of job {self.spec.id}: it has not begun."
            )
        out = self.job.close_submissions()  # refuses before changing anything
        party_log(
            self.name,
            f"submissions closed by the leader (the submission deadline "
            f"passed); {len(out)} messages follow",
        )
        return {"round": self.host.round, "finished": self.host.finished}

    def status(self, request: StatusRequest) -> dict[str, Any]:
        """Round, refusals, links and the budget spent so far."""
        return {
            "round": self.host.round,
            "finished": self.host.finished,
            "refusals": self.refusals(),
            "links": {peer: link.status() for peer, link in self.links.items()},
            "epsilon": self.budget.spent_epsilon(),
        }

    def account(self, request: AccountRequest) -> dict[str, Any]:
        """The party's public account of a finished job (its releases, what evaluation needs)."""
        if not self.host.finished:
            raise DpfedInputError(f"{self.name} has not finished (round {self.host.round}).")
        return self.host.final()

    def evaluate(self, request: EvaluateRequest) -> dict[str, Any]:
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
        if not self.allow_exact_disclosure and self.host.holds_data and self.budget.budgeted():
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
        write_json_atomic(
            record_path,
            {
                "job": self.spec.id,
                "models": digest,
                "n_models": int(array.shape[0]),
                "losses": losses,
            },
        )
        party_log(
            self.name,
            f"disclosed its exact mean training loss at {array.shape[0]} models "
            'to the leader ([job].evaluate = "full"); recorded in ' + str(record_path),
        )
        return {"losses": losses}

    def finish_job(self, request: FinishJob) -> dict[str, Any]:
        """Save the final state and the party's part of the model, close the job in the
        ledger and stop."""
        if not self.host.finished:
            raise DpfedInputError(f"{self.name} has not finished (round {self.host.round}).")
        model_path = self.folder / "model.json"
        # the final state, so that a restart serves predictions without replaying the journal
        # (whose releases the ledger has closed); the journal stays as the record of the job
        self.job.snapshot(truncate=False)
        write_json_atomic(
            model_path,
            {
                "job": self.spec.id,
                "party": self.name,
                "columns": None if self.party.columns is None else list(self.party.columns),
                "rows": None if self.party.rows is None else list(self.party.rows),
                "coef": self.host.model(),
                **self.host.model_details(),
            },
        )
        self.budget.close_job()
        self.host.discard_replay_files()  # the final state is saved: no replay needs them
        self.stop(EXIT_FINISHED, f"job {self.spec.id} finished; model in {model_path}")
        return self.host.final() | {"model": str(model_path)}

    def suspend_job(self, request: SuspendJob) -> dict[str, Any]:
        """Keep the state and wait for the leader's resume."""
        party_log(
            self.name,
            f"job suspended by the leader: {request.reason}; state kept, "
            "waiting for the leader's `dpfed run ... --resume`",
        )
        self.job.opened = False
        return {"round": self.host.round}

    def abort_job(self, request: AbortJob) -> dict[str, Any]:
        """Stop; withdraw the budget reservation if nothing was released."""
        released = bool(self.host.events)
        freed = False
        if self.job.opened and not released:
            # nothing spent: withdraw the reservation, so that the same job can run again
            freed = self.budget.withdraw(request.reason)
        if self.job.begun:
            message = (
                f"job {self.spec.id} not continued: {request.reason}; its state is kept "
                f"in {self.folder} for the leader's `dpfed run ... --resume`"
            )
        else:
            message = (
                f"job {self.spec.id} aborted before it began: {request.reason}; nothing "
                "ran"
                + (
                    "; its budget reservation is withdrawn and the job can run again"
                    if freed
                    else ""
                )
            )
        self.stop(EXIT_ABORTED, message)
        return {"released": released}

    # -- prediction with the trained model ----------------------------------------------------
    def open_prediction(self, request: OpenPrediction) -> dict[str, Any]:
        """Open a prediction once the job file is checked."""
        self.check_job_file(request)
        return self.predictions.open(request)

    def end_prediction(self, request: EndPrediction) -> dict[str, Any]:
        """Stop the predictions and the process."""
        self.predictions.stop()
        self.stop(EXIT_FINISHED, f"prediction over: {request.reason}")
        return {}
