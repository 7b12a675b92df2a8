"""Atomic output files: a failed run never leaves a half-written file behind."""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError


def jsonable(value: Any) -> Any:
    """``value`` with arrays and NumPy scalars as lists and numbers, and non-finite floats as
    the strings ``"inf"``, ``"-inf"``, ``"nan"``: what :func:`write_json_atomic` writes."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    return value


#: Trees of kernel and device files: never an output's place.
SYSTEM_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))


def output_refusal(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` may not receive an output file, or None.

    Only a regular file is ever replaced: a device, a FIFO, a socket or a folder is refused,
    and so is any path under ``/proc``, ``/sys`` or ``/dev`` (even one that does not exist
    yet), where a rename would replace a device node or a write would reach the kernel.
    """
    target = Path(path).absolute()
    resolved = target.resolve()
    if resolved.exists():
        mode = os.stat(resolved).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a folder"
                if stat.S_ISDIR(mode)
                else "a character device"
                if stat.S_ISCHR(mode)
                else "a block device"
                if stat.S_ISBLK(mode)
                else "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "not a regular file"
            )
            return f"{str(target)!r} is {kind}; only a regular file is ever replaced"
    for tree in SYSTEM_TREES:
        if resolved == tree or tree in resolved.parents:
            return f"{str(target)!r} lies under {tree}, which holds no output files"
    return None


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename.

    Only a regular file is replaced (:func:`output_refusal`); missing folders are made, and
    said so on standard error.

    Raises
    ------
    DpfedInputError
        If ``path`` is not a place for an output file.
    OSError
        If writing fails (a full disk, a read-only file system): nothing is left at ``path``
        or beside it, and a file that was there is untouched.
    """
    reason = output_refusal(path)
    if reason is not None:
        raise DpfedInputError(f"cannot write the output: {reason}.")
    target = Path(path)
    if not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        print(f"dpfed: made the folder {str(target.parent)!r} for {target.name}", file=sys.stderr)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def write_json_atomic(path: str | os.PathLike[str], payload: Any) -> Path:
    """Write ``payload`` as JSON to ``path`` atomically (:func:`write_text_atomic`).

    Non-finite floats are written as the strings ``"inf"``, ``"-inf"``, ``"nan"`` so the file
    stays valid JSON.
    """
    return write_text_atomic(path, json.dumps(jsonable(payload), indent=2, allow_nan=False) + "\n")
