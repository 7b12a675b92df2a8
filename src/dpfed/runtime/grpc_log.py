"""gRPC's own log, read into a party's log: failed TLS handshakes named on the receiving side.

A gRPC server drops a connection whose TLS handshake fails inside its C core: no Python code
runs, so the party that received the bad handshake would say nothing while the connecting side
retries. gRPC's handshake trace (``GRPC_TRACE=handshaker``, at its ``INFO`` level) writes a
record for it to the process's standard error, with the peer's address::

    I1128 16:49:33.744253 4599 handshaker.cc:155] CallNextHandshakerLocked: error=UNAVAILABLE:
    Handshake read failed (Socket closed) ... endpoint_peer_address=ipv4:127.0.0.1:46862 ...

``Socket closed`` is what a connecting process that does not trust this party's certificate
does (it closes the connection); ``CERTIFICATE_VERIFY_FAILED`` is this party refusing the
connecting process's certificate. ``dpfed party`` (:func:`enable_handshake_log` before gRPC is
imported, then :func:`grpc_log_to` around the serving) turns on that trace, reads the C core's
standard error through a pipe, turns each failed handshake into a warning of the party's own
log (once per peer host and kind every :data:`REPEAT_EVERY` seconds, with a count) and passes
on only what gRPC's default (``ERROR``) would have shown. Python's own output (``sys.stderr``:
logging, tracebacks) goes straight to the real standard error meanwhile, so nothing waits on
the pipe but gRPC. A user who sets ``GRPC_VERBOSITY`` or ``GRPC_TRACE`` gets gRPC's log as it
is, and no reading.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

#: The first line of a gRPC C-core log record: severity, date, time, thread, ``file:line]``.
GRPC_LINE = re.compile(r"^([IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+[\w./-]+:\d+\]\s?(.*)$")
#: A handshake step's record; a failed one carries an error other than ``OK``.
HANDSHAKE_STEP = re.compile(
    r"CallNextHandshakerLocked: error=(.*?)(?:\n=== Source|\s+shutdown=)", re.DOTALL
)
PEER = re.compile(r"endpoint_peer_address=([^,}\s]+)")
#: gRPC severities shown at its default verbosity (``ERROR``).
SHOWN = ("E", "F")
#: The same failure from the same host is logged again at most this often (seconds).
REPEAT_EVERY = 30.0

_state = {"enabled": False}


def enable_handshake_log() -> bool:
    """Turn on gRPC's handshake trace; True if it could.

    It can only before gRPC is imported (gRPC reads its environment then), and does nothing
    when the user chose ``GRPC_VERBOSITY`` or ``GRPC_TRACE``.
    """
    if "grpc" in sys.modules or {"GRPC_VERBOSITY", "GRPC_TRACE"} & set(os.environ):
        return False
    os.environ["GRPC_VERBOSITY"] = "INFO"
    os.environ["GRPC_TRACE"] = "handshaker"
    _state["enabled"] = True
    return True


def handshake_log_enabled() -> bool:
    """Whether :func:`enable_handshake_log` took effect in this process."""
    return _state["enabled"]


def describe_handshake_failure(error: str, peer: str) -> tuple[str, str]:
    """The kind of a failed handshake and the party's log line for it.

    Parameters
    ----------
    error : str
        gRPC's error, e.g. ``UNAVAILABLE: Handshake read failed (Socket closed)``.
    peer : str
        The connecting process's address, e.g. ``ipv4:10.0.0.7:46862``.
    """
    if "CERTIFICATE_VERIFY_FAILED" in error:
        reason = error.split("CERTIFICATE_VERIFY_FAILED", 1)[1].strip(": ").removesuffix(": OK")
        return "foreign", (
            f"{peer} presented a certificate not signed by this party's CA "
            f"(CERTIFICATE_VERIFY_FAILED: {reason}): a leader or party of a job with another "
            "CA; its connection was refused"
        )
    if "Socket closed" in error:
        return "closed", (
            f"{peer} closed its connection during the TLS handshake: it does not accept this "
            "party's certificate (a leader or party whose job file names another CA, or "
            "another name for this party), or it stopped"
        )
    return "failed", f"a TLS handshake with {peer} failed: {error.strip()}"


class HandshakeLog:
    """Reads gRPC's log records and logs each failed handshake, repeats throttled.

    Parameters
    ----------
    write : callable
        Where the lines gRPC shows by default and any other output go (bytes).
    log : callable
        The party's log (one str a failed handshake).
    clock : callable, default time.monotonic
    """

    def __init__(
        self,
        write: Callable[[bytes], object],
        log: Callable[[str], object],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write, self.log, self.clock = write, log, clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def feed(self, lines: Iterable[bytes]) -> None:
        """Route ``lines`` record by record (a record: a header line and its continuations)."""
        record: list[bytes] = []
        for raw in lines:
            if GRPC_LINE.match(raw.decode("utf-8", "replace")) is not None or not record:
                self._record(record)
                record = []
            record.append(raw)
        self._record(record)

    def _record(self, lines: list[bytes]) -> None:
        if not lines:
            return
        text = b"".join(lines).decode("utf-8", "replace")
        header = GRPC_LINE.match(text.split("\n", 1)[0])
        if header is None:
            self.write(b"".join(lines))
            return
        step = HANDSHAKE_STEP.search(text)
        if step is not None and step.group(1).strip() != "OK":
            peer = PEER.search(text)
            self._failure(step.group(1), peer.group(1) if peer else "a process")
        elif header.group(1) in SHOWN:
            self.write(b"".join(lines))

    def _failure(self, error: str, peer: str) -> None:
        peer = peer.removeprefix("ipv4:").removeprefix("ipv6:")
        kind, line = describe_handshake_failure(error, peer)
        host = peer.rsplit(":", 1)[0]
        now = self.clock()
        last, since = self._last.get((host, kind), (None, 0))
        if last is not None and now - last < REPEAT_EVERY:
            self._last[(host, kind)] = (last, since + 1)
            return
        if since:
            line += f" ({since} more time(s) from {host} since the last report)"
        self._last[(host, kind)] = (now, 0)
        self.log(line)


@contextmanager
def grpc_log_to(log: Callable[[str], object]) -> Iterator[None]:
    """Within the block, read what the process writes to its standard error's descriptor
    (gRPC's C core) through a :class:`HandshakeLog`; ``sys.stderr`` writes straight to the
    real standard error. Everything read is passed on before the block returns."""
    sys.stderr.flush()
    real = os.dup(2)
    read_end, write_end = os.pipe()
    saved_stderr = sys.stderr
    sys.stderr = os.fdopen(
        os.dup(real), "w", buffering=1, encoding="utf-8", errors="backslashreplace"
    )
    os.dup2(write_end, 2)
    os.close(write_end)
    pipe: BinaryIO = os.fdopen(read_end, "rb")

    def write(data: bytes) -> None:
        os.write(real, data)

    def pump() -> None:
        with pipe:
            HandshakeLog(write, log).feed(iter(pipe.readline, b""))

    thread = threading.Thread(target=pump, name="grpc-log", daemon=True)
    thread.start()
    try:
        yield
    finally:
        os.dup2(real, 2)  # the pipe's last write end closes: the reader drains and stops
        thread.join(timeout=10.0)
        replaced, sys.stderr = sys.stderr, saved_stderr
        replaced.close()
        os.close(real)


__all__ = [
    "HandshakeLog",
    "describe_handshake_failure",
    "enable_handshake_log",
    "grpc_log_to",
    "handshake_log_enabled",
]
