"""``dpfed dca bench`` and ``dpfed reproduce dca-scaling``: the DCA secure sum (paper 004)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.cli.common import add_task_engine_arguments, executor_from_args, output_path, print_json
from dpfed.experiments.dca_scaling import PAPER_COMPUTE_NODES, run_dca_scaling, time_secure_sum
from dpfed.parameters import parse_float, parse_int


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    message = f"--workers must be 'auto' or an integer >= 1. Found {text!r}."
    try:
        value = int(text)
    except ValueError:
        raise DpfedInputError(message) from None
    if value < 1:
        raise DpfedInputError(message)
    return value


def configure_dca(p: argparse.ArgumentParser) -> None:
    """``dpfed dca``: its ``bench`` subcommand."""
    dsub = p.add_subparsers(dest="dca_command", required=True)
    b = dsub.add_parser(
        "bench",
        help="time one full secure sum of synthetic client vectors",
        description=(
            "Times full DCA secure sums (noise, fixed-point encoding, AES-256-CTR masks, "
            "agreement, node sums, decoding) of bounded uniform client vectors synthesised "
            "block by block inside the timed run, simulated in one process (or worker "
            "processes). Compares with the paper's Spark seconds when the cell is in its "
            "Table 1. The last line is 'seconds: S', the median seconds of one secure sum."
        ),
    )
    b.add_argument("--clients", type=parse_int, required=True, help="number of clients N")
    b.add_argument("--dim", type=parse_int, required=True, help="vector length d")
    b.add_argument(
        "--compute-nodes", type=parse_int, default=10, help="compute nodes M (default 10)"
    )
    b.add_argument(
        "--tolerated", type=parse_int, default=0, help="tolerated dropouts T (default 0)"
    )
    b.add_argument(
        "--drop",
        type=parse_int,
        default=0,
        help="clients whose shares are lost (at most --tolerated; default 0)",
    )
    b.add_argument(
        "--encrypt",
        action="store_true",
        help="seal every message for its node and open it there (much slower)",
    )
    b.add_argument("--repeats", type=parse_int, default=1, help="secure sums to time (median)")
    b.add_argument(
        "--workers",
        default="auto",
        help="worker processes, or 'auto' (1 for small cells, every core otherwise)",
    )
    b.add_argument(
        "--noise-std",
        type=parse_float,
        default=1.0,
        help="each client's noise standard deviation (default 1)",
    )
    b.add_argument(
        "--noise",
        choices=["discrete", "gaussian"],
        default="discrete",
        help="the clients' noise: exact discrete Gaussian noise in the fixed-point "
        "ring (default), or drawn in floating point (faster; open to "
        "floating-point attacks)",
    )
    b.add_argument("--seed", type=parse_int, default=0, help="seed of the vectors and the noise")
    b.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    add_task_engine_arguments(b, "client ranges")
    b.set_defaults(func=run_dca_bench)


def run_dca_bench(args: argparse.Namespace) -> int:
    if args.drop > args.tolerated:
        raise DpfedInputError(
            f"--drop must be at most --tolerated = {args.tolerated}. Found {args.drop}."
        )
    executor = executor_from_args(args)
    cell = time_secure_sum(
        args.clients,
        args.dim,
        args.compute_nodes,
        tolerated=args.tolerated,
        drop=args.drop,
        encrypt=args.encrypt,
        repeats=args.repeats,
        workers=_workers(args.workers),
        noise_std=args.noise_std,
        seed=args.seed,
        executor=executor,
        noise=args.noise,
    )
    path = (
        "envelope encryption of every message"
        if args.encrypt
        else ("no encryption; node sums taken straight from the keystream")
    )
    where = "Ray tasks" if executor is not None else "in-process simulation"
    print(
        f"DCA secure sum ({args.noise} noise), {where}: N = {cell['n_clients']} clients, "
        f"d = {cell['dim']}, M = {cell['compute_nodes']} compute nodes, T = {cell['tolerated']}"
        f" ({cell['dropped']} dropped), {cell['workers']} worker process(es), {path}"
    )
    print(
        "inputs: uniform on [-1, 1], synthesised block by block inside the timed run "
        f"({cell['values_seconds']:.3g} s of it, summed over workers)"
    )
    for i, s in enumerate(cell["seconds"], 1):
        print(f"run {i}/{cell['repeats']}: {s:.3f} s")
    shown = (
        "noise_seeding",
        "noise_sampling",
        "encode",
        "masks",
        "sums",
        "encrypt",
        "decrypt",
        "agreement",
        "decode",
    )
    phases = ", ".join(
        f"{k.replace('_', ' ')} {cell['timing'][k]:.3g}" for k in shown if cell["timing"].get(k)
    )
    print(f"phases of the median run (s, summed over workers): {phases}")
    if cell["keystream_gb_per_s"]:
        print(
            f"masks: {cell['keystream_bytes'] / 1e9:.3g} GB of AES-256 counter-mode keystream "
            f"at {cell['keystream_gb_per_s']:.2f} GB/s per process"
        )
    print(
        f"check: the total deviates from the inputs' sum by at most "
        f"{cell['check']['in_noise_stds']:.2g} noise standard deviations"
    )
    print(f"peak resident memory of this process: {cell['peak_rss_mb']:.0f} MiB")
    for node, use in cell.get("nodes", {}).items():
        print(
            f"node {node}: {use['workers']} worker(s), peak resident memory "
            f"{use['peak_rss_bytes_max'] / 2**20:.0f} MiB the largest, "
            f"{use['peak_rss_bytes_sum'] / 2**20:.0f} MiB together"
        )
    print(f"encoded total: sha256 {cell['total_sha256']}")
    if cell["paper_seconds"] is not None:
        print(
            f"paper (Spark cluster, M = {PAPER_COMPUTE_NODES}): {cell['paper_seconds']:g} s; "
            f"this run: {cell['median']:.3f} s, {cell['ratio']:.0f}x faster. This compares a "
            f"simulation ({where}, the messages never on a network) against a Spark cluster "
            "that sent the messages over a network (both without encryption)."
        )
    else:
        print(
            "paper: this cell is not in the paper's Table 1 (M = 10; N = 10^2 to 10^5 and "
            "d = 10 to 10^4, powers of 10)"
        )
    if args.json:
        print(json.dumps(cell, default=str))
    print(f"seconds: {cell['median']:.3f}")
    return 0


def add_reproduce_dca_scaling(psub: Any) -> None:
    """Register ``dpfed reproduce dca-scaling`` on the ``reproduce`` subparsers."""
    q = psub.add_parser(
        "dca-scaling",
        help="paper 004's Table 1: secure-sum seconds against the paper's Spark cluster",
    )
    q.add_argument("--out", type=output_path("folder"), required=True, help="output folder")
    q.add_argument("--quick", action="store_true", help="the four smallest cells only")
    q.add_argument("--repeats", type=parse_int, help="secure sums per cell (default 3, quick 1)")
    q.add_argument("--workers", default="auto", help="worker processes, or 'auto'")
    q.add_argument(
        "--noise",
        choices=["gaussian", "discrete"],
        default="gaussian",
        help="the clients' noise: the paper's, drawn in floating point (default), or "
        "dpfed's exact discrete Gaussian noise in the ring",
    )
    q.add_argument("--quiet", action="store_true")
    add_task_engine_arguments(q, "client ranges of each secure sum")
    q.set_defaults(func=run_reproduce_dca_scaling)


def run_reproduce_dca_scaling(args: argparse.Namespace) -> int:
    summary = run_dca_scaling(
        args.out,
        quick=args.quick,
        repeats=args.repeats,
        workers=_workers(args.workers),
        progress=not args.quiet,
        executor=executor_from_args(args),
        noise=args.noise,
    )
    print_json(summary)
    return 0
