"""Modules imported on first use: a party or leader process imports what its job needs.

dp-accounting (through scipy.signal and scipy.stats) takes about a second to import, and
every process of the networked runtime would pay it at start even when its job never
computes an epsilon. :func:`lazy_module` returns a stand-in that imports the module the
first time one of its attributes is read; type checkers see the real module (import it under
``typing.TYPE_CHECKING``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["lazy_module"]


class _LazyModule:
    """Imports ``name`` when an attribute is first read, then forwards to it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def lazy_module(name: str) -> Any:
    """A stand-in for the module ``name`` that imports it on first attribute access."""
    return _LazyModule(name)
