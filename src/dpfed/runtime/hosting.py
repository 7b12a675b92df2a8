"""How a protocol plugs into the networked runtime.

A protocol family provides a module with three names:

``Host``
    ``Host(spec, name)`` builds party ``name``'s side of the job: it reads that party's own data
    (``spec.party(name)``), builds its transport-free role and states its budget plan. It offers
    what :class:`ProtocolHost` lists.
``REPORT``
    the message class the job's reporting party sends the leader once per round (with
    ``round``, ``finished`` and ``entry()``, the history entry).
``result(spec, history, finals, *, n_samples, seconds)``
    the leader's ``result.json`` from the history and every party's ``final()``.

The party process (:mod:`dpfed.runtime.party`) and the leader (:mod:`dpfed.runtime.leader`)
know nothing else about a protocol.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.messages import Message

#: Protocol name -> module implementing it for the networked runtime.
HOSTED_PROTOCOLS = {"vertical": "dpfed.runtime.vertical_host"}


class ProtocolHost(Protocol):
    """One party's side of a networked job."""

    plan: list[float]  # noise multipliers of every release it may make, reserved up front

    @property
    def exact_release(self) -> bool: ...  # its data leave it without noise under this job

    @property
    def round(self) -> int: ...

    @property
    def finished(self) -> bool: ...

    @property
    def events(self) -> list[PrivacyEvent]: ...  # its releases so far

    def start(self) -> list[Message]: ...  # the job's first messages (may be none)

    def handle(self, message: Message) -> list[Message]: ...  # refuses before changing state

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]: ...

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None: ...

    def model(self) -> np.ndarray: ...

    def describe(self) -> dict[str, Any]: ...  # shapes the leader checks (n_samples, ...)

    def final(self) -> dict[str, Any]: ...  # public account for the result (its releases)


def protocol_module(protocol: str) -> ModuleType:
    """The module hosting ``protocol`` (it registers the protocol's messages on import)."""
    if protocol not in HOSTED_PROTOCOLS:
        raise DpfedInputError(
            f"protocol {protocol!r} has no networked runtime. Expected one of "
            f"{sorted(HOSTED_PROTOCOLS)}."
        )
    return importlib.import_module(HOSTED_PROTOCOLS[protocol])


def build_host(spec, name: str) -> ProtocolHost:
    """Party ``name``'s host for ``spec``'s protocol."""
    return protocol_module(spec.protocol).Host(spec, name)
