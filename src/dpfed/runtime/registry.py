"""The protocols the networked runtime can run, and the interface each one implements.

The runtime (job file, party process, leader) never names a protocol: it looks the job's
``[job].protocol`` up here and talks to the :class:`FederatedProtocol` it gets. A protocol is a
package under :mod:`dpfed.protocols`; it implements :class:`FederatedProtocol` once, as a
module-level object, and is registered by one line of :data:`PROTOCOL_REGISTRY` naming that
object. The registry holds names, not imports, so the runtime depends on no protocol and a
protocol is imported only when a job runs it (importing it also registers its message kinds
with the wire format).
"""

from __future__ import annotations

import importlib
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.parameters import Parameter
from dpfed.runtime.messages import Message

if TYPE_CHECKING:  # the job file imports this module
    from dpfed.runtime.hosting import ProtocolHost
    from dpfed.runtime.jobspec import JobSpec, PartySpec

#: Protocol name -> ``"module:attribute"`` of its :class:`FederatedProtocol` object.
PROTOCOL_REGISTRY: dict[str, str] = {
    "vertical": "dpfed.protocols.vertical.host:PROTOCOL",
    "consensus": "dpfed.protocols.consensus.host:PROTOCOL",
    "decentralized": "dpfed.protocols.decentralized.host:PROTOCOL",
    "secure_sum": "dpfed.protocols.secure_sum.host:PROTOCOL",
    "psi_align": "dpfed.protocols.psi_align.host:PROTOCOL",
    "vertical_secure": "dpfed.protocols.vertical_secure.host:PROTOCOL",
}


class ReportOfRound(typing.Protocol):
    """What the leader reads of a protocol's per-round report message."""

    round: int
    finished: bool

    def entry(self) -> dict[str, Any]:
        """The round's history entry (figures computed from released values)."""
        ...


#: Job-file parameter table: key -> the parameter that reads its value
#: (:meth:`dpfed.parameters.Parameter.read`).
ParamTypes = Mapping[str, Parameter]


@dataclass(frozen=True)
class JobRecord:
    """What the leader has when training is over, for :meth:`FederatedProtocol.result`.

    Attributes
    ----------
    history : list of dict
        The round reports' history entries, in round order (empty for a protocol without
        round reports, :attr:`FederatedProtocol.report` None).
    accounts : dict of str to dict
        Every required party's public account of the finished job (``ProtocolHost.final()``;
        a droppable party, :meth:`FederatedProtocol.dropouts`, has none).
    n_samples : dict of str to int
        The number of training rows each party declared when the job opened (a droppable
        party never opened is absent).
    evaluate : callable
        ``evaluate(name, models) -> list of float``: party ``name``'s training losses at
        ``models``, answered once and only under ``[job].evaluate = "full"``.
    seconds : float
        Wall-clock seconds of training.
    """

    history: list[dict[str, Any]]
    accounts: dict[str, dict[str, Any]]
    n_samples: dict[str, int]
    evaluate: Callable[[str, list[list[float]]], list[float]]
    seconds: float


@dataclass(frozen=True)
class Dropouts:
    """Parties a job can do without: the leader waits for them until a submission deadline
    and drops those not in by then.

    Attributes
    ----------
    parties : tuple of str
        The droppable parties (a secure sum's clients); every other party is required.
    tolerated : int
        At most this many of them may be dropped; more and the job is refused.
    deadline : float
        Seconds after the leader has begun the required parties within which a droppable
        party's input must be in.
    """

    parties: tuple[str, ...]
    tolerated: int
    deadline: float


