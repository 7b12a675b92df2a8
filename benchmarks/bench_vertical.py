"""Speed of dpfed's ADMM sharing against the paper's Python prototype, on a9a split 66 | 57.

Run ``python benchmarks/bench_vertical.py --help``; see ``benchmarks/README.md``. Both sides
solve the same problem with the same iterates (L2-regularised logistic regression,
``lam = 1e-4``, fixed ``rho = 0.25``, everything starting at 0), in the same process and
with the same BLAS thread limit, so the ratio compares implementations, not algorithms.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy

from dpfed.core.admm import z_update
from dpfed.core.losses import get_loss
from dpfed.core.regularizers import L2
from dpfed.core.xupdate import make_local_solver
from dpfed.data import load_dataset, vertical_split
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

HERE = Path(__file__).resolve().parent
SPLIT = (66, 57)


def _load_prototype():
    """Import ``prototype_admm.py`` from this folder (benchmarks is not a package)."""
    spec = importlib.util.spec_from_file_location("prototype_admm", HERE / "prototype_admm.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("prototype_admm", module)
    spec.loader.exec_module(module)
    return module


def machine_info(threads: int) -> dict:
    """Platform, CPU count, library versions and the load when the run started."""
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "blas_threads": threads if threads > 0 else "library default",
    }
    try:
        info["load_average_1m"] = os.getloadavg()[0]
    except OSError:
        info["load_average_1m"] = None
    return info


def _first_reaching(history: list[dict], target: float) -> dict | None:
    for entry in history:
        if entry["test_log_loss"] is not None and entry["test_log_loss"] <= target:
            return entry
    return None


def bench_dpfed(blocks, y, test_blocks, y_test, args) -> dict:
    """Per-iteration time of ``train_vertical`` and its time to the target test loss."""
    cfg = VerticalConfig(
        lam=args.lam,
        rho=args.rho,
        iterations=args.dpfed_iterations,
        mechanism="none",
        adaptive_rho=False,
        acceleration="none",  # the prototype's iterates: plain rounds
        fit_intercept=False,  # the prototype's model has none
    )
    per_iter = []
    for _ in range(args.repeats):
        result = train_vertical(blocks, y, cfg)
        per_iter.append(result.seconds / args.dpfed_iterations)
    # The two updates alone, on the state the run ended in (spectral factorisation apart).
    n = y.shape[0]
    setup, x_times = 0.0, []
    solvers = []
    for block in blocks:
        solver = make_local_solver(block, L2(), n * args.lam)
        start = time.perf_counter()
        _ = solver.spectrum
        setup += time.perf_counter() - start
        solvers.append(solver)
    models = list(result.models.values())
    scores = [np.asarray(b @ x).reshape(-1) for b, x in zip(blocks, models, strict=True)]
    s = sum(scores)
    rng = np.random.default_rng(0)
    dual = 0.1 * rng.standard_normal(n)
    targets = [u - 0.01 * rng.standard_normal(n) - dual / args.rho for u in scores]
    for _ in range(args.repeats):
        start = time.perf_counter()
        for solver, c, x in zip(solvers, targets, models, strict=True):
            solver.solve(c, args.rho, x)
        x_times.append(time.perf_counter() - start)
    loss = get_loss("logistic")
    z_times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        z_update(loss, s, dual, y, args.rho)
        z_times.append(time.perf_counter() - start)
    # Time to target: evaluation is excluded from the history's seconds.
    run = train_vertical(
        blocks,
        y,
        VerticalConfig(
            lam=args.lam,
            rho=args.rho,
            iterations=args.max_iterations,
            mechanism="none",
            adaptive_rho=False,
            acceleration="none",
            fit_intercept=False,
        ),
        test_blocks=test_blocks,
        test_labels=y_test,
    )
    hit = _first_reaching(run.history, args.target)
    return {
        "config": {
            "lam": args.lam,
            "rho": args.rho,
            "adaptive_rho": False,
            "iterations": args.dpfed_iterations,
            "repeats": args.repeats,
        },
        "per_iteration_seconds": statistics.median(per_iter),
        "per_iteration_seconds_all_repeats": per_iter,
        "x_update_seconds": statistics.median(x_times),
        "z_update_seconds": statistics.median(z_times),
        "factorisation_seconds": setup,
        "iterations_to_target": hit["iteration"] if hit else None,
        "time_to_target_seconds": hit["seconds"] if hit else None,
        "final_test_log_loss": run.history[-1]["test_log_loss"],
        "test_log_loss_per_iteration": [h["test_log_loss"] for h in run.history],
    }


def bench_prototype(blocks, y, test_blocks, y_test, args, dpfed_iterations_to_target) -> dict:
    """Per-iteration time of the prototype; its time to target, measured or extrapolated."""
    proto = _load_prototype()
    to_target = args.prototype_budget > 0
    run = proto.prototype_admm(
        blocks,
        y,
        lam=args.lam,
        rho=args.rho,
        iterations=args.max_iterations if to_target else args.prototype_iterations,
        min_iterations=args.prototype_iterations,
        target=args.target if to_target else None,
        max_seconds=args.prototype_budget if to_target else None,
        test_blocks=test_blocks,
        test_labels=y_test,
        callback=lambda e: print(
            f"  prototype iteration {e['iteration']}: {e['x_seconds'] + e['z_seconds']:.2f} s, "
            f"test log loss {e['test_log_loss']:.4f}",
            flush=True,
        ),
    )
    history = run["history"]
    iters = len(history)
    per_iteration = history[-1]["seconds"] / iters
    hit = _first_reaching(history, args.target)
    out = {
        "config": {
            "lam": args.lam,
            "rho": args.rho,
            "lbfgs_options": "scipy defaults",
            "z_update": "scipy.optimize.minimize_scalar (Brent) per sample",
        },
        "iterations_run": iters,
        "per_iteration_seconds": per_iteration,
        "x_update_seconds": statistics.mean(h["x_seconds"] for h in history),
        "z_update_seconds": statistics.mean(h["z_seconds"] for h in history),
        "test_log_loss_per_iteration": [h["test_log_loss"] for h in history],
        "iterations_to_target": hit["iteration"] if hit else None,
    }
    if hit is not None:
        out["time_to_target_seconds"] = hit["seconds"]
        out["time_to_target_method"] = "measured: the prototype was run until it reached it"
    elif dpfed_iterations_to_target is not None:
        out["time_to_target_seconds"] = per_iteration * dpfed_iterations_to_target
        out["time_to_target_method"] = (
            f"extrapolated: per-iteration time x the {dpfed_iterations_to_target} iterations "
            "dpfed needed (same iterates); running the prototype to the target was "
            + ("beyond --prototype-budget" if to_target else "disabled (--prototype-budget 0)")
        )
    else:
        out["time_to_target_seconds"] = None
        out["time_to_target_method"] = "not reached by dpfed either"
    return out


def _ratio(a, b):
    return a / b if a is not None and b else None


def build_parser() -> argparse.ArgumentParser:
    """The command line of the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder holding a9a/a9a and a9a/a9a.t (default: $DPFED_DATA)",
    )
    parser.add_argument(
        "--out",
        default=str(HERE / "results" / "vertical.json"),
        help="JSON file to write (default: benchmarks/results/vertical.json)",
    )
    parser.add_argument(
        "--prototype-iterations",
        type=int,
        default=3,
        help="iterations of the prototype at least (default 3)",
    )
    parser.add_argument(
        "--prototype-budget",
        type=float,
        default=300.0,
        help="seconds the prototype may run towards the target; 0 extrapolates "
        "from its per-iteration time (default 300)",
    )
    parser.add_argument("--dpfed-iterations", type=int, default=20)
    parser.add_argument(
        "--max-iterations",
        type=int,
        default=100,
        help="cap on iterations when running to the target",
    )
    parser.add_argument("--repeats", type=int, default=3, help="dpfed timing repeats (median)")
    parser.add_argument("--target", type=float, default=0.3290, help="test log loss target")
    parser.add_argument("--lam", type=float, default=1e-4)
    parser.add_argument("--rho", type=float, default=0.25)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS threads for both sides (0: library default; default 1)",
    )
    return parser


