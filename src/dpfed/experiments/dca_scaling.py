r"""Runtime of the DCA secure sum against the paper's Table 1 (Heikkilä et al., 2017).

The paper times a distributed Spark implementation of its Algorithm 1 with :math:`M = 10`
compute nodes, :math:`N \in \{10^2, \dots, 10^5\}` clients and vectors of length
:math:`d \in \{10, \dots, 10^4\}` (average of 5 repeats, encryption excluded).
:func:`run_dca_scaling` (``dpfed reproduce dca-scaling``) times
:func:`dpfed.dca.secure_sum.secure_sum` on the same cells and writes, into one folder:

``dca_scaling.{png,json}``
    Seconds per cell, dpfed against the paper, and the ratio.
``summary.md``, ``summary.json``
    The table side by side with the paper's and the notes (written last).

Decisions:

* **What runs.** One full secure sum per repeat: every client's noise from its own
  generator (by default the paper's continuous Gaussian, drawn in floating point; ``noise=
  "discrete"`` times the exact ring noise that :func:`dpfed.dca.secure_sum.secure_sum` adds
  by default), fixed-point encoding with the overflow check, :math:`M - 1` AES-256-CTR mask
  vectors per client, the compute nodes' agreement and node sums (the fast path, which sums
  the masks straight from the keystream), decoding. No envelope encryption, as in the paper's
  table.
* **Inputs.** Bounded uniform vectors on :math:`[-1, 1]`
  (:class:`dpfed.dca.synthetic.UniformClients`), synthesised block by block *inside* the
  timed run, so :math:`N \times d` is never in memory; their share of the time is reported
  (``timing["values"]``). Each client adds noise of standard deviation 1 (the values of the
  data and of the noise do not change the work done).
* **Parallelism.** ``workers="auto"`` uses one process for cells whose serial time is
  estimated under 3 s and every available core otherwise (:func:`choose_workers`).
* **The comparison** sets an in-process simulation on one machine against a Spark cluster
  that moved the messages over a network: it measures the cost of the computation, not of
  the communication, and is stated as such in every output.

Failure semantics: files are written atomically; ``summary.md`` / ``summary.json`` are written
last and are absent if anything fails.
"""

from __future__ import annotations

import hashlib
import os
import platform
import statistics
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_positive
from dpfed.dca.secure_sum import NOISES, secure_sum
from dpfed.dca.synthetic import UniformClients
from dpfed.engines.memory import node_usage, peak_rss_bytes
from dpfed.experiments.plotting_dca import plot_dca_scaling
from dpfed.experiments.report import ReportTemplate, summary_markdown
from dpfed.experiments.runner import Reproduction

__all__ = [
    "PAPER_CLIENTS",
    "PAPER_COMPUTE_NODES",
    "PAPER_DIMS",
    "PAPER_SPARK_SECONDS",
    "ScalingPlan",
    "choose_workers",
    "full_plan",
    "paper_seconds",
    "quick_plan",
    "run_dca_scaling",
    "time_secure_sum",
]

#: Compute nodes of the paper's runtime table.
PAPER_COMPUTE_NODES = 10
#: Clients :math:`N` (columns) and vector lengths :math:`d` (rows) of the table.
PAPER_CLIENTS = (100, 1000, 10000, 100000)
PAPER_DIMS = (10, 100, 1000, 10000)
_TABLE = (
    (1.72, 1.89, 2.99, 8.58),
    (2.03, 2.86, 12.36, 65.64),
    (3.43, 10.56, 101.2, 610.55),
    (15.30, 84.95, 994.96, 1592.29),
)
#: The paper's Table 1: Spark DCA seconds (mean of 5 repeats, M = 10), keyed by (N, d).
PAPER_SPARK_SECONDS: dict[tuple[int, int], float] = {
    (n, d): _TABLE[r][c] for r, d in enumerate(PAPER_DIMS) for c, n in enumerate(PAPER_CLIENTS)
}

