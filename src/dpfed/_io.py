"""Atomic output files: a failed run never leaves a half-written file behind."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


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


def write_json_atomic(path: str | os.PathLike[str], payload: Any) -> Path:
    """Write ``payload`` as JSON to ``path`` through a temporary file and a rename.

    Non-finite floats are written as the strings ``"inf"``, ``"-inf"``, ``"nan"`` so the file
    stays valid JSON.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(jsonable(payload), handle, indent=2, allow_nan=False)
            handle.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