def run(blocks, y, test_blocks, y_test, args: argparse.Namespace) -> dict:
    """Measure both implementations on the given blocks; return the report (no I/O).

    Parameters
    ----------
    blocks, test_blocks : list of matrices, shapes ``(N, d_m)`` and ``(N_test, d_m)``
    y, y_test : ndarray, shapes ``(N,)`` and ``(N_test,)``, in {-1, 1}
    args : argparse.Namespace
        As parsed by :func:`build_parser`.
    """
    from threadpoolctl import threadpool_limits

    limiter = threadpool_limits(limits=args.threads) if args.threads > 0 else None
    try:
        info = machine_info(args.threads)
        print(
            f"dpfed train_vertical: {args.dpfed_iterations} iterations x {args.repeats}", flush=True
        )
        ours = bench_dpfed(blocks, y, test_blocks, y_test, args)
        print("prototype (L-BFGS-B x-update, minimize_scalar per sample z-update)", flush=True)
        theirs = bench_prototype(blocks, y, test_blocks, y_test, args, ours["iterations_to_target"])
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
    return {
        "benchmark": "vertical ADMM sharing, logistic + L2",
        "data": {
            "train_rows": int(y.shape[0]),
            "test_rows": int(y_test.shape[0]),
            "split": [int(b.shape[1]) for b in blocks],
        },
        "target_test_log_loss": args.target,
        "machine": info,
        "dpfed": ours,
        "prototype": theirs,
        "ratio_per_iteration": _ratio(
            theirs["per_iteration_seconds"], ours["per_iteration_seconds"]
        ),
        "ratio_time_to_target": _ratio(
            theirs["time_to_target_seconds"], ours["time_to_target_seconds"]
        ),
        "notes": [
            "per-iteration time = training seconds / iterations; dpfed's includes the one-off "
            "spectral factorisation of each block in its first round and the in-process "
            "message passing; evaluation is excluded on both sides",
            "x_update_seconds and z_update_seconds: one iteration's x-updates (all parties) "
            "and z-update alone; dpfed's factorisation is in factorisation_seconds",
            "both sides run serially in one process (the parties' x-updates are not "
            "parallelised on either side), with the same BLAS thread limit",
            "same fixed rho and lam on both sides (dpfed's adaptive rho is off), so the "
            "iterates agree and the ratio compares implementations, not algorithms",
        ],
    }


