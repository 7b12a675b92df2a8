"""What the leader and the parties say, through :mod:`logging`.

Every runtime module logs to a logger under ``dpfed`` (``dpfed.runtime.party``,
``dpfed.runtime.leader``, ...) with the speaking process's name in the record (``party``).
:func:`configure_logging` (``dpfed run`` and ``dpfed party``: ``--log-level``,
``--log-format``) sends them to standard error as ``[name] message`` lines or as one JSON
object per line. gRPC's own C-core logging is limited to errors unless ``GRPC_VERBOSITY`` is
set: set before gRPC is imported (:func:`quiet_grpc`). ``dpfed party`` reads gRPC's handshake
trace into its log instead (:mod:`dpfed.runtime.grpc_log`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

from dpfed._validation import DpfedInputError

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
#: The logger every runtime logger sits under.
ROOT = "dpfed"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the current ``sys.stderr`` (looked up at every record, so a replaced stream,
    as under a test's capture, is followed)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class _Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"[{getattr(record, 'party', '-')}] {record.getMessage()}"


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "party": getattr(record, "party", None),
            "message": record.getMessage(),
        }
        peer = getattr(record, "peer", None)
        if peer is not None:
            entry["peer"] = peer
        return json.dumps(entry, sort_keys=True)


def configure_logging(level: str = "info", fmt: str = "text") -> None:
    """Send the ``dpfed`` loggers to standard error at ``level`` in format ``fmt``.

    Raises
    ------
    DpfedInputError
        If ``level`` is not one of :data:`LOG_LEVELS` or ``fmt`` not one of
        :data:`LOG_FORMATS`.
    """
    if level not in LOG_LEVELS:
        raise DpfedInputError(f"log level must be one of {LOG_LEVELS}. Found {level!r}.")
    if fmt not in LOG_FORMATS:
        raise DpfedInputError(f"log format must be one of {LOG_FORMATS}. Found {fmt!r}.")
    root = logging.getLogger(ROOT)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(_Json() if fmt == "json" else _Text())
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False


def process_logger(module: str, name: str) -> logging.LoggerAdapter[logging.Logger]:
    """The logger of ``module`` speaking as process ``name`` (a party or ``leader``); the
    ``dpfed`` loggers get the default configuration (info, text) if none was made."""
    if not logging.getLogger(ROOT).handlers:
        configure_logging()
    return logging.LoggerAdapter(logging.getLogger(module), {"party": name})


def quiet_grpc() -> None:
    """Limit gRPC's C-core logging to errors unless the user set ``GRPC_VERBOSITY`` (it is
    read when gRPC is imported)."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "configure_logging",
    "process_logger",
    "quiet_grpc",
]
