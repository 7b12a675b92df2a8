"""A progress bar for long in-process runs, shown only on a terminal."""

from __future__ import annotations

import sys
from typing import Any


def progress_bar(total: int, enabled: bool, *, desc: str = "ADMM rounds") -> Any:
    """A ``tqdm`` bar of ``total`` rounds, or None when disabled or stderr is not a terminal."""
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm  # optional at import time: only a terminal run draws a bar

    return tqdm(total=total, desc=desc, unit="round", leave=False)
