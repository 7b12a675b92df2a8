"""The peak memory of a process, as engines and benchmarks report it."""

from __future__ import annotations

import resource
import sys
from typing import Any

__all__ = ["node_usage", "peak_rss_bytes"]


def peak_rss_bytes() -> int:
    """Peak resident set size of this process in bytes.

    ``VmHWM`` of ``/proc/self/status`` where it exists (Linux): unlike ``ru_maxrss``, which
    Linux carries over ``exec`` from the forking parent, it covers this program only.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def node_usage(usage: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per node: the worker processes that ran tasks and the sum and largest of their peak
    resident memory in bytes (the sum bounds the node's peak for the work)."""
    peaks: dict[str, dict[int, int]] = {}
    for u in usage:
        by_pid = peaks.setdefault(u["node"], {})
        by_pid[u["pid"]] = max(by_pid.get(u["pid"], 0), int(u["peak_rss_bytes"]))
    return {
        node: {
            "workers": len(p),
            "peak_rss_bytes_sum": sum(p.values()),
            "peak_rss_bytes_max": max(p.values()),
        }
        for node, p in sorted(peaks.items())
    }
