"""Throughput of the exact integer samplers against numpy's floating-point normal draws.

Run ``python benchmarks/bench_sampler.py --help``; see ``benchmarks/README.md``. Three parts,
every ratio against a reference measured in the same run:

1. **bulk**: seconds for ``n`` = 10^6 and 10^7 draws of :func:`dpfed.privacy.discrete.
   discrete_gaussian` (CKS, several ``sigma^2``), :func:`~dpfed.privacy.discrete.discrete_laplace`
   and the block-envelope sampler :func:`dpfed.privacy.block_gaussian.block_gaussian` against
   ``rng.normal(0, sigma, n)`` from the same kind of generator (best of the repeats, CPU
   seconds of this process);
2. **per client**: the secure sum's noise as it is drawn there, each client from its own
   generator (:func:`dpfed.dca.noise.client_noise_generator`), for N clients of dimension d:
   ``standard_normal(out=...)`` per client (the float noise) against
   :func:`dpfed.dca.discrete_noise.clients_discrete_noise` over blocks of clients (the exact
   noise, as the secure sum draws it);
3. **secure sum**: the DCA bench cell (N, d, M = 10, one worker) timed as ``dpfed dca bench``
   times it, with the float noise and with the exact discrete noise, against the paper's Spark
   seconds;
4. **l2-Laplace release**: PVP's output perturbation as a node draws it, one vector of dimension
   d per call: :func:`dpfed.privacy.l2_laplace_grid.l2_laplace_grid_release` (exact, on the
   grid) against ``value + sample_l2_laplace(zeta, d, rng)`` (the float draw), and in bulk
   (10^5 vectors per call).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PAPER_SPARK_SECONDS = {(10000, 1000): 101.2}
TARGET_SPEEDUP = 100.0


def _best(fn, repeats: int) -> dict:
    """CPU seconds (this process) and wall seconds of ``fn``, best of ``repeats``."""
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return {"cpu_seconds": min(cpu), "wall_seconds": min(wall), "all_cpu_seconds": cpu}


def bench_bulk(sizes: list[int], repeats: int) -> list[dict]:
    """Samples per second of the exact samplers and of ``rng.normal``, same run."""
    from dpfed.privacy.block_gaussian import block_gaussian
    from dpfed.privacy.discrete import discrete_gaussian, discrete_laplace

    cases = [
        (
            "discrete_gaussian",
            "sigma2 = 2^40 (grid release: sigma / step in [2^20, 2^21))",
            lambda n, g: discrete_gaussian(2**40, n, g),
            2.0**20,
        ),
        (
            "discrete_gaussian",
            "sigma2 = 2^48 (secure sum: client std 1 at 24 fractional bits)",
            lambda n, g: discrete_gaussian(2**48, n, g),
            2.0**24,
        ),
        (
            "discrete_gaussian",
            "sigma2 = 1000",
            lambda n, g: discrete_gaussian(1000, n, g),
            1000**0.5,
        ),
        ("discrete_gaussian", "sigma2 = 9/4", lambda n, g: discrete_gaussian("9/4", n, g), 1.5),
        ("discrete_laplace", "scale 2^20", lambda n, g: discrete_laplace(2**20, n, g), 2.0**20),
        (
            "block_gaussian",
            "sigma2 = 2^48 (secure sum)",
            lambda n, g: block_gaussian(2**48, n, g),
            2.0**24,
        ),
        (
            "block_gaussian",
            "sigma2 = 2^53 (a grid release's sigma / step in [2^26, 2^27))",
            lambda n, g: block_gaussian(2**53, n, g),
            2.0**26.5,
        ),
        (
            "block_gaussian",
            "sigma2 = 2^16 (smallest served)",
            lambda n, g: block_gaussian(2**16, n, g),
            2.0**8,
        ),
    ]
    out = []
    for n in sizes:
        rng = np.random.default_rng(1)
        ref = _best(lambda n=n, rng=rng: rng.normal(0.0, 3.0, n), repeats)
        ref_rate = n / ref["cpu_seconds"]
        print(
            f"n = {n:.0e}: rng.normal {ref_rate / 1e6:.1f} M/s "
            f"({ref['cpu_seconds'] * 1e9 / n:.1f} ns per draw)"
        )
        for name, label, fn, sigma in cases:
            timing = _best(lambda fn=fn, n=n, rng=rng: fn(n, rng), repeats)
            rate = n / timing["cpu_seconds"]
            row = {
                "sampler": name,
                "parameters": label,
                "n": n,
                "sigma": sigma,
                "samples_per_second": rate,
                "ns_per_sample": 1e9 / rate,
                **timing,
                "reference": "rng.normal(0, 3, n), same run",
                "reference_samples_per_second": ref_rate,
                "slowdown_vs_normal": ref_rate / rate,
            }
            out.append(row)
            print(
                f"  {name} {label}: {rate / 1e6:.2f} M/s ({1e9 / rate:.0f} ns), "
                f"{ref_rate / rate:.1f}x the time of rng.normal"
            )
    return out


def bench_per_client(clients: int, dim: int, sigma2: int, repeats: int) -> dict:
    """The secure sum's per-client noise: normal draws against exact discrete draws."""
    from dpfed.dca.discrete_noise import clients_discrete_noise
    from dpfed.dca.noise import client_noise_generator
    from dpfed.dca.secure_sum import default_block_size

    seed = 2**100 + 3
    buf = np.empty(dim)

    def normal() -> None:
        for i in range(clients):
            client_noise_generator(seed, i).standard_normal(out=buf)

    def seeding() -> None:
        for i in range(clients):
            client_noise_generator(seed, i)

    block = default_block_size(dim, clients)

    def discrete() -> None:  # blocks of clients, as the secure sum draws them
        for start in range(0, clients, block):
            clients_discrete_noise(seed, range(start, min(start + block, clients)), dim, sigma2)

    seed_t = _best(seeding, repeats)
    normal_t = _best(normal, repeats)
    discrete_t = _best(discrete, repeats)
    normal_draws = normal_t["cpu_seconds"] - seed_t["cpu_seconds"]
    discrete_draws = discrete_t["cpu_seconds"] - seed_t["cpu_seconds"]
    out = {
        "clients": clients,
        "dim": dim,
        "sigma2": sigma2,
        "seeding_cpu_seconds": seed_t["cpu_seconds"],
        "normal_cpu_seconds": normal_t["cpu_seconds"],
        "discrete_cpu_seconds": discrete_t["cpu_seconds"],
        "normal_draws_cpu_seconds": normal_draws,
        "discrete_draws_cpu_seconds": discrete_draws,
        "discrete_us_per_client": discrete_draws / clients * 1e6,
        "discrete_ns_per_sample": discrete_draws / (clients * dim) * 1e9,
        "added_cpu_seconds": discrete_draws - normal_draws,
        "slowdown_vs_normal": discrete_draws / normal_draws,
    }
    print(
        f"per client (N = {clients}, d = {dim}, s^2 = {sigma2}): generators "
        f"{seed_t['cpu_seconds']:.3f} s, normal draws {normal_draws:.3f} s, discrete draws "
        f"{discrete_draws:.3f} s ({out['discrete_us_per_client']:.0f} us per client), "
        f"+{out['added_cpu_seconds']:.3f} s"
    )
    return out


