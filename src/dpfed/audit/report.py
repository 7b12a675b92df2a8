"""Every auditor at once: ``dpfed audit --all --out DIR``.

Runs every mechanism honestly and under each breakage it supports, in parallel processes (one
task per audit), and writes into ``DIR``: one ``<mechanism>[-<broken>].json`` per audit (the
record of :mod:`dpfed.audit.run`), ``audit.json`` (all of them, without their ROC points),
``table.md`` (mechanism, claimed epsilon, audited lower bound, runs, seconds) and, with
matplotlib installed (``dpfed[plot]``), ``roc.png``: every honest audit's ROC curve beside the
best curve its claim allows.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.audit.auditors import AUDITORS, BROKEN
from dpfed.audit.run import run_audit

#: Mechanisms audited only as they are (their claim is not a guarantee to break).
AS_IS = ("vertical-paper",)


#: One audit of a full run: mechanism, loss (None: it has none), broken, runs.
AuditTask = tuple[str, str | None, str | None, int]


def audit_tasks(runs: int, broken_runs: int) -> list[AuditTask]:
    """``(mechanism, loss, broken, runs)`` of a full audit: every mechanism under every loss
    it accepts, honest and broken."""
    tasks: list[AuditTask] = []
    for name in sorted(AUDITORS):
        for loss in AUDITORS[name].losses or (None,):
            tasks.append((name, loss, None, runs))
            tasks += [(name, loss, b, broken_runs) for b in BROKEN if name not in AS_IS]
    return tasks


def _run(task: AuditTask, epsilon: float, delta: float, seed: int) -> dict[str, Any]:
    name, loss, broken, runs = task
    return run_audit(
        name, epsilon=epsilon, delta=delta, runs=runs, seed=seed, broken=broken, loss=loss
    )


def _default_loss(record: dict[str, Any]) -> bool:
    losses = AUDITORS[record["mechanism"]].losses if record["mechanism"] in AUDITORS else ()
    return record.get("loss") is None or (bool(losses) and record["loss"] == losses[0])


def _label(record: dict[str, Any]) -> str:
    """The mechanism, with its loss unless it is the default one."""
    return record["mechanism"] + ("" if _default_loss(record) else f" ({record['loss']})")


def _file_name(record: dict[str, Any]) -> str:
    loss = "" if _default_loss(record) else f"-{record['loss']}"
    return record["mechanism"] + loss + (f"-{record['broken']}" if record["broken"] else "")


def table_markdown(records: list[dict[str, Any]]) -> str:
    """The audit table, one row per audit."""
    lines = [
        "| mechanism | broken | claimed epsilon | delta | audited lower bound | realised "
        "epsilon | runs | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        realised = "-" if r["realised_epsilon"] is None else f"{r['realised_epsilon']:.3g}"
        flag = " (exceeds the claim)" if r["epsilon_lower_bound"] > r["claimed_epsilon"] else ""
        lines.append(
            f"| {_label(r)} | {r['broken'] or '-'} | {r['claimed_epsilon']:.3g} | "
            f"{r['delta']:g} | {r['epsilon_lower_bound']:.3f}{flag} | {realised} | {r['runs']} | "
            f"{r['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def roc_png(records: list[dict[str, Any]]) -> bytes | None:
    """Every honest audit's ROC curve (log axes) beside the best one its claim allows; None
    without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    honest = [r for r in records if r["broken"] is None]
    fig = Figure(figsize=(6.0, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    grid = np.logspace(-4, 0, 200)
    for r in honest:
        fpr, tpr = np.asarray(r["roc"]["fpr"]), np.asarray(r["roc"]["tpr"])
        ax.plot(np.clip(fpr, 1e-4, 1), tpr, label=_label(r), linewidth=1.2)
    if honest:
        eps, delta = honest[0]["claimed_epsilon"], honest[0]["delta"]
        bound = np.minimum(
            1.0, np.minimum(math.exp(eps) * grid + delta, 1 - math.exp(-eps) * (1 - grid - delta))
        )
        ax.plot(grid, bound, "k--", label=f"claim epsilon {eps:g}", linewidth=1.0)
    ax.set_xscale("log")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title("audits: ROC of each attacker's test")
    ax.legend(fontsize=7, loc="lower right")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def audit_all(
    out: str | os.PathLike[str],
    *,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    runs: int = 1000,
    broken_runs: int = 300,
    seed: int = 0,
    workers: int | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    executor: Executor | None = None,
) -> list[dict[str, Any]]:
    """Run every audit and write ``out`` (see the module docstring); return the records.

    ``workers`` processes run the audits (default: every core), or ``executor`` does (e.g. a
    :class:`dpfed.engines.tasks.RayExecutor`: one task per audit, the same records since each
    audit has its own seed); ``progress`` is called with each record as it finishes.
    """
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise DpfedInputError(f"--out must be a folder. Found the file {str(folder)!r}.")
    tasks = audit_tasks(runs, broken_runs)
    workers = workers or os.cpu_count() or 1
    records: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        pool = executor or stack.enter_context(ProcessPoolExecutor(max_workers=workers))
        futures = [pool.submit(_run, task, epsilon, delta, seed) for task in tasks]
        try:
            for future in as_completed(futures):
                record = future.result()
                records.append(record)
                if progress is not None:
                    progress(record)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    order = {(t[0], t[1], t[2]): i for i, t in enumerate(tasks)}
    records.sort(key=lambda r: order.get((r["mechanism"], r["loss"], r["broken"]), len(order)))
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        write_json_atomic(folder / f"{_file_name(record)}.json", record)
    write_json_atomic(
        folder / "audit.json", [{k: v for k, v in r.items() if k != "roc"} for r in records]
    )
    (folder / "table.md").write_text(table_markdown(records))
    png = roc_png(records)
    if png is not None:
        (folder / "roc.png").write_bytes(png)
    return records


__all__ = ["AS_IS", "audit_all", "audit_tasks", "roc_png", "table_markdown"]
