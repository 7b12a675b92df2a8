"""Private set intersection over the networked runtime: an aligned job's alignment job on two
parties' tables of 32,561 IDs each (90 % shared), against the same PSI in one process.

Run ``python benchmarks/bench_psi_alignment.py --help``; see ``benchmarks/README.md``. The
networked side is what ``dpfed run`` does before an aligned job: two ``dpfed party``
processes and the leader over gRPC with mutual TLS on loopback, each party reading its CSV
through its schema, the label holder intersecting by ECDH-PSI (OpenMined's library) and
sending the agreed order as HMAC tags, each party writing its ``alignment.json``. The
reference, measured in the same run, is :func:`dpfed.data.psi.intersect` (both roles in this
process, no table, no network). Target: at most 30 s for the networked alignment.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PARTIES = ("label", "bank")
TARGET_SECONDS = 30.0


def write_tables(folder: Path, rows: int, overlap: float, seed: int) -> dict[str, list[str]]:
    """Each party's CSV (``customer_id`` and one numeric column, the label holder a label too)
    and schema: ``rows`` IDs each, ``overlap`` of them shared, each table shuffled."""
    rng = np.random.default_rng(seed)
    shared = round(rows * overlap)
    pool = rng.choice(10**8, size=2 * rows - shared, replace=False)
    ids = {"label": pool[:rows], "bank": np.concatenate([pool[:shared], pool[rows:]])}
    out = {}
    for name in PARTIES:
        order = rng.permutation(ids[name])
        values = rng.uniform(0, 100, size=rows)
        header = "customer_id,x_" + name + (",income" if name == "label" else "")
        lines = [header]
        for v, x in zip(order, values, strict=True):
            lines.append(
                f"C{v:08d},{x:.3f}"
                + ("," + (">50K" if x > 50 else "<=50K") if name == "label" else "")
            )
        (folder / f"{name}.csv").write_text("\n".join(lines) + "\n")
        schema = ['label = "income"', 'positive = ">50K"'] if name == "label" else []
        schema += [f"[columns.x_{name}]", "bounds = [0, 100]"]
        (folder / f"{name}.schema.toml").write_text("\n".join(schema) + "\n")
        out[name] = [f"C{v:08d}" for v in order]
    return out


def write_job(folder: Path, data: Path, certs: Path, job_id: str) -> Path:
    from bench_network import free_ports

    ports = free_ports(len(PARTIES) + 1)
    lines = [
        "[job]",
        f'id = "{job_id}"',
        'protocol = "vertical"',
        'align = "psi"',
        "round_timeout = 120.0",
        "grace = 10.0",
        "idle_timeout = 300.0",
        "",
        "[params]",
        'mechanism = "none"',
        "iterations = 1",
        "",
        "[tls]",
        f'ca = "{certs / "ca.pem"}"',
        "",
        "[leader]",
        f'address = "127.0.0.1:{ports[0]}"',
        f'certificate = "{certs / "leader.pem"}"',
        f'key = "{certs / "leader.key"}"',
    ]
    for name, port in zip(PARTIES, ports[1:], strict=True):
        lines += [
            "",
            "[[party]]",
            f'name = "{name}"',
            f'address = "127.0.0.1:{port}"',
            f'certificate = "{certs / (name + ".pem")}"',
            f'key = "{certs / (name + ".key")}"',
            f'data_dir = "{data}"',
            f'data = "{name}.csv"',
            'id_column = "customer_id"',
            f'schema = "{name}.schema.toml"',
            f'workdir = "{folder / "work" / name}"',
        ]
    path = folder / f"{job_id}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def time_networked(config: Path, env: dict) -> dict:
    """Wall seconds of the leader's alignment job, two party processes already serving."""
    from dpfed.runtime.jobfile import load_job
    from dpfed.runtime.leader import run_alignment

    spec = load_job(config)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "dpfed.cli", "party", "--config", str(config), "--name", n],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n in spec.names
    ]
    try:
        started = time.perf_counter()
        result = run_alignment(spec, progress=False)
        wall = time.perf_counter() - started
    finally:
        for p in procs:  # they wait for the job itself: not part of the measurement
            p.kill()
            p.wait(timeout=30)
    return {
        "wall_seconds": wall,
        "job_seconds": float(result["seconds"]),
        "shared_rows": int(result["parts"]["train"]["rows"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results" / "psi_alignment.json"))
    parser.add_argument("--rows", type=int, default=32561, help="IDs per party")
    parser.add_argument("--overlap", type=float, default=0.9)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from bench_dca import machine_info
    from dpfed.data.psi import intersect
    from dpfed.runtime.certs import init_certificates

    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    networked, inprocess = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        certs = folder / "certs"
        init_certificates(certs, list(PARTIES))
        data = folder / "data"
        data.mkdir()
        ids = write_tables(data, args.rows, args.overlap, seed=0)
        for k in range(args.repeats):
            c0 = time.perf_counter()
            shared, nbytes = intersect(ids["label"], ids["bank"])
            inprocess.append(time.perf_counter() - c0)
            run = time_networked(write_job(folder, data, certs, f"psi-{k}"), env)
            assert run["shared_rows"] == len(shared)
            networked.append(run)
            print(
                f"repeat {k}: networked alignment {run['wall_seconds']:.2f} s "
                f"(job {run['job_seconds']:.2f} s), in-process PSI {inprocess[-1]:.2f} s, "
                f"{run['shared_rows']} shared rows"
            )
    wall = statistics.median(r["wall_seconds"] for r in networked)
    ref = statistics.median(inprocess)
    payload = {
        "benchmark": "an aligned job's PSI alignment job over the runtime against in-process PSI",
        "rows_per_party": args.rows,
        "overlap": args.overlap,
        "repeats": args.repeats,
        "shared_rows": networked[0]["shared_rows"],
        "message_bytes_in_process": nbytes,
        "networked": networked,
        "in_process_seconds": inprocess,
        "networked_median_seconds": wall,
        "in_process_median_seconds": ref,
        "ratio_networked_over_in_process": wall / ref,
        "target_seconds": TARGET_SECONDS,
        "target_met": wall <= TARGET_SECONDS,
        "machine": machine_info(),
        "load_average_1m_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(
        f"median: networked {wall:.2f} s (target {TARGET_SECONDS:g} s), in process "
        f"{ref:.2f} s ({wall / ref:.1f}x); wrote {out}"
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
