"""What a party process needs from a protocol: one party's side of a job.

A protocol (:class:`dpfed.runtime.registry.FederatedProtocol`) builds, for each party, a
:class:`ProtocolHost`: it reads that party's own data (``spec.party(name)``), builds its
transport-free role, states its budget plan and offers what :class:`ProtocolHost` lists. The
party process (:mod:`dpfed.runtime.party`) and the leader (:mod:`dpfed.runtime.leader`) know
nothing else about a protocol.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.privacy.accounting import Release
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import new_secret, secret_generator, simulation_generator
from dpfed.runtime.jobspec import JobSpec
from dpfed.runtime.messages import Message
from dpfed.runtime.private_files import load_or_create_secret


@dataclass(frozen=True)
class PartyShare:
    """One party's share of a prediction (:meth:`ProtocolHost.prediction_share`).

    Attributes
    ----------
    scores : numpy.ndarray, shape (n_rows,)
        Its share of every new row's score.
    training : numpy.ndarray of bool, shape (n_rows,)
        Which rows the party recognises as its training rows (the protocol says how): their
        shares are the exact scores of its training rows, which training released only with
        noise.
    """

    scores: np.ndarray
    training: np.ndarray


class PredictionById(Protocol):
    """One party's side of a prediction by ID (:meth:`ProtocolHost.prediction_by_id`): a
    transport-free exchange in which the parties agree which of the recipient's rows every
    party holds, and in what order, before each scores its columns of them.

    The party process sends what :meth:`start` and :meth:`handle` return to the peers they
    name, and once :attr:`finished` without a :attr:`refusal`, sends :meth:`share` to the
    recipient; the recipient writes :meth:`listing` beside the summed scores.
    """

    @property
    def finished(self) -> bool:
        """Whether the rows are agreed (or refused)."""

    @property
    def refusal(self) -> str:
        """Why the rows were refused (no row every party holds, say), or ``""``."""

    def start(self) -> list[Message]: ...

    def handle(self, message: Message) -> list[Message]:
        """The messages ``message`` leads to; raises ``ProtocolError`` for one it cannot take."""

    def share(self) -> PartyShare:
        """Its share of the agreed rows' scores, in the agreed order."""

    def listing(self) -> dict[str, Any]:
        """The recipient's record of the rows: ``order`` (the agreed rows' positions in the
        order the file lists them), ``ids`` (in that order) and what was not scored."""


