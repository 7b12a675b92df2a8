"""Secure vertical learning over the networked runtime against the same job in one process.

Run ``python benchmarks/bench_secure_network.py --help``; see ``benchmarks/README.md``. The
networked side is ``dpfed run`` on a job file with ``[params] secure = true``: two (or, with
``--parties 3``, three) ``dpfed party`` processes (started by this script, their start
counted) and the leader over gRPC with
mutual TLS on loopback, every party and the labels protected, epsilon 1, the default rounds;
each party journals what it receives and keeps every ciphertext it sends. The reference,
measured in the same run, is :func:`dpfed.protocols.vertical_secure.train_secure_vertical`
with real CKKS ciphertexts in this process. Target (issue's): at most 5 minutes end to end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = {"a9a": (66, 57), "adult": (53, 52)}
#: The same columns with the passive block split in two (``--parties 3``).
THREE_PARTY_SPLITS = {"a9a": (66, 29, 28), "adult": (53, 26, 26)}
NAMES = ("label", "bank", "shop")


def split_of(name: str, parties: int) -> tuple[int, ...]:
    return SPLITS[name] if parties == 2 else THREE_PARTY_SPLITS[name]


TARGET_SECONDS = 300.0
DPFED = [sys.executable, "-m", "dpfed.cli"]


def write_job(folder: Path, certs: Path, name: str, data_dir: str | None, parties: int = 2) -> Path:
    from bench_network import free_ports

    split = split_of(name, parties)
    starts = [sum(split[:k]) for k in range(parties + 1)]
    ports = free_ports(parties + 1)
    lines = [
        "[job]",
        'id = "secure"',
        'protocol = "vertical"',
        "round_timeout = 600.0",
        "grace = 30.0",
        "idle_timeout = 900.0",
        "",
        "[params]",
        "secure = true",
        "epsilon = 1.0",
        "delta = 1e-5",
        "protect_label_holder = true",
        "",
        "[tls]",
        f'ca = "{certs / "ca.pem"}"',
        "",
        "[leader]",
        f'address = "127.0.0.1:{ports[0]}"',
        f'certificate = "{certs / "leader.pem"}"',
        f'key = "{certs / "leader.key"}"',
    ]
    for party, port, span in zip(
        NAMES[:parties], ports[1:], itertools.pairwise(starts), strict=True
    ):
        lines += [
            "",
            "[[party]]",
            f'name = "{party}"',
            f'address = "127.0.0.1:{port}"',
            f'certificate = "{certs / (party + ".pem")}"',
            f'key = "{certs / (party + ".key")}"',
            f'data = "{name}"',
            f"columns = [{span[0]}, {span[1]}]",
            f'workdir = "{folder / "work" / party}"',
            "budget = { epsilon = 2.0, delta = 1e-5 }",
        ]
        if data_dir:
            lines.append(f'data_dir = "{data_dir}"')
    path = folder / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def networked(name: str, data_dir: str | None, parties: int = 2) -> dict:
    """Certificates, job file, the parties and ``dpfed run``: wall seconds and the result."""
    from dpfed.runtime.certs import init_certificates

    with tempfile.TemporaryDirectory(prefix="dpfed-secure-bench-") as tmp:
        folder = Path(tmp)
        init_certificates(folder / "certs", list(NAMES[:parties]))
        config = write_job(folder, folder / "certs", name, data_dir, parties)
        env = dict(os.environ)
        start = time.perf_counter()
        parties = [
            subprocess.Popen(
                [*DPFED, "party", "--config", str(config), "--name", p],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            for p in NAMES[:parties]
        ]
        try:
            done = subprocess.run(
                [
                    *DPFED,
                    "run",
                    "--config",
                    str(config),
                    "--out",
                    str(folder / "result.json"),
                    "--quiet",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=1800,
            )
            seconds = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"dpfed run failed: {done.stderr}")
            for proc in parties:
                proc.wait(timeout=120)
        finally:
            for proc in parties:
                if proc.poll() is None:
                    proc.kill()
        result = json.loads((folder / "result.json").read_text())
        disk = sum(f.stat().st_size for f in (folder / "work").rglob("*") if f.is_file())
    return {
        "seconds_end_to_end": seconds,
        "bytes_per_round": result["costs"]["bytes_per_round"],
        "test_accuracy": result["final"].get("test_accuracy"),
        "test_log_loss": result["final"].get("test_log_loss"),
        "epsilon": result["privacy"]["epsilon"],
        "rounds": result["privacy"]["rounds"],
        "party_folders_bytes": disk,
    }


def in_process(name: str, data_dir: str | None, parties: int = 2) -> dict:
    from dpfed.data import load_dataset, vertical_split
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical

    ds = load_dataset(name, data_dir)
    split = split_of(name, parties)
    blocks = vertical_split(ds.X_train, list(split))
    setup = SecureSetup(blocks[0].shape[0], split, 1.0, 1e-5, protect="all")
    start = time.perf_counter()
    result = train_secure_vertical(blocks, ds.y_train, setup, seed=0, backend="ckks")
    return {
        "seconds_end_to_end": time.perf_counter() - start,
        "bytes_per_round": result.cost_summary()["bytes_per_round"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("DPFED_DATA"))
    p.add_argument("--data", nargs="+", default=["a9a"], choices=sorted(SPLITS))
    p.add_argument(
        "--parties",
        type=int,
        choices=(2, 3),
        default=2,
        help="2: label holder and one passive party; 3: the passive block split "
        "in two (the other count's runs in --out are kept)",
    )
    p.add_argument("--out", default=str(HERE / "results" / "secure_network.json"))
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    out = Path(args.out)
    kept = (
        [r for r in json.loads(out.read_text())["runs"] if r.get("parties", 2) != args.parties]
        if out.exists()
        else []
    )
    runs = []
    for name in args.data:
        net = networked(name, args.data_dir, args.parties)
        local = in_process(name, args.data_dir, args.parties)
        row = {
            "data": name,
            "parties": args.parties,
            "split": list(split_of(name, args.parties)),
            "networked": net,
            "in_process": local,
            "ratio": net["seconds_end_to_end"] / local["seconds_end_to_end"],
            "within_target": net["seconds_end_to_end"] <= TARGET_SECONDS,
        }
        print(json.dumps(row), flush=True)
        runs.append(row)
    payload = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "load_average": os.getloadavg(),
        "target_seconds": TARGET_SECONDS,
        "runs": kept + runs,
    }
    Path(args.out).write_text(json.dumps(payload, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
