"""Speed of the DCA secure sum: the mask keystream, and full secure sums against paper 004.

Run ``python benchmarks/bench_dca.py --help``; see ``benchmarks/README.md``. Three parts:

1. **keystream**: GB/s of :class:`dpfed.dca.keystream.MaskStream` (AES-256 counter mode,
   whole 1 MiB segments through the GCM encryptor, ``update_into`` a reused buffer) on one
   core, against numpy's ``Generator.integers`` (uint64, full range) measured in the same run
   as the reference; also plain CTR mode ``update_into`` and ``update()`` returning new bytes,
   and two threads at once (does ``cryptography`` release the GIL?).
2. **noise**: the cost of the per-client noise derivation (building each client's generator)
   and of the normal draws.
3. **secure sums**: seconds of one full secure sum per cell (N, d), M = 10, each cell in a
   fresh subprocess so its peak resident memory is its own (``VmHWM`` of the process, and
   the resident memory of its whole process tree, workers included, sampled every 0.2 s);
   ratios against the paper's Spark seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TARGET_GBPS = 2.0
TARGETS = {(10000, 1000): 101.2 / 100.0, (100000, 10000): 1592.29 / 50.0}
DEFAULT_CELLS = ((100, 10), (1000, 100), (10000, 1000), (10000, 10000), (100000, 10000))


def machine_info() -> dict:
    """Platform, CPU count, library versions and the load when the run started."""
    import cryptography

    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "cryptography": cryptography.__version__,
    }
    try:
        info["load_average_1m"] = os.getloadavg()[0]
    except OSError:
        info["load_average_1m"] = None
    return info


def _best_rate(fill, nbytes: int, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fill()
        times.append(time.perf_counter() - t0)
    return {
        "gb_per_s": nbytes / min(times) / 1e9,
        "median_gb_per_s": nbytes / statistics.median(times) / 1e9,
        "seconds": times,
    }


def bench_keystream(mib: int, repeats: int) -> dict:
    """GB/s of the mask stream on one core, of its references, and of two threads.

    Everything produces ``mib`` MiB one MiB at a time into a reused 1 MiB buffer (as the
    secure sum does: the words are summed while in cache); the mask stream is also timed
    filling one ``mib`` MiB buffer (bound by memory bandwidth).
    """
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    from dpfed.dca.keystream import MaskStream

    seg = (1 << 20) // 8  # words per MiB
    nbytes = mib << 20
    stream = MaskStream()
    small = np.zeros(seg, dtype=np.uint64)

    def cached(s: MaskStream = stream, out: np.ndarray = small) -> None:
        for k in range(mib):
            s.fill(out, k * seg)

    masks = _best_rate(cached, nbytes, repeats)
    large = np.zeros(mib * seg, dtype=np.uint64)
    masks_large = _best_rate(lambda out=large: stream.fill(out), nbytes, repeats)
    large = None
    rng = np.random.default_rng(0)
    top = np.iinfo(np.uint64).max

    def numpy_integers() -> None:
        for _ in range(mib):
            rng.integers(0, top, size=seg, dtype=np.uint64, endpoint=True)

    reference = _best_rate(numpy_integers, nbytes, repeats)
    key = os.urandom(32)
    zeros = bytearray(1 << 20)
    view = memoryview(bytearray((1 << 20) + 15))

    def ctr_into() -> None:  # plain CTR mode, update_into a reused buffer
        for k in range(mib):
            counter = (k << 16).to_bytes(16, "big")
            Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor().update_into(zeros, view)

    ctr = _best_rate(ctr_into, nbytes, repeats)

    def ctr_update() -> None:  # plain CTR mode, update() returning new bytes
        for k in range(mib):
            counter = (k << 16).to_bytes(16, "big")
            Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor().update(zeros)

    allocating = _best_rate(ctr_update, nbytes, repeats)
    streams = [MaskStream(), MaskStream()]
    bufs = [np.zeros(seg, dtype=np.uint64) for _ in range(2)]

    def work(i: int) -> None:
        for _ in range(repeats):
            cached(streams[i], bufs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    two = 2 * repeats * nbytes / (time.perf_counter() - t0) / 1e9
    one = masks["median_gb_per_s"]
    return {
        "mib": mib,
        "repeats": repeats,
        "mask_stream": masks,
        "mask_stream_one_large_buffer": masks_large,
        "numpy_integers_uint64": reference,
        "aes256_ctr_update_into": ctr,
        "aes256_ctr_update_allocating": allocating,
        "ratio_to_numpy": masks["gb_per_s"] / reference["gb_per_s"],
        "ratio_to_ctr_update_into": masks["gb_per_s"] / ctr["gb_per_s"],
        "target_gb_per_s": TARGET_GBPS,
        "target_met": masks["gb_per_s"] >= TARGET_GBPS,
        "two_threads_aggregate_gb_per_s": two,
        "two_threads_speedup": two / one,
        "gil_released": two / one > 1.5,
    }


def bench_noise(clients: int, dim: int) -> dict:
    """Seconds per client to build its generator, and per normal draw."""
    from dpfed.dca.noise import client_noise_generator

    t0 = time.process_time()
    gens = [client_noise_generator(2**100 + 3, i) for i in range(clients)]
    seeding = (time.process_time() - t0) / clients
    out = np.empty(dim)
    t0 = time.process_time()
    for g in gens[:100]:
        g.standard_normal(out=out)
    sampling = (time.process_time() - t0) / (100 * dim)
    return {
        "seeding_us_per_client": seeding * 1e6,
        "normal_ns_per_draw": sampling * 1e9,
        "clients": clients,
        "dim": dim,
    }


def run_cell_child(n: int, d: int, workers: str, repeats: int) -> None:
    """Child process: time one cell and print its JSON (peak memory: ``VmHWM``)."""
    from dpfed.experiments.dca_scaling import time_secure_sum

    w: int | str = workers if workers == "auto" else int(workers)
    print(json.dumps(time_secure_sum(n, d, 10, repeats=repeats, workers=w), default=str))


def _tree_rss_mb(root: int) -> float:
    """Resident memory of ``root`` and all its descendants (Linux ``/proc``), in MiB."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(rss.get(pid, 0) for pid in tree) / (1 << 20)