#: The prose of the report (summary.md and the notes).
REPORT = ReportTemplate("dca_scaling.md")
_COMPARISON_NOTE = REPORT.paragraph("note-comparison")
_NOISE_NOTES = {"gaussian": "note-noise-gaussian", "discrete": "note-noise-discrete"}


def paper_seconds(n_clients: int, dim: int, compute_nodes: int = PAPER_COMPUTE_NODES):
    """The paper's Spark seconds for a cell of its table, or ``None`` if it is not there."""
    if int(compute_nodes) != PAPER_COMPUTE_NODES:
        return None
    return PAPER_SPARK_SECONDS.get((int(n_clients), int(dim)))


def _available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def choose_workers(n_clients: int, dim: int, compute_nodes: int) -> int:
    r"""Worker processes for a secure sum: 1 unless the serial run would take over ~3 s.

    The estimate is :math:`8 (M - 1) N d` bytes of keystream at 4 GB/s plus :math:`N d` normal
    draws at 16 ns and 15 µs per client (the development machine); starting a worker process
    costs about half a second.
    """
    n, d, m = int(n_clients), int(dim), int(compute_nodes)
    estimate = 8.0 * max(0, m - 1) * n * d / 4e9 + 16e-9 * n * d + 15e-6 * n
    return _available_cpus() if estimate > 3.0 else 1


