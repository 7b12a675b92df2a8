"""In-process transport: delivers messages between roles in one process, in FIFO order.

Delivery order is deterministic, so a seeded run is bit-identical across repeats.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Protocol

from dpfed.runtime.messages import Message


class Role(Protocol):
    name: str

    def handle(self, message: Message) -> list[Message]: ...


class InProcessTransport:
    """Runs roles to quiescence by delivering every message to its recipient."""

    def __init__(self, roles: Mapping[str, Role]) -> None:
        self.roles = dict(roles)
        self.delivered = 0

    def run(self, initial: Iterable[Message]) -> int:
        """Deliver ``initial`` and every message they cause; return the count delivered."""
        queue: deque[Message] = deque(initial)
        while queue:
            message = queue.popleft()
            role = self.roles.get(message.recipient)
            if role is None:
                raise KeyError(
                    f"message for unknown party {message.recipient!r} from {message.sender!r}"
                )
            queue.extend(role.handle(message))
            self.delivered += 1
        return self.delivered