def bench_cell(n: int, d: int, workers: str, repeats: int) -> dict:
    """Run one cell in a subprocess; sample the memory of its process tree every 0.2 s."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(n),
        str(d),
        "--workers",
        workers,
        "--repeats",
        str(repeats),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0.0
    sampling = os.path.isdir("/proc")
    while proc.poll() is None:
        if sampling:
            peak = max(peak, _tree_rss_mb(proc.pid))
        time.sleep(0.2)
    out, err = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"cell {n}x{d} failed:\n{err}")
    cell = json.loads(out.strip().splitlines()[-1])
    cell["peak_rss_mb_process_tree"] = peak if sampling else None
    return cell


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results" / "dca.json"))
    parser.add_argument(
        "--cells",
        default=",".join(f"{n}x{d}" for n, d in DEFAULT_CELLS),
        help="comma-separated NxD cells, or 'table' for all 16 of the paper's",
    )
    parser.add_argument("--repeats", type=int, default=3, help="secure sums per cell")
    parser.add_argument("--workers", default="auto")
    parser.add_argument(
        "--keystream-mib", type=int, default=256, help="MiB produced per timed keystream run"
    )
    parser.add_argument("--keystream-repeats", type=int, default=5)
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_cell_child(args.child[0], args.child[1], args.workers, args.repeats)
        return 0
    from dpfed.experiments.dca_scaling import PAPER_CLIENTS, PAPER_DIMS

    if args.cells == "table":
        cells = [(n, d) for d in PAPER_DIMS for n in PAPER_CLIENTS]
    else:
        cells = [tuple(int(float(v)) for v in c.split("x")) for c in args.cells.split(",")]
    machine = machine_info()
    keystream = bench_keystream(args.keystream_mib, args.keystream_repeats)
    ks = keystream["mask_stream"]["gb_per_s"]
    print(
        f"keystream: MaskStream (AES-256 counter mode) {ks:.2f} GB/s on one core (target "
        f"{TARGET_GBPS:g}; into one {args.keystream_mib} MiB buffer "
        f"{keystream['mask_stream_one_large_buffer']['gb_per_s']:.2f} GB/s); numpy "
        f"Generator.integers "
        f"{keystream['numpy_integers_uint64']['gb_per_s']:.2f} GB/s (ratio "
        f"{keystream['ratio_to_numpy']:.1f}x); plain CTR update_into "
        f"{keystream['aes256_ctr_update_into']['gb_per_s']:.2f} GB/s, CTR update() allocating "
        f"{keystream['aes256_ctr_update_allocating']['gb_per_s']:.2f} GB/s; two threads "
        f"{keystream['two_threads_aggregate_gb_per_s']:.2f} GB/s "
        f"({keystream['two_threads_speedup']:.2f}x: GIL "
        f"{'released' if keystream['gil_released'] else 'held'})"
    )
    noise = bench_noise(20000, 10000)
    print(
        f"noise: {noise['seeding_us_per_client']:.1f} us per client generator, "
        f"{noise['normal_ns_per_draw']:.1f} ns per normal draw"
    )
    results = []
    for n, d in cells:
        cell = bench_cell(n, d, args.workers, args.repeats)
        target = TARGETS.get((n, d))
        cell["target_seconds"] = target
        cell["target_met"] = None if target is None else cell["median"] < target
        results.append(cell)
        paper = cell["paper_seconds"]
        print(
            f"N={n:>6} d={d:>5}: {cell['median']:8.3f} s (min {cell['min']:.3f}, "
            f"{cell['workers']} worker(s), inputs {cell['values_seconds']:.2f} s), paper "
            f"{paper if paper is not None else '-'} s"
            + (f", {cell['ratio']:.0f}x" if cell["ratio"] else "")
            + (
                f", target < {target:.2f} s {'met' if cell['target_met'] else 'NOT met'}"
                if target
                else ""
            )
            + f", peak RSS {cell['peak_rss_mb']:.0f} MiB (process tree, sampled: "
            f"{cell['peak_rss_mb_process_tree'] or 0:.0f} MiB)"
        )
    payload = {
        "benchmark": "DCA secure sum (paper 004): keystream and full secure sums, M = 10",
        "comparison": "in-process simulation on this machine vs the paper's Spark cluster",
        "keystream": keystream,
        "noise": noise,
        "cells": results,
        "machine": machine,
        "load_average_1m_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
