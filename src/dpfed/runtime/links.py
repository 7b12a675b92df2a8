"""Exactly-once, in-order message links between the processes of a job.

Every sender numbers its messages to each recipient 1, 2, 3, ... and sends them one at a time,
retrying until the recipient acknowledges; the recipient acknowledges only once it has handled
the message and checkpointed. So after any crash and restart:

* a sender re-sends what it had not seen acknowledged (its queue is in its checkpoint), and
* a recipient that already handled a message (same number, same SHA-256 digest) acknowledges it
  again without handling it twice; a different message under a handled number, or a number
  that skips one, is refused.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import grpc

from dpfed.runtime.transport import Connection, Refused, RemoteError
from dpfed.runtime.wire import DEFAULT_MAX_MESSAGE_BYTES, WireError, encode_batch, split_batch


def received_frames(payload: bytes, *, max_bytes: int) -> list[memoryview]:
    """The frames of one received call (a batch or a single frame), or a refusal."""
    try:
        return split_batch(payload, max_bytes=max_bytes)
    except WireError as exc:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None


class InboundLinks:
    """Which message numbers each sender has had handled, with their digests."""

    def __init__(self) -> None:
        self.digests: dict[str, list[str]] = {}

    def last(self, sender: str) -> int:
        return len(self.digests.get(sender, []))

    def is_new(self, sender: str, seq: int, digest: str) -> bool:
        """True for the next message of ``sender``; False for a faithful repeat.

        Raises
        ------
        Refused
            If ``seq`` skips a number or repeats a handled number with other content.
        """
        handled = self.digests.get(sender, [])
        if seq == len(handled) + 1:
            return True
        if 1 <= seq <= len(handled):
            if handled[seq - 1] == digest:
                return False
            raise Refused(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"message {seq} from {sender} replays a handled number with different content "
                f"(replayed or forged message)",
            )
        raise Refused(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"message {seq} from {sender} is out of order: expected {len(handled) + 1}",
        )

    def mark(self, sender: str, seq: int, digest: str) -> None:
        handled = self.digests.setdefault(sender, [])
        if seq != len(handled) + 1:
            raise RuntimeError(f"mark({sender}, {seq}) out of order")
        handled.append(digest)

    def state(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.digests.items()}

    def load(self, state: dict[str, list[str]]) -> None:
        self.digests = {k: list(v) for k, v in state.items()}


class OutboundLink:
    """Delivers one process's messages to one peer, in order, until acknowledged.

    A background thread sends the head of the queue (every queued message that fits in one
    call, as a batch) and pops it on acknowledgement. While the
    peer is unreachable it retries (backoff up to 0.5 s) and records since when; if the peer
    refuses a message the link stops and records why (:attr:`refused`).
    """

    def __init__(
        self,
        connection: Connection,
        *,
        call_timeout: float,
        max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        on_refused: Callable[[str, str], None] | None = None,
    ) -> None:
        self.peer = connection.name
        self.connection = connection
        self.call_timeout = call_timeout
        self.max_bytes = max_bytes
        self.on_refused = on_refused
        self.queue: deque[tuple[int, bytes]] = deque()
        self.next_seq = 1
        self.unreachable_since: float | None = None
        self.refused: str | None = None
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    # -- numbering and queue (called by the owner, under its own lock) -----------------------
    def reserve(self) -> int:
        with self._cond:
            seq = self.next_seq
            self.next_seq += 1
            return seq

    def push(self, seq: int, payload: bytes) -> None:
        with self._cond:
            self.queue.append((seq, payload))
            self._cond.notify_all()

    def pending(self) -> list[tuple[int, bytes]]:
        with self._cond:
            return list(self.queue)

    def state(self) -> dict[str, Any]:
        return {"next_seq": self.next_seq}

    def load(self, state: dict[str, Any], pending: list[tuple[int, bytes]]) -> None:
        with self._cond:
            self.next_seq = int(state["next_seq"])
            self.queue = deque(sorted(pending))

    def status(self) -> dict[str, Any]:
        with self._cond:
            since = self.unreachable_since
            return {
                "pending": len(self.queue),
                "unreachable_for": None if since is None else time.monotonic() - since,
                "refused": self.refused,
            }

    # -- the sending thread ------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"link-{self.peer}", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        self.connection.close()

    def idle(self) -> bool:
        with self._cond:
            return not self.queue

    def _run(self) -> None:
        backoff = 0.02
        while True:
            with self._cond:
                while not self._stopped and (not self.queue or self.refused):
                    self._cond.wait()
                if self._stopped:
                    return
                batch = self._head()
            seq = batch[-1][0]
            payload = batch[0][1] if len(batch) == 1 else encode_batch([p for _, p in batch])
            try:
                self.connection.deliver(payload, timeout=self.call_timeout)
            except RemoteError as exc:
                if exc.retryable:
                    with self._cond:
                        if self.unreachable_since is None:
                            self.unreachable_since = time.monotonic()
                        self._cond.wait(backoff)
                    backoff = min(2 * backoff, 0.5)
                    continue
                with self._cond:
                    self.refused = f"{self.peer} refused message {seq}: {exc.details}"
                if self.on_refused is not None:
                    self.on_refused(self.peer, self.refused)
                continue
            backoff = 0.02
            with self._cond:
                while self.queue and self.queue[0][0] <= seq:
                    self.queue.popleft()
                self.unreachable_since = None

    def _head(self) -> list[tuple[int, bytes]]:
        """The messages at the head of the queue that fit in one call (caller holds the lock)."""
        batch: list[tuple[int, bytes]] = []
        size = 0
        for seq, payload in self.queue:
            if batch and (size + len(payload) + 64 > self.max_bytes or len(batch) >= 64):
                break
            batch.append((seq, payload))
            size += len(payload) + 8
        return batch