def bench_secure_sum(clients: int, dim: int, repeats: int) -> dict:
    """The bench cell with the float noise and with the exact discrete noise."""
    from dpfed.experiments.dca_scaling import time_secure_sum

    paper = PAPER_SPARK_SECONDS.get((clients, dim))
    out: dict = {
        "clients": clients,
        "dim": dim,
        "compute_nodes": 10,
        "paper_seconds": paper,
        "target_speedup": TARGET_SPEEDUP,
    }
    for noise in ("gaussian", "discrete"):
        cell = time_secure_sum(clients, dim, 10, repeats=repeats, workers=1, noise=noise)
        out[noise] = {
            "workers": cell["workers"],
            "seconds": cell["seconds"],
            "median": cell["median"],
            "noise_sampling_seconds": cell["timing"].get("noise_sampling", 0.0),
            "noise_seeding_seconds": cell["timing"].get("noise_seeding", 0.0),
            "speedup": paper / cell["median"] if paper else None,
        }
        if paper:
            print(
                f"secure sum N = {clients}, d = {dim}, M = 10, 1 worker, {noise} noise: "
                f"{cell['median']:.3f} s ({paper / cell['median']:.0f}x the paper's "
                f"{paper:g} s; target {TARGET_SPEEDUP:.0f}x; drawing the noise "
                f"{out[noise]['noise_sampling_seconds']:.3f} s)"
            )
    return out


