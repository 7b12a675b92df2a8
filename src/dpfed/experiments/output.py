"""Output of the reproductions: files written atomically, values made JSON-safe."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError


def output_folder(out_dir: str | os.PathLike[str]) -> Path:
    """``out_dir`` as a path, refused if it exists and is not a folder (created later, when
    the first file is written)."""
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise DpfedInputError(f"out_dir {str(out)!r} exists and is not a folder.")
    return out


def open_output(out: Path) -> ArtifactWriter:
    """A writer into the checked folder ``out`` (:func:`output_folder`), created with its
    parents if missing."""
    out.mkdir(parents=True, exist_ok=True)
    return ArtifactWriter(out)


class ArtifactWriter:
    """Writes files atomically into ``out_dir`` and remembers their names."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.files: list[str] = []
        umask = os.umask(0)  # read the umask (mkstemp creates files readable by owner only)
        os.umask(umask)
        self._mode = 0o666 & ~umask

    def write_bytes(self, name: str, data: bytes) -> Path:
        path = self.out_dir / name
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.out_dir)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, self._mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if name not in self.files:
            self.files.append(name)
        return path

    def write_json(self, name: str, obj: Any) -> Path:
        text = json.dumps(jsonable(obj), indent=1, allow_nan=False) + "\n"
        return self.write_bytes(name, text.encode("utf-8"))

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode("utf-8"))


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy scalars and arrays as Python values, tuples as lists and
    non-finite floats as ``None`` (strict JSON has no infinity)."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [jsonable(v) for v in obj.tolist()]
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj
