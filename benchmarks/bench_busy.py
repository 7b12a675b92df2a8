"""Per-iteration time on a busy machine: the library's one-BLAS-thread loops against BLAS's
default threads, measured in the same run.

Run ``python benchmarks/bench_busy.py --help``; see ``benchmarks/README.md``. Two runs of the
same job (vertical ADMM sharing on a9a split 66 | 57, consensus ADMM on Adult with 10
clients; both without noise, fixed iterations) are timed with the machine idle and again
while ``--busy`` other processes keep every core busy with CPU-bound numpy work; each with the
library's limit (``DPFED_BLAS_THREADS`` unset: one BLAS thread) and with one BLAS thread per
core (what BLAS does by default, the library's behaviour before the limit). The figure of
merit is the busy / idle ratio of the per-iteration time with the library's limit.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from dpfed.core.threads import BLAS_THREADS_VARIABLE
from dpfed.data import horizontal_split, load_dataset, vertical_split
from dpfed.protocols.consensus.driver import ConsensusConfig, train_consensus
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

HERE = Path(__file__).resolve().parent


def _burn(stop: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    """One CPU-bound process (single-threaded numpy matrix products) until ``stop`` is set."""
    with threadpool_limits(limits=1):
        rng = np.random.default_rng(0)
        a = rng.standard_normal((400, 400))
        while not stop.is_set():
            a = np.tanh(a @ a.T / 400.0)


def _jobs(data_dir: str | None, iterations: int) -> dict[str, tuple[Callable[[], object], int]]:
    a9a = load_dataset("a9a", data_dir=data_dir)
    blocks = vertical_split(a9a.X_train, (66, 57))
    vertical_cfg = VerticalConfig(
        iterations=iterations, rho=0.25, adaptive_rho=False, seed=0, acceleration="none"
    )
    adult = load_dataset("adult", data_dir=data_dir)
    rows = horizontal_split(adult.X_train.shape[0], 10, rng=np.random.default_rng(0))
    clients = [(adult.X_train[r], adult.y_train[r]) for r in rows]
    consensus_cfg = ConsensusConfig(iterations=iterations, seed=0)
    return {
        "vertical_a9a": (lambda: train_vertical(blocks, a9a.y_train, vertical_cfg), iterations),
        "consensus_adult": (lambda: train_consensus(clients, consensus_cfg), iterations),
    }


def _per_iteration(run: Callable[[], object], iterations: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) / iterations)
    return statistics.median(times)


def measure(data_dir: str | None, *, busy: int, iterations: int, repeats: int) -> dict:
    """Median seconds per iteration of each job, idle and busy, limited and not."""
    jobs = _jobs(data_dir, iterations)
    cores = os.cpu_count() or 1
    settings = {"library_limit": None, "blas_default": str(cores)}
    out: dict = {job: {} for job in jobs}
    for state in ("idle", "busy"):
        stop = multiprocessing.Event()
        burners = [
            multiprocessing.Process(target=_burn, args=(stop,), daemon=True)
            for _ in range(busy if state == "busy" else 0)
        ]
        for p in burners:
            p.start()
        time.sleep(1.0 if burners else 0.0)
        try:
            for name, value in settings.items():
                if value is None:
                    os.environ.pop(BLAS_THREADS_VARIABLE, None)
                else:
                    os.environ[BLAS_THREADS_VARIABLE] = value
                for job, (run, n) in jobs.items():
                    out[job][f"{state}_{name}"] = _per_iteration(run, n, repeats)
        finally:
            os.environ.pop(BLAS_THREADS_VARIABLE, None)
            stop.set()
            for p in burners:
                p.join()
    for figures in out.values():
        figures["busy_over_idle_library_limit"] = (
            figures["busy_library_limit"] / figures["idle_library_limit"]
        )
        figures["busy_over_idle_blas_default"] = (
            figures["busy_blas_default"] / figures["idle_blas_default"]
        )
    return {
        "cores": cores,
        "busy_processes": busy,
        "iterations": iterations,
        "repeats": repeats,
        "seconds_per_iteration": out,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("DPFED_DATA"),
        help="folder holding a9a/ and adult/ (default: $DPFED_DATA)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=2,
        help="CPU-bound processes running during the busy runs (default 2)",
    )
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--target",
        type=float,
        default=2.0,
        help="largest busy / idle ratio with the library's limit (default 2)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "busy.json")
    args = parser.parse_args(argv)
    result = measure(
        args.data_dir, busy=args.busy, iterations=args.iterations, repeats=args.repeats
    )
    ratios = {
        job: f["busy_over_idle_library_limit"] for job, f in result["seconds_per_iteration"].items()
    }
    result["target"] = args.target
    result["met"] = all(r <= args.target for r in ratios.values())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for job, f in result["seconds_per_iteration"].items():
        print(
            f"{job}: idle {f['idle_library_limit'] * 1e3:.1f} ms/it, busy "
            f"{f['busy_library_limit'] * 1e3:.1f} ms/it (x{f['busy_over_idle_library_limit']:.2f}"
            f"); BLAS default: idle {f['idle_blas_default'] * 1e3:.1f}, busy "
            f"{f['busy_blas_default'] * 1e3:.1f} (x{f['busy_over_idle_blas_default']:.2f})"
        )
    print(f"target busy/idle <= {args.target}: {'met' if result['met'] else 'NOT met'}")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