def main(argv: list[str] | None = None) -> dict:
    """Load a9a, split it 66 | 57, measure, write the JSON and print a table."""
    args = build_parser().parse_args(argv)
    data = load_dataset("a9a", data_dir=args.data_dir)
    blocks = vertical_split(data.X_train, SPLIT)
    test_blocks = vertical_split(data.X_test, SPLIT)
    report = run(blocks, data.y_train, test_blocks, data.y_test, args)
    report["benchmark"] = "vertical ADMM sharing, a9a split 66|57, logistic + L2"
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    _print_table(report)
    print(f"written to {out}")
    return report


def _fmt(v, unit: str = "s") -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.2f} ms" if unit == "s" and v < 1 else f"{v:.3g} {unit}"


def _print_table(r: dict) -> None:
    a, b = r["dpfed"], r["prototype"]
    rows = [
        (
            "per iteration",
            a["per_iteration_seconds"],
            b["per_iteration_seconds"],
            r["ratio_per_iteration"],
        ),
        (
            "x-update",
            a["x_update_seconds"],
            b["x_update_seconds"],
            _ratio(b["x_update_seconds"], a["x_update_seconds"]),
        ),
        (
            "z-update",
            a["z_update_seconds"],
            b["z_update_seconds"],
            _ratio(b["z_update_seconds"], a["z_update_seconds"]),
        ),
        (
            f"to test loss <= {r['target_test_log_loss']}",
            a["time_to_target_seconds"],
            b["time_to_target_seconds"],
            r["ratio_time_to_target"],
        ),
    ]
    print(f"\n{'':28s}{'dpfed':>14s}{'prototype':>14s}{'ratio':>10s}")
    for name, x, y, q in rows:
        ratio = f"{q:.0f}x" if q is not None else "-"
        print(f"{name:28s}{_fmt(x):>14s}{_fmt(y):>14s}{ratio:>10s}")
    print(
        f"iterations to target: dpfed {a['iterations_to_target']}, "
        f"prototype {b['iterations_to_target']} ({b['time_to_target_method']})"
    )


if __name__ == "__main__":
    from dpfed._validation import DpfedInputError

    try:
        main()
    except DpfedInputError as err:
        sys.exit(f"bench_vertical: {err}")