def _peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (:func:`peak_rss_bytes`)."""
    return peak_rss_bytes() / (1024.0 * 1024.0)


def _resolve_workers(workers: int | str, executor: Executor | None, n: int, d: int, m: int) -> int:
    """Worker processes: the executor's for ``"auto"`` with one, else :func:`choose_workers`
    for ``"auto"``, else ``workers`` checked."""
    if workers == "auto" and executor is not None:
        return int(getattr(executor, "workers", 1))
    if workers == "auto":
        return choose_workers(n, d, m)
    return check_int("workers", workers, minimum=1)


def _max_deviation(source: UniformClients, run: Any, n: int, d: int) -> float:
    """Largest deviation of the run's total from the included inputs' sum."""
    # the total must be the inputs' sum plus noise: recompute the inputs block by block
    plain = np.zeros(d)
    step = max(1, (1 << 20) // (8 * d))
    keep = np.zeros(n, dtype=bool)
    keep[run.included] = True
    for a in range(0, n, step):
        block = source(a, min(a + step, n))
        plain += block[keep[a : a + step]].sum(axis=0)
    return float(np.max(np.abs(run.total - plain)))


def _timing_summary(
    runs: list[Any],
    source: UniformClients,
    *,
    n: int,
    d: int,
    m: int,
    t: int,
    encrypt: bool,
    w: int,
    noise_std: float,
    executor: Executor | None,
) -> dict[str, Any]:
    """The record of :func:`time_secure_sum` from its timed runs."""
    r = len(runs)
    seconds = [res.timing["wall"] for res in runs]
    order = sorted(range(r), key=lambda i: seconds[i])
    median_run = runs[order[(r - 1) // 2]]
    timing = dict(median_run.timing)
    mask_bytes = 8 * max(0, m - 1) * len(median_run.included) * d
    masks = timing.get("masks", 0.0)
    deviation = _max_deviation(source, median_run, n, d)
    total_std = noise_std * np.sqrt(len(median_run.included))
    paper = paper_seconds(n, d, m)
    median = statistics.median(seconds)
    return {
        "n_clients": n,
        "dim": d,
        "compute_nodes": m,
        "tolerated": t,
        "dropped": len(median_run.dropped),
        "encrypt": bool(encrypt),
        "workers": w,
        "repeats": r,
        "seconds": seconds,
        "median": median,
        "min": min(seconds),
        "timing": timing,
        "values_seconds": timing.get("values", 0.0),
        "keystream_bytes": mask_bytes,
        "keystream_gb_per_s": mask_bytes / masks / 1e9 if masks > 0 else None,
        "peak_rss_mb": _peak_rss_mb(),
        "total_sha256": hashlib.sha256(median_run.total_encoded.tobytes()).hexdigest(),
        "paper_seconds": paper,
        "ratio": paper / median if paper is not None and median > 0 else None,
        "check": {"max_abs_deviation": deviation, "in_noise_stds": deviation / float(total_std)},
    } | ({"nodes": node_usage(executor.usage)} if hasattr(executor, "usage") else {})


def time_secure_sum(
    n_clients: int,
    dim: int,
    compute_nodes: int = PAPER_COMPUTE_NODES,
    *,
    tolerated: int = 0,
    drop: int = 0,
    encrypt: bool = False,
    repeats: int = 1,
    workers: int | str = "auto",
    noise_std: float = 1.0,
    bound: float = 1.0,
    seed: int = 0,
    executor: Executor | None = None,
    noise: str = "discrete",
) -> dict[str, Any]:
    r"""Time full secure sums of synthetic bounded uniform client vectors.

    Parameters
    ----------
    n_clients, dim, compute_nodes : int
        :math:`N`, :math:`d`, :math:`M`.
    tolerated : int, default 0
        :math:`T`.
    drop : int, default 0
        Clients whose shares are lost (evenly spaced indices), at most ``tolerated``.
    encrypt : bool, default False
        Seal and open every message (the explicit path).
    repeats : int, default 1
        Secure sums to time.
    workers : int or "auto", default "auto"
        Worker processes (:func:`choose_workers` for ``"auto"``).
    noise_std : float, default 1.0
        Each client's noise standard deviation.
    bound : float, default 1.0
        The vectors are uniform on :math:`[-c, c)`.
    seed : int, default 0
        Seed of the vectors and of the noise.
    executor : concurrent.futures.Executor, optional
        Runs the client ranges (e.g. :class:`dpfed.engines.tasks.RayExecutor`); ``"auto"``
        workers are then its ``workers``.
    noise : {"discrete", "gaussian"}, default "discrete"
        The clients' noise (:func:`dpfed.dca.secure_sum.secure_sum`).

    Returns
    -------
    dict
        ``seconds`` (every repeat), ``median``, ``min``, ``timing`` (phases of the median
        run, seconds summed over workers), ``values_seconds``, ``workers``,
        ``keystream_bytes``, ``keystream_gb_per_s`` (bytes / summed mask seconds),
        ``peak_rss_mb`` (this process), ``paper_seconds`` and ``ratio`` (paper / median)
        when the cell is in the paper's table, ``check`` (the largest deviation of the
        total from the inputs' sum, in units of the noise's standard deviation),
        ``total_sha256`` (of the encoded total: equal on every engine for the same seed) and,
        with an executor that reports them, ``nodes`` (per node, its workers' peak memory).
    """
    n = check_int("n_clients", n_clients, minimum=2)
    d = check_int("dim", dim, minimum=1)
    m = check_int("compute_nodes", compute_nodes, minimum=1)
    t = check_int("tolerated", tolerated, minimum=0)
    k = check_int("drop", drop, minimum=0)
    r = check_int("repeats", repeats, minimum=1)
    check_positive("noise_std", noise_std)
    w = _resolve_workers(workers, executor, n, d, m)
    dropped = np.linspace(0, n - 1, k).astype(int).tolist() if k else None
    source = UniformClients(d, bound=bound, seed=seed)
    runs = []
    for _ in range(r):
        res = secure_sum(
            source,
            n_clients=n,
            dim=d,
            noise_std=noise_std,
            rng=seed,
            compute_nodes=m,
            tolerated=t,
            dropped=dropped,
            encrypt=encrypt,
            workers=w,
            executor=executor,
            noise=noise,
        )
        runs.append(res)
    return _timing_summary(
        runs,
        source,
        n=n,
        d=d,
        m=m,
        t=t,
        encrypt=encrypt,
        w=w,
        noise_std=noise_std,
        executor=executor,
    )


@dataclass(frozen=True)
class ScalingPlan:
    """Cells of one scaling run (:func:`full_plan` or :func:`quick_plan`)."""

    quick: bool
    clients: tuple[int, ...]
    dims: tuple[int, ...]
    compute_nodes: int = PAPER_COMPUTE_NODES
    repeats: int = 3
    workers: int | str = "auto"
    noise_std: float = 1.0
    seed: int = 0
    noise: str = "gaussian"


def full_plan(repeats: int = 3, workers: int | str = "auto") -> ScalingPlan:
    """Every cell of the paper's table (about a minute per repeat on 2 cores)."""
    return ScalingPlan(
        quick=False, clients=PAPER_CLIENTS, dims=PAPER_DIMS, repeats=repeats, workers=workers
    )


def quick_plan(repeats: int = 1, workers: int | str = "auto") -> ScalingPlan:
    """The four smallest cells (N in {100, 1000}, d in {10, 100}): a smoke test."""
    return ScalingPlan(
        quick=True, clients=PAPER_CLIENTS[:2], dims=PAPER_DIMS[:2], repeats=repeats, workers=workers
    )


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _fmt_load(load: dict) -> str:
    start, end = load.get("start"), load.get("end")
    if start is None or end is None:
        return "unknown"
    return f"{start:.2f} at the start, {end:.2f} at the end"


def _markdown(summary: dict) -> str:
    plan = summary["plan"]
    mode = "quick (a subset of the cells; a smoke test)" if summary["quick"] else "full"
    head = REPORT.render(
        "head",
        mode=mode,
        seconds=f"{summary['seconds']:.1f}",
        machine=summary["machine"],
        load=_fmt_load(summary["load_average_1m"]),
        compute_nodes=plan["compute_nodes"],
        repeats=plan["repeats"],
        comparison=_COMPARISON_NOTE,
    )
    cells = {(c["n_clients"], c["dim"]): c for c in summary["cells"]}
    rows = []
    for d in plan["dims"]:
        row = []
        for n in plan["clients"]:
            c = cells.get((n, d))
            if c is None:
                row.append("-")
                continue
            ratio = f" ({c['ratio']:.0f}x)" if c["ratio"] else ""
            row.append(f"{_fmt_seconds(c['median'])} / {_fmt_seconds(c['paper_seconds'])}{ratio}")
        rows.append(REPORT.render("grid-row", d=f"{d:g}", cells=" | ".join(row)))
    grid = REPORT.render(
        "grid",
        clients=" | ".join(f"{n:g}" for n in plan["clients"]),
        align="---:|" * len(plan["clients"]),
        rows=rows,
    )
    per_cell = [
        REPORT.render(
            "cell-row",
            n=c["n_clients"],
            d=c["dim"],
            workers=c["workers"],
            median=f"{c['median']:.4g}",
            min=f"{c['min']:.4g}",
            inputs=f"{c['values_seconds']:.3g}",
            gbps="-" if c["keystream_gb_per_s"] is None else f"{c['keystream_gb_per_s']:.2f}",
            paper=_fmt_seconds(c["paper_seconds"]),
            speedup="-" if c["ratio"] is None else f"{c['ratio']:.0f}x",
            deviation=f"{c['check']['in_noise_stds']:.2g}",
        )
        for c in summary["cells"]
    ]
    return summary_markdown([head, grid, REPORT.render("cells", rows=per_cell)], summary)


def _machine() -> str:
    return f"{platform.machine()}, {_available_cpus()} CPU(s), Python {platform.python_version()}"


def _load() -> float | None:
    """One-minute load average (other work on the machine slows every timing down)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def run_dca_scaling(
    out_dir: str | os.PathLike[str],
    *,
    quick: bool = False,
    repeats: int | None = None,
    workers: int | str = "auto",
    progress: bool = False,
    executor: Executor | None = None,
    noise: str = "gaussian",
) -> dict:
    """Time the secure sum on the cells of the paper's Table 1; write a figure and summary.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Output folder, created if missing. Receives ``dca_scaling.png``,
        ``dca_scaling.json``, then ``summary.md`` and ``summary.json``.
    quick : bool, default False
        The four smallest cells (:func:`quick_plan`) only.
    repeats : int, optional
        Secure sums per cell (default 3, quick 1); the median is reported.
    workers : int or "auto", default "auto"
        Worker processes per secure sum (:func:`choose_workers`).
    progress : bool, default False
        Show a progress bar over the cells when standard error is a terminal.
    executor : concurrent.futures.Executor, optional
        Runs each secure sum's client ranges (e.g. a
        :class:`dpfed.engines.tasks.RayExecutor` over a cluster). The cells are still timed
        one after another, so that each has the machine to itself.
    noise : {"gaussian", "discrete"}, default "gaussian"
        The clients' noise: the paper's (continuous Gaussian, drawn in floating point), or the
        exact ring noise that :func:`dpfed.dca.secure_sum.secure_sum` adds by default.

    Returns
    -------
    dict
        The content of ``summary.json``: ``plan``, ``cells`` (one dict per cell, see
        :func:`time_secure_sum`), ``headlines``, ``notes``, ``files``, ``seconds``.

    Raises
    ------
    DpfedInputError
        If matplotlib is missing or ``out_dir`` is not a folder.
    """
    run = Reproduction("dca-scaling", out_dir, progress=progress)
    load_start = _load()
    if workers != "auto":
        workers = check_int("workers", workers, minimum=1)
    if quick:
        plan = quick_plan(workers=workers) if repeats is None else quick_plan(repeats, workers)
    else:
        plan = full_plan(workers=workers) if repeats is None else full_plan(repeats, workers)
    check_int("repeats", plan.repeats, minimum=1)
    if noise not in NOISES:
        raise DpfedInputError(f"noise must be one of {NOISES}. Found {noise!r}.")
    plan = replace(plan, noise=noise)
    cells = []
    with run.running(len(plan.clients) * len(plan.dims)):
        for d in plan.dims:
            for n in plan.clients:
                cells.append(
                    time_secure_sum(
                        n,
                        d,
                        plan.compute_nodes,
                        repeats=plan.repeats,
                        workers=plan.workers,
                        noise_std=plan.noise_std,
                        seed=plan.seed,
                        executor=executor,
                        noise=plan.noise,
                    )
                )
                run.step(f"N={n} d={d}")
    where = "Ray tasks" if executor is not None else "in-process simulation"
    title = (
        f"DCA secure sum, M = {plan.compute_nodes}: dpfed ({where}, "
        f"{_machine()}) vs the paper's Spark cluster"
    )
    payload = {
        "experiment": "dca-scaling",
        "paper": "004 (Heikkilä et al., 2017), Table 1",
        "plan": asdict(plan),
        "cells": cells,
        "comparison": _COMPARISON_NOTE,
    }
    run.emit("dca_scaling", payload, lambda: plot_dca_scaling(cells, title=title))

    compared = [c for c in cells if c["ratio"] is not None]
    headlines = {
        "cells": len(cells),
        "min_speedup": min((c["ratio"] for c in compared), default=None),
        "max_speedup": max((c["ratio"] for c in compared), default=None),
        "largest_cell_seconds": max(cells, key=lambda c: c["n_clients"] * c["dim"])["median"],
        "peak_rss_mb": max(c["peak_rss_mb"] for c in cells),
    }
    notes = [_COMPARISON_NOTE] + [
        REPORT.paragraph(block)
        for block in (
            _NOISE_NOTES[plan.noise],
            "note-encryption",
            "note-inputs",
            "note-check",
            "note-memory",
        )
    ]
    if plan.quick:
        notes.append(REPORT.paragraph("note-quick"))
    summary: dict[str, Any] = {
        "quick": plan.quick,
        "plan": asdict(plan),
        "machine": _machine(),
        "load_average_1m": {"start": load_start, "end": _load()},
        "cells": [{k: v for k, v in c.items() if k != "timing"} for c in cells],
        "headlines": headlines,
        "notes": notes,
    }
    return run.finish(summary, _markdown)
