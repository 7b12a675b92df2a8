"""Files only their owner may read: a party's secrets, journal, snapshots and ledger.

A party's work folder holds its noise secret, the messages it received (other parties' scores
and models among them), its state and its budget ledger; the leader's checkpoint holds the
job's history. None of it is for other users of the host. Folders that dpfed creates for them
are made ``0700`` and the files ``0600``, whatever the process's umask; a folder or file that
already exists with wider permissions is narrowed when dpfed opens it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "FILE_MODE",
    "FOLDER_MODE",
    "load_or_create_secret",
    "private_file",
    "private_folder",
]

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_folder(path: str | os.PathLike[str], *, narrow_existing: bool = True) -> Path:
    """Create ``path`` (and missing parents) as ``0700`` folders; return it.

    Folders that already exist keep their permissions, except ``path`` itself when
    ``narrow_existing`` (a folder that is dpfed's alone, such as a party's work folder).
    """
    folder = Path(path)
    missing = []
    probe = folder
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):
            created.mkdir(mode=FOLDER_MODE)
        os.chmod(created, FOLDER_MODE)
    if narrow_existing and stat.S_IMODE(folder.stat().st_mode) != FOLDER_MODE:
        os.chmod(folder, FOLDER_MODE)
    return folder


def private_file(path: str | os.PathLike[str]) -> Path:
    """Make sure ``path`` exists and is ``0600`` (created empty if missing); return it."""
    target = Path(path)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return target


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_or_create_secret(
    folder: str | os.PathLike[str], filename: str, make: Callable[[], bytes]
) -> bytes:
    """The bytes in ``folder/filename``; created by ``make()`` if missing.

    A new secret is written owner-only, synced to disk and renamed into place (its folder
    synced too) before it is returned, so no release can be made from a secret that a crash
    could lose: a restarted party finds the same secret and replays the same releases.
    """
    folder = private_folder(folder)
    path = folder / filename
    if path.exists():
        if stat.S_IMODE(path.stat().st_mode) != FILE_MODE:
            os.chmod(path, FILE_MODE)
        return path.read_bytes()
    raw = make()
    fd, tmp = tempfile.mkstemp(prefix=f".{filename}.", dir=folder)  # O_EXCL, mode 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_folder(folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return raw
