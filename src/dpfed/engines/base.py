"""What an engine is: the place where a protocol's roles run and exchange their messages.

A *role* is a transport-free state machine (:class:`Role`): ``start()`` returns its first
messages and ``handle(message)`` the messages one message leads to. An engine delivers every
message to its recipient until none is left, in the order of one first-in-first-out queue,
so a seeded run is the same run on every engine:

* :class:`~dpfed.engines.inprocess.InProcessEngine` (``"inprocess"``, the default) runs the
  roles in the calling process;
* :class:`~dpfed.engines.ray_engine.RayEngine` (``"ray"``, extra ``dpfed[ray]``) runs them in
  groups, one group per Ray actor, on a local Ray or a cluster.

After :meth:`Engine.run` the caller's role objects hold the roles' final state, so a driver
reads them as if they had run in its process. A role may carry an ``observer`` attribute (a
callable taking a record, e.g. the end of a round); every engine calls it in the calling
process, in the order the records were made, and the roles the observer reads are then as
they were when the record was made (for every protocol here the observer runs at a barrier,
where every other role waits).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dpfed.runtime.messages import Message

__all__ = [
    "Engine",
    "EngineReport",
    "Role",
    "engine_block",
    "engine_summary",
    "unknown_recipient",
]


class Role(Protocol):
    """What an engine needs of a protocol role."""

    name: str

    def handle(self, message: Message) -> list[Message]: ...

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]: ...

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None: ...


@dataclass
class EngineReport:
    """What one run on an engine did.

    Attributes
    ----------
    engine : str
        The engine's name.
    delivered : int
        Messages delivered.
    waves : int
        Delivery waves: the queue as it stood, delivered at once (one per message hop).
    workers : list of dict
        One entry per worker process (Ray actor): its roles, node and peak resident memory
        in bytes. Empty in-process.
    """

    engine: str
    delivered: int = 0
    waves: int = 0
    workers: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "engine": self.engine,
            "delivered": self.delivered,
            "waves": self.waves,
        }
        if self.workers:
            out["workers"] = self.workers
            out["peak_rss_bytes_max"] = max(w["peak_rss_bytes"] for w in self.workers)
        return out


class Engine(Protocol):
    """Where roles run (see the module docstring)."""

    name: str

    def run(self, roles: Mapping[str, Role], initial: Iterable[Message]) -> EngineReport:
        """Deliver ``initial`` and every message they cause, in first-in-first-out order,
        then leave each of ``roles`` in its final state; return what was done."""
        ...


def engine_summary(report: EngineReport) -> dict[str, Any] | None:
    """What a result records of its engine: nothing in-process (the result is unchanged),
    the report otherwise (workers and their peak memory)."""
    return None if report.engine == "inprocess" else report.as_dict()


def engine_block(summary: dict[str, Any] | None) -> dict[str, Any]:
    """A result's ``engine`` entry (empty in-process)."""
    return {} if summary is None else {"engine": summary}


def unknown_recipient(message: Message) -> KeyError:
    """The error of a message addressed to no role."""
    return KeyError(f"message for unknown party {message.recipient!r} from {message.sender!r}")
