"""Output of the reproduction commands: files written atomically, values made JSON-safe."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
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


#: The files :func:`write_summary` writes, last, after every other file of a reproduction.
SUMMARY_FILES = ("summary.md", "summary.json")


def write_summary(writer: ArtifactWriter, summary: Mapping[str, Any], *, started: float,
                  markdown: Callable[[dict], str]) -> dict:
    """Complete and write the summary of a reproduction: ``summary.md``, then ``summary.json``.

    Parameters
    ----------
    writer : ArtifactWriter
        The writer of the reproduction's other files.
    summary : mapping
        The summary without ``out_dir``, ``files`` and ``seconds``.
    started : float
        ``time.perf_counter()`` at the start of the reproduction.
    markdown : callable
        Renders the completed summary as ``summary.md``.

    Returns
    -------
    dict
        The completed summary, JSON-safe (:func:`jsonable`): first ``out_dir``, the folder's
        absolute path; last ``files``, every file written, these two last, and ``seconds``,
        the wall time so far.
    """
    full = {"out_dir": str(writer.out_dir.resolve()), **summary,
            "files": [*writer.files, *SUMMARY_FILES], "seconds": time.perf_counter() - started}
    writer.write_text("summary.md", markdown(full))
    writer.write_json("summary.json", full)
    return jsonable(full)


def finish_markdown(lines: list[str], summary: Mapping[str, Any]) -> str:
    """The text of a ``summary.md``: ``lines``, then the sections ``## Notes`` (if the
    summary has notes) and ``## Files``."""
    lines = list(lines)
    if summary["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in summary["notes"]]
    lines += ["", "## Files", ""] + [f"- `{f}`" for f in summary["files"]]
    return "\n".join(lines) + "\n"


def fmt(value: Any, digits: int = 4) -> str:
    """A value for a markdown table: ``n/a`` for None, ``yes``/``no`` for a bool, ``inf`` for a
    non-finite float, a float to ``digits`` significant digits, anything else as ``str``."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "inf"
        return f"{value:.{digits}g}"
    return str(value)


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


class Progress:
    """A tqdm bar over all runs, only when asked for and standard error is a terminal."""

    def __init__(self, total: int, enabled: bool, desc: str) -> None:
        self._bar = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="run")

    def step(self, description: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(description)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