class ProtocolHost(ABC):
    """One party's side of a networked job. Every member is required but :meth:`close`.

    Attributes
    ----------
    plan : list of float or Release
        Every release it may make, reserved in its budget up front: a
        :class:`~dpfed.privacy.accounting.Release` (mechanism, noise multiplier) or a bare
        noise multiplier (a Gaussian release).
    """

    plan: list[float | Release]

    @property
    @abstractmethod
    def holds_data(self) -> bool:
        """False for a party with no data of its own (a server, a compute node): no ledger."""

    @property
    @abstractmethod
    def exact_release(self) -> bool:
        """Whether its data leave it without noise under this job."""

    @property
    @abstractmethod
    def ledger_support(self) -> bool:
        """Whether the budget ledger can account its releases (else a budgeted party refuses)."""

    @property
    @abstractmethod
    def ledger_refusal(self) -> str:
        """Why the ledger cannot account its releases (said when it refuses)."""

    @property
    @abstractmethod
    def round(self) -> int:
        """The protocol round it is in."""

    @property
    @abstractmethod
    def finished(self) -> bool:
        """Whether its part of the job is done."""

    @property
    @abstractmethod
    def events(self) -> list[PrivacyEvent]:
        """Its releases so far."""

    @abstractmethod
    def start(self) -> list[Message]:
        """The job's first messages (may be none)."""

    @abstractmethod
    def handle(self, message: Message) -> list[Message]:
        """The messages ``message`` leads to; refuses before changing any state."""

    @abstractmethod
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Its state for a snapshot: arrays and JSON-able metadata."""

    @abstractmethod
    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore the state of :meth:`state_dict`."""

    @abstractmethod
    def model(self) -> Any:
        """Its part of the trained model (written to its job folder at the end)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Shapes the leader checks when the job opens (``n_samples``, ...)."""

    @abstractmethod
    def final(self) -> dict[str, Any]:
        """Its public account of the finished job (its releases)."""

    @abstractmethod
    def losses(self, models: list[list[float]]) -> list[float]:
        """Its mean training loss at each model (evaluation under ``evaluate = "full"``)."""

    @property
    def rows_digest(self) -> str | None:
        """The digest of the rows it trains on when they were agreed by ID (recorded with the
        job in its budget ledger), else None (the default)."""
        return None

    def model_details(self) -> dict[str, Any]:
        """What its ``model.json`` says beside ``coef`` when a share of a prediction is not
        rows times ``coef`` alone (empty, the default)."""
        return {}

    def discard_replay_files(self) -> None:  # noqa: B027 - an optional hook: no-op by default
        """Remove what it kept only to replay its messages after a restart, once the job has
        finished and its final state is saved (nothing, the default)."""

    def peer_share(self, sender: str, scores: np.ndarray) -> np.ndarray:
        """A peer's share of a prediction as this party, its recipient, counts it (the share
        as sent, the default), shape ``(n_rows,)``."""
        return scores

    def close(self) -> list[Message]:
        """The submission deadline passed: stop waiting for missing inputs and return the
        messages that follows. Refuses (``DpfedInputError``) before changing any state.

        Only a protocol with droppable parties
        (:meth:`dpfed.runtime.registry.FederatedProtocol.dropouts`) overrides it; the default
        refuses.
        """
        raise DpfedInputError(
            f"{type(self).__name__} has no submission deadline: there is nothing to close."
        )

    def prediction_share(self, data: str) -> PartyShare:
        """Its share of the scores of the rows named by ``data``, once the job has finished,
        and which of those rows are its own training rows.

        ``data`` names the new rows as each party resolves it at its own site (a data set's
        part or a file, see the protocol). The shares of every party add up to the trained
        model's scores, shape ``(n_rows,)``. Whether a share of training rows may leave the
        party is the party process's decision (:mod:`dpfed.runtime.party`). Default: refused,
        for protocols whose parties each hold the whole model (they predict locally, no
        protocol needed).
        """
        raise DpfedInputError(
            "this protocol has no networked prediction: every party holding a model holds "
            "all of it and predicts on its own."
        )

    def prediction_by_id(self, request: str, data: str, recipient: str) -> PredictionById:
        """Its side of prediction ``request`` of the rows of its own table ``data`` (a file
        in its data folder), matched to the other parties' rows by ID, the scores going to
        party ``recipient``. Default: refused (a job without IDs predicts by position,
        :meth:`prediction_share`)."""
        raise DpfedInputError(
            "this job's rows have no IDs to predict by: name rows every party holds in the "
            "same order."
        )


class HostedRole(Protocol):
    """What :class:`RoleDelegate` needs of a protocol role (a transport-free state machine)."""

    @property
    def round(self) -> int: ...

    @property
    def finished(self) -> bool: ...

    def start(self) -> list[Message]: ...

    def handle(self, message: Message) -> list[Message]: ...

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]: ...

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None: ...


class RoleDelegate(ProtocolHost):
    """The part of a :class:`ProtocolHost` that only forwards to the wrapped protocol role
    (``self.role``): its round, status, first messages, message handling and state."""

    role: HostedRole

    @property
    def round(self) -> int:
        return self.role.round

    @property
    def finished(self) -> bool:
        return self.role.finished

    def start(self) -> list[Message]:
        return self.role.start()

    def handle(self, message: Message) -> list[Message]:
        return self.role.handle(message)

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return self.role.state_dict()

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.role.load_state_dict(arrays, meta)


#: The file in a party's job folder that holds its noise secret.
NOISE_SECRET_FILE = "noise.key"


def noise_generator(spec: JobSpec, name: str, *, index: int, n_parties: int) -> np.random.Generator:
    """Party ``name``'s noise generator for job ``spec``.

    In a simulation (``[job].simulation = true``) it is stream ``index`` of ``n_parties`` from
    ``[params].seed``, as in the in-process runners. Otherwise it is keyed by the party's own
    secret (:func:`dpfed.privacy.noise_source.secret_generator`), which is created from the
    operating system's CSPRNG in the party's job folder the first time and read back on every
    restart, so a restarted party draws the same noise again and replays its releases.
    """
    if spec.simulation:
        return simulation_generator(int(spec.params["seed"]), index, n_parties)
    folder = spec.party(name).workdir / spec.id
    return secret_generator(load_or_create_secret(folder, NOISE_SECRET_FILE, new_secret))
