"""The engines by name: the one place that lists them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.engines.base import Engine
from dpfed.engines.inprocess import InProcessEngine

__all__ = ["ENGINES", "get_engine"]


def _inprocess(**options: Any) -> Engine:
    if options:
        raise DpfedInputError(f"the in-process engine takes no options. Found {sorted(options)}.")
    return InProcessEngine()


def _ray(**options: Any) -> Engine:
    from dpfed.engines.ray_engine import RayEngine

    return RayEngine(**options)


#: The engines by name: a factory taking the engine's options.
ENGINES: dict[str, Callable[..., Engine]] = {"inprocess": _inprocess, "ray": _ray}


def get_engine(engine: str | Engine | None = None, **options: Any) -> Engine:
    """The engine named ``engine`` (default in-process), built with ``options``; an engine
    instance is returned as it is."""
    if engine is None:
        engine = "inprocess"
    if not isinstance(engine, str):
        return engine
    try:
        factory = ENGINES[engine]
    except KeyError:
        raise DpfedInputError(
            f"engine must be one of {sorted(ENGINES)}. Found {engine!r}."
        ) from None
    return factory(**options)
