"""A party's input journal: every accepted message, appended before it is acknowledged.

A party's durable state is its last snapshot (:mod:`dpfed.runtime.checkpoint`) plus this
journal of what it accepted since. Roles are deterministic given their state (the noise
generator's included), so replaying the journal through the restored role reproduces exactly
the messages and releases it had produced, and a recipient that already has one of them sees
a faithful repeat. Snapshots are taken only while nothing sent is waiting for an
acknowledgement, so a snapshot never has to hold outgoing messages.

Record layout (little-endian)::

    b"J"  kind (1 byte)  counter (uint64)  length (uint64)  payload  sha256(payload) (32 bytes)

``counter`` numbers every handled input since the job began; a snapshot stores the counter it
includes, so records already inside a snapshot are skipped on replay. A torn last record (a
crash in the middle of an append) fails its length or digest check; it was never acknowledged,
so its sender sends it again.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

from dpfed.runtime.private_files import private_file, private_folder

_HEAD = struct.Struct("<ccQQ")
_MAGIC = b"J"


class Journal:
    """Append-only records of ``(kind, counter, payload)`` in one file."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        private_folder(self.path.parent)
        self.fsync = fsync
        self._file = open(private_file(self.path), "ab")  # owner-only: it holds peers' messages

    def append(
        self, kind: bytes, counter: int, payload: bytes | memoryview, *, sha256: bytes | None = None
    ) -> None:
        """Append one record; it is in the file (and on disk with ``fsync``) on return.

        ``sha256`` is the payload's digest when the caller has it already.
        """
        if len(kind) != 1:
            raise ValueError(f"kind must be one byte. Found {kind!r}.")
        self._file.write(_HEAD.pack(_MAGIC, kind, counter, len(payload)))
        self._file.write(payload)
        self._file.write(sha256 or hashlib.sha256(payload).digest())
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())

    def records(self, *, after: int = 0) -> list[tuple[bytes, int, bytes]]:
        """Whole records with a counter above ``after``, in order (a torn tail is dropped)."""
        data = self.path.read_bytes() if self.path.exists() else b""
        out, pos = [], 0
        while pos + _HEAD.size <= len(data):
            magic, kind, counter, length = _HEAD.unpack_from(data, pos)
            end = pos + _HEAD.size + length
            if magic != _MAGIC or end + 32 > len(data):
                break
            payload = data[pos + _HEAD.size : end]
            if hashlib.sha256(payload).digest() != data[end : end + 32]:
                break
            if counter > after:
                out.append((kind, counter, payload))
            pos = end + 32
        return out

    def truncate(self) -> None:
        """Drop every record (after a snapshot that includes them)."""
        self._file.truncate(0)
        self._file.seek(0)
        if self.fsync:
            os.fsync(self._file.fileno())

    def size(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()