def bench_l2_laplace(dims: list[int], repeats: int, calls: int = 200) -> list[dict]:
    """Seconds per PVP release: the exact grid release against the float draw, same run."""
    from dpfed.privacy.l2_laplace import sample_l2_laplace
    from dpfed.privacy.l2_laplace_grid import l2_laplace_grid_release

    out = []
    for dim, count in [(d, 1) for d in dims] + [(3, 100_000), (124, 1000)]:
        value = (
            np.random.default_rng(0).normal(size=(count, dim))
            if count > 1
            else np.random.default_rng(0).normal(size=dim)
        )
        rng = np.random.default_rng(1)
        reps = calls if count == 1 else 1

        def floating(value=value, dim=dim, count=count, reps=reps, rng=rng) -> None:
            for _ in range(reps):
                _ = value + sample_l2_laplace(1.0, dim, rng, size=None if count == 1 else count)

        def exact(value=value, reps=reps, rng=rng) -> None:
            for _ in range(reps):
                l2_laplace_grid_release(value, 1.0, rng)

        ref, timing = _best(floating, repeats), _best(exact, repeats)
        vectors = reps * count
        row = {
            "dim": dim,
            "vectors_per_call": count,
            "calls": reps,
            "exact_us_per_vector": timing["cpu_seconds"] / vectors * 1e6,
            "float_us_per_vector": ref["cpu_seconds"] / vectors * 1e6,
            "slowdown_vs_float": timing["cpu_seconds"] / ref["cpu_seconds"],
            "exact": timing,
            "float": ref,
        }
        out.append(row)
        print(
            f"l2-Laplace release d = {dim}, {count} vector(s) per call: exact "
            f"{row['exact_us_per_vector']:.1f} us per vector, float "
            f"{row['float_us_per_vector']:.1f} us ({row['slowdown_vs_float']:.1f}x)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results" / "sampler.json"))
    parser.add_argument("--sizes", default="1e6,1e7", help="comma-separated sample counts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", type=int, default=10000)
    parser.add_argument("--dim", type=int, default=1000)
    parser.add_argument("--skip-secure-sum", action="store_true")
    parser.add_argument(
        "--l2-dims",
        default="14,124",
        help="comma-separated dimensions of the l2-Laplace release (PVP)",
    )
    args = parser.parse_args(argv)
    from bench_dca import machine_info  # the same record of the machine as the DCA bench

    machine = machine_info()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    bulk = bench_bulk(sizes, args.repeats)
    per_client = bench_per_client(args.clients, args.dim, 2**48, args.repeats)
    secure_sum = (
        None if args.skip_secure_sum else bench_secure_sum(args.clients, args.dim, args.repeats)
    )
    l2_laplace = bench_l2_laplace([int(d) for d in args.l2_dims.split(",")], args.repeats)
    payload = {
        "benchmark": "exact integer samplers (CKS, block envelope) against rng.normal, "
        "their cost in the DCA secure sum, and the exact l2-Laplace release",
        "timing": "CPU seconds of this process, best of the repeats (the secure sum: median)",
        "bulk": bulk,
        "per_client": per_client,
        "secure_sum": secure_sum,
        "l2_laplace_release": l2_laplace,
        "machine": machine,
        "load_average_1m_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
