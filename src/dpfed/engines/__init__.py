"""Where a protocol's roles run: in this process (default) or on Ray (:mod:`.base`)."""

from dpfed.engines.base import Engine, EngineReport, Role, engine_block, engine_summary
from dpfed.engines.inprocess import InProcessEngine
from dpfed.engines.registry import ENGINES, get_engine

__all__ = [
    "ENGINES",
    "Engine",
    "EngineReport",
    "InProcessEngine",
    "Role",
    "engine_block",
    "engine_summary",
    "get_engine",
]