class FederatedProtocol(ABC):
    """One protocol as the networked runtime runs it. Every member is required but the
    hooks with a default (:meth:`check_job`, :meth:`dropouts`)."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The ``[job].protocol`` value that selects it."""

    @property
    @abstractmethod
    def params(self) -> ParamTypes:
        """The keys ``[params]`` may hold, each with the parameter that reads its value."""

    @property
    @abstractmethod
    def holds(self) -> str:
        """What a data-holding party's ``[[party]]`` table names: ``"columns"`` or ``"rows"``."""

    @property
    @abstractmethod
    def dataless_role(self) -> str | None:
        """The ``role`` of parties that hold no data (a server, a compute node), or None."""

    @property
    @abstractmethod
    def same_rows(self) -> bool:
        """Whether every party must hold the same rows in the same order (checked at open)."""

    @property
    @abstractmethod
    def messages(self) -> tuple[type[Message], ...]:
        """Every message class its parties send (the round report included), registered with
        the wire format; the job's open handshake compares their fingerprint."""

    #: The message classes its parties exchange in a prediction by ID (besides the shares;
    #: :meth:`~dpfed.runtime.hosting.ProtocolHost.prediction_by_id`), registered with the
    #: wire format; a prediction's open compares their fingerprint. Default: none.
    prediction_messages: tuple[type[Message], ...] = ()

    @property
    @abstractmethod
    def report(self) -> type | None:
        """The message class a party sends the leader once per round (``round``,
        ``finished``, ``entry()``), or None: the leader then follows the parties' status."""

    @abstractmethod
    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        """Refuse (``DpfedInputError``) a set of parties the protocol cannot run."""

    @abstractmethod
    def private(self, params: Mapping[str, Any]) -> bool:
        """Whether ``[params]`` asks for a privacy mechanism (then exact figures stay home
        unless ``[job].evaluate = "full"``)."""

    #: How a command line summarises the job's result: ``"model"`` (a trained model's figures)
    #: or ``"aggregate"`` (a released aggregate, as the secure sum's).
    result_kind: str = "model"

    def reporter(self, spec: JobSpec) -> str:
        """The party that sends the leader the round reports (:attr:`report`); the leader
        refuses them from any other party. Default: the first ``[[party]]`` (the label holder
        of a vertical job)."""
        return spec.names[0]

    def planned_rounds(self, spec: JobSpec) -> int | None:
        """The job's number of rounds when it is known before the job runs (for the progress
        bar, the spacing of log lines and the live page), or None. Default: ``[params]
        iterations`` when it is an integer."""
        rounds = spec.params.get("iterations")
        return rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None

    def variant(self, params: Mapping[str, Any]) -> str | None:
        """The registered protocol that runs a job of this protocol with ``params`` instead
        (a mode with messages of its own, such as the vertical protocol's secure mode), or
        None (the default): this one."""
        return None

    def check_job(self, spec: JobSpec) -> None:  # noqa: B027 (optional hook)
        """Refuse (``DpfedInputError``) a job whose ``[params]`` the protocol cannot run, as
        its hosts would, so that ``dpfed run`` and ``dpfed party`` refuse a bad job file
        before they contact anyone. Default: accept."""

    def dropouts(self, spec: JobSpec) -> Dropouts | None:
        """The parties job ``spec`` can do without, and until when it waits for them; None
        (the default): every party is required and waited for up to ``round_timeout``.

        With a value, the leader sends the required parties :class:`CloseSubmissions
        <dpfed.runtime.control.CloseSubmissions>` at the deadline, which their hosts answer in
        :meth:`ProtocolHost.close <dpfed.runtime.hosting.ProtocolHost.close>`.
        """
        return None

    def prediction_output(self, spec: JobSpec, scores: np.ndarray) -> dict[str, Any]:
        """What the recipient of a networked prediction writes for the summed ``scores``
        (shape ``(n_rows,)``): the scores and what the model's loss makes of them. Default:
        refused (see :meth:`~dpfed.runtime.hosting.ProtocolHost.prediction_share`)."""
        raise DpfedInputError(f"protocol {self.name!r} has no networked prediction.")

    @abstractmethod
    def host(self, spec: JobSpec, name: str) -> ProtocolHost:
        """Party ``name``'s side of the job: its data, its role, its budget plan."""

    @abstractmethod
    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        """The leader's ``result.json`` of a finished job."""


def protocol_names() -> list[str]:
    """The registered protocol names, sorted."""
    return sorted(PROTOCOL_REGISTRY)


def get_protocol(name: str) -> FederatedProtocol:
    """The registered protocol ``name``.

    Raises
    ------
    DpfedInputError
        If no protocol of that name is registered.
    """
    if name not in PROTOCOL_REGISTRY:
        raise DpfedInputError(f"[job].protocol must be one of {protocol_names()}. Found {name!r}.")
    module_name, attribute = PROTOCOL_REGISTRY[name].split(":")
    protocol = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(protocol, FederatedProtocol) or protocol.name != name:
        raise TypeError(f"{PROTOCOL_REGISTRY[name]} is not the protocol {name!r}.")
    return protocol


def build_host(spec: JobSpec, name: str) -> ProtocolHost:
    """Party ``name``'s host for ``spec``'s protocol."""
    return get_protocol(spec.protocol).host(spec, name)


__all__ = [
    "PROTOCOL_REGISTRY",
    "Dropouts",
    "FederatedProtocol",
    "JobRecord",
    "ParamTypes",
    "ReportOfRound",
    "build_host",
    "get_protocol",
    "protocol_names",
]
