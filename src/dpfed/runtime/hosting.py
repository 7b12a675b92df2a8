"""What a party process needs from a protocol: one party's side of a job.

A protocol (:class:`dpfed.runtime.registry.Protocol`) builds, for each party, a
:class:`ProtocolHost`: it reads that party's own data (``spec.party(name)``), builds its
transport-free role, states its budget plan and offers what :class:`ProtocolHost` lists. The
party process (:mod:`dpfed.runtime.party`) and the leader (:mod:`dpfed.runtime.leader`) know
nothing else about a protocol.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import new_secret, secret_generator, simulation_generator
from dpfed.runtime.messages import Message
from dpfed.runtime.private_files import load_or_create_secret


class RoleDelegate:
    """The part of a :class:`ProtocolHost` that only forwards to the wrapped protocol role
    (``self.role``): its round, status, first messages, message handling and state."""

    role: Any

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

    # optional: holds_data (False: no budget ledger at all), ledger_support (False: releases
    # the ledger cannot account, refused where a budget is set), losses(models) (evaluation)


#: The file in a party's job folder that holds its noise secret.
NOISE_SECRET_FILE = "noise.key"


def noise_generator(spec, name: str, *, index: int, n_parties: int) -> np.random.Generator:
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
