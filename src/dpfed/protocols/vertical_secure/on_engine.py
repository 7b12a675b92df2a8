r"""Secure vertical logistic regression on an engine: the networked parties' own roles
(:class:`~dpfed.protocols.vertical_secure.roles.SecureRole`) run where an engine puts them,
e.g. each party in a Ray actor.

The roles are the ones a networked job runs, message for message; the engine delivers their
messages (the CKKS ciphertexts as bytes, in parts) instead of sockets, and a small
:class:`RoundSink` stands in for the leader, taking the label holder's round reports. Each
party's key pair travels with its role to the process that runs it (pickled as its serialised
key pair, :class:`dpfed.secure.ckks.KeyHolder`), as its rows and labels do; nothing else
leaves a party but its messages. With the same seed the noise is the noise of
:func:`~dpfed.protocols.vertical_secure.driver.train_secure_vertical` (each party draws from its
own generator in the same order); the model agrees up to CKKS's rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfed.engines import Engine, engine_summary, get_engine
from dpfed.protocols.vertical.evaluation import RoundReport
from dpfed.protocols.vertical_secure.messages import CipherPart
from dpfed.protocols.vertical_secure.party import KEY_HOLDERS, RoundCost, SecureParty
from dpfed.protocols.vertical_secure.roles import MemoryOutbox, SecureRole
from dpfed.protocols.vertical_secure.setup import SecureSetup
from dpfed.protocols.vertical_secure.weighting import WeightedPassive
from dpfed.runtime.messages import Message, ProtocolError
from dpfed.runtime.wire import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["LEADER", "NAMES", "EngineRun", "RoundSink", "party_names", "run_secure_roles"]

#: The parties' names on the engine with two parties: the label holder's, then the passive
#: party's (:func:`party_names`).
NAMES = ("label", "passive")
#: Who takes the round reports.
LEADER = "leader"
#: Ciphertexts set up once: the public contexts and the encrypted labels.
_SETUP_KINDS = ("public", "labels")


def party_names(k: int) -> tuple[str, ...]:
    """The names of ``k`` parties on the engine: :data:`NAMES` for two, else ``label``,
    ``passive1``, ``passive2``, ..."""
    return NAMES if k == 2 else (NAMES[0], *(f"{NAMES[1]}{j}" for j in range(1, k)))


@dataclass
class EngineRun:
    """What a run of the roles on an engine leaves besides the parties' final state.

    Attributes
    ----------
    costs : list of RoundCost
        One per party (``block`` = its index): its seconds and the bytes it sent after the
        set-up.
    setup_bytes : int
        The public contexts and the encrypted labels.
    weighting : WeightedPassive or None
        The label holder's weight of the passive scores (``protect="passive"`` or
        ``"parties"``).
    engine : dict or None
        What the engine reports (None in process).
    """

    costs: list[RoundCost]
    setup_bytes: int
    weighting: WeightedPassive | None
    engine: dict[str, Any] | None


class RoundSink:
    """The leader's part on an engine: it takes the label holder's round reports, answers
    nothing, and tells ``observer`` (if set) of each one."""

    name = LEADER

    def __init__(self, observer: Callable[[RoundReport], None] | None = None) -> None:
        self.rounds: list[int] = []
        self.finished = False
        self.observer = observer

    def handle(self, message: Message) -> list[Message]:
        if not isinstance(message, RoundReport) or message.sender != NAMES[0]:
            raise ProtocolError(
                f"the leader takes the label holder's round reports; found "
                f"{type(message).__name__} from {message.sender}"
            )
        self.rounds.append(int(message.round))
        self.finished = bool(message.finished)
        if self.observer is not None:
            self.observer(message)
        return []

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return {}, {"rounds": list(self.rounds), "finished": self.finished}

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.rounds = [int(r) for r in meta["rounds"]]
        self.finished = bool(meta["finished"])


def run_secure_roles(
    parties: tuple[SecureParty, ...],
    setup: SecureSetup,
    engine: str | Engine,
    progress: Callable[[int, RoundCost | None], None] | None = None,
) -> EngineRun:
    r"""Run the parties' roles on ``engine`` until the label holder reports the job finished;
    leave each party (its block, its own model) in its final state.

    Parameters
    ----------
    parties : tuple of SecureParty
        The label holder, then the passive parties; the key holders with their CKKS key
        pairs.
    setup : SecureSetup
    engine : str or Engine
        ``"inprocess"``, ``"ray"`` or an engine instance (:func:`dpfed.engines.get_engine`).
    progress : callable, optional
        Called with ``(round, None)`` as each round's report reaches the leader (costs are
        known per party only at the end).

    Returns
    -------
    EngineRun

    Raises
    ------
    ProtocolError
        If the run ends before the label holder reports the job finished.
    """
    if any(p.keys is None for p in parties if p.index in KEY_HOLDERS):
        raise ProtocolError(
            "the secure roles run CKKS: the key holders need their key pairs (backend 'ckks')"
        )
    names = party_names(len(parties))
    roles = [
        SecureRole(p, names, LEADER, outbox=MemoryOutbox(), max_bytes=DEFAULT_MAX_MESSAGE_BYTES)
        for p in parties
    ]

    def report(message: RoundReport) -> None:
        if progress is not None and not message.finished:
            progress(int(message.round) - 1, None)

    sink = RoundSink(report)
    initial = [m for role in roles for m in role.start()]
    setup_bytes = sum(
        m.nbytes for m in initial if isinstance(m, CipherPart) and m.kind in _SETUP_KINDS
    )
    ran = get_engine(engine).run({**dict(zip(names, roles, strict=True)), LEADER: sink}, initial)
    if not sink.finished:
        raise ProtocolError(
            f"the secure job stopped after round {max(sink.rounds, default=0)} "
            f"of {setup.rounds} without finishing"
        )
    if progress is not None:
        progress(setup.rounds - 1, None)
    setup_share = [
        sum(
            m.nbytes
            for m in initial
            if isinstance(m, CipherPart) and m.kind in _SETUP_KINDS and m.sender == name
        )
        for name in names
    ]
    costs = [
        RoundCost(k, role.seconds, role.bytes_sent - setup_share[k]) for k, role in enumerate(roles)
    ]
    return EngineRun(costs, setup_bytes, roles[0].weighting, engine_summary(ran))
