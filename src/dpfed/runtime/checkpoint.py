"""Checkpoints: a process's state as one file, replaced atomically.

A checkpoint is an uncompressed ``.npz`` holding named float/int arrays and, under the key
``__meta__``, a JSON document (as UTF-8 bytes). It is written to a temporary file in the same
folder and renamed over the previous one, so a crash leaves either the old or the new state,
never a mixture. With ``fsync`` the data reach the disk before the rename (a power cut cannot
lose them either).
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.runtime.private_files import private_folder

_META = "__meta__"


def save_checkpoint(
    path: str | os.PathLike[str],
    arrays: dict[str, np.ndarray],
    meta: dict[str, Any],
    *,
    fsync: bool = False,
) -> Path:
    """Write ``arrays`` and ``meta`` to ``path`` atomically, readable by its owner only (in a
    ``0700`` folder)."""
    target = Path(path)
    private_folder(target.parent)
    if _META in arrays:
        raise DpfedInputError(f"array name {_META!r} is reserved.")
    # prefixed names: np.savez's own keywords ("file", "allow_pickle") cannot collide
    payload = {f"a/{name}": value for name, value in arrays.items()}
    payload[_META] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **payload)  # type: ignore[arg-type]  # numpy's stub types **kwds as its bool keyword
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, target)
        if fsync:
            dir_fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_checkpoint(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Raises
    ------
    DpfedInputError
        If the file is missing or is not a dpfed checkpoint.
    """
    target = Path(path)
    where = str(target)
    try:
        with np.load(target, allow_pickle=False) as data:
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise ValueError("not an .npz archive")
            arrays = {k: data[k] for k in data.files}
        if _META not in arrays:
            raise ValueError("no metadata")
        meta = json.loads(arrays.pop(_META).tobytes().decode())
    except FileNotFoundError:
        raise DpfedInputError(f"checkpoint {where!r} does not exist.") from None
    except (OSError, ValueError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        # a power cut can leave an empty or truncated file when fsync is off
        raise DpfedInputError(f"{where!r} is not a dpfed checkpoint: {exc}") from None
    return {k[2:]: v for k, v in arrays.items() if k.startswith("a/")}, meta
