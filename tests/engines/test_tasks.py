"""Ray tasks behind the Executor interface: the secure sum's ranges, retries, usage."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dpfed.dca.keystream import MaskStream
from dpfed.dca.secure_sum import secure_sum
from dpfed.dca.synthetic import UniformClients
from dpfed.engines.memory import node_usage
from dpfed.experiments.dca_scaling import time_secure_sum

pytest.importorskip("ray")

#: How long a test waits for one task: what is tested is the retry and the error's type, not
#: the speed; on a loaded two-core machine Ray takes minutes to start a new worker process
#: (pytest-timeout still stops a test that hangs).
TASK_WAIT = 400.0


def _dies_once(marker: str) -> int:
    """Kill this worker process the first time (no exception: the process is gone)."""
    path = Path(marker)
    if not path.exists():
        path.write_text("died once")
        os._exit(9)
    return os.getpid()


def _raises(value: int) -> int:
    raise ValueError(f"bad value {value}")


def test_a_killed_workers_task_is_run_again(local_ray, tmp_path):
    from dpfed.engines.tasks import RayExecutor

    executor = RayExecutor(max_retries=2)
    assert executor.submit(_dies_once, str(tmp_path / "marker")).result(timeout=TASK_WAIT) > 0
    assert (tmp_path / "marker").read_text() == "died once"


def test_a_tasks_own_error_is_not_retried_and_keeps_its_type(local_ray):
    from dpfed.engines.tasks import RayExecutor

    with pytest.raises(ValueError, match="bad value 3"):
        RayExecutor().submit(_raises, 3).result(timeout=TASK_WAIT)


def test_secure_sum_on_ray_tasks_equals_inprocess_bit_for_bit(local_ray):
    from dpfed.engines.tasks import RayExecutor

    source = UniformClients(7, seed=4)
    common = dict(
        n_clients=5000,
        dim=7,
        noise_std=0.5,
        rng=11,
        compute_nodes=4,
        tolerated=2,
        dropped=[3, 4000],
        block_size=256,
    )
    inprocess = secure_sum(source, **common, mask_stream=MaskStream())
    executor = RayExecutor()
    on_ray = secure_sum(source, **common, workers=2, executor=executor, mask_stream=MaskStream())
    assert np.array_equal(inprocess.total_encoded, on_ray.total_encoded)
    assert np.array_equal(inprocess.total, on_ray.total)
    assert np.array_equal(inprocess.included, on_ray.included)
    assert executor.usage and all(u["peak_rss_bytes"] > 10**6 for u in executor.usage)


def test_the_benchmark_reports_each_nodes_memory_and_the_same_total(local_ray):
    from dpfed.engines.tasks import RayExecutor

    plain = time_secure_sum(2000, 50, 5, workers=1)
    cell = time_secure_sum(2000, 50, 5, executor=RayExecutor())
    assert cell["total_sha256"] == plain["total_sha256"]
    assert cell["workers"] == 2
    (use,) = cell["nodes"].values()
    assert use["peak_rss_bytes_max"] <= use["peak_rss_bytes_sum"]


def test_node_usage_keeps_each_process_once_at_its_peak():
    usage = [
        {"node": "a", "pid": 1, "peak_rss_bytes": 5},
        {"node": "a", "pid": 1, "peak_rss_bytes": 7},
        {"node": "a", "pid": 2, "peak_rss_bytes": 3},
        {"node": "b", "pid": 9, "peak_rss_bytes": 4},
    ]
    assert node_usage(usage) == {
        "a": {"workers": 2, "peak_rss_bytes_sum": 10, "peak_rss_bytes_max": 7},
        "b": {"workers": 1, "peak_rss_bytes_sum": 4, "peak_rss_bytes_max": 4},
    }
