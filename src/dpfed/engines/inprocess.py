"""The in-process engine: every role in the calling process, one first-in-first-out queue.

Delivery order is deterministic, so a seeded run is bit-identical across repeats.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping

from dpfed.engines.base import EngineReport, Role, unknown_recipient
from dpfed.runtime.messages import Message

__all__ = ["InProcessEngine"]


class InProcessEngine:
    """Runs roles to quiescence by delivering every message to its recipient in turn.

    Parameters
    ----------
    tap : callable, optional
        Called with every message just before it is delivered (a trace of the run).
    """

    name = "inprocess"

    def __init__(self, tap: Callable[[Message], None] | None = None) -> None:
        self.tap = tap

    def run(self, roles: Mapping[str, Role], initial: Iterable[Message]) -> EngineReport:
        """Deliver ``initial`` and every message they cause; observers are called as the
        records are made."""
        report = EngineReport(self.name)
        queue: deque[Message] = deque(initial)
        wave_left = len(queue)
        while queue:
            message = queue.popleft()
            role = roles.get(message.recipient)
            if role is None:
                raise unknown_recipient(message)
            if self.tap is not None:
                self.tap(message)
            queue.extend(role.handle(message))
            report.delivered += 1
            wave_left -= 1
            if wave_left == 0:
                report.waves += 1
                wave_left = len(queue)
        return report
