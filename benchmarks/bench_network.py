"""Per-round overhead of the networked runtime over the in-process one, a9a split 40 | 43 | 40.

Run ``python benchmarks/bench_network.py --help``; see ``benchmarks/README.md``. Both sides run
the very same party roles (:class:`dpfed.protocols.vertical.host.VerticalHost`, built from the
same job file): in-process over the FIFO transport, networked as three ``dpfed party``
processes and a leader over gRPC with mutual TLS on loopback, with checkpoints, the exactly-
once links and per-round evaluation. The difference per round is what the runtime costs.
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

HERE = Path(__file__).resolve().parent
PARTIES = (("label", (0, 40)), ("bank", (40, 83)), ("shop", (83, 123)))


def free_ports(n: int) -> list[int]:
    """``n`` loopback ports free a moment ago (bound to port 0, then closed)."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def write_job(
    folder: Path, data_dir: Path, *, job_id: str, iterations: int, evaluate: str, certs: Path
) -> Path:
    """A 3-party a9a job file in ``folder`` (fresh ports)."""
    ports = free_ports(4)
    lines = [
        "[job]",
        f'id = "{job_id}"',
        'protocol = "vertical"',
        f'evaluate = "{evaluate}"',
        "round_timeout = 120.0",
        "grace = 10.0",
        "idle_timeout = 300.0",
        "",
        "[params]",
        f"iterations = {iterations}",
        "adaptive_rho = false",
        "",
        "[tls]",
        f'ca = "{certs / "ca.pem"}"',
        "",
        "[leader]",
        f'address = "127.0.0.1:{ports[0]}"',
        f'certificate = "{certs / "leader.pem"}"',
        f'key = "{certs / "leader.key"}"',
    ]
    for (name, (first, end)), port in zip(PARTIES, ports[1:], strict=True):
        lines += [
            "",
            "[[party]]",
            f'name = "{name}"',
            f'address = "127.0.0.1:{port}"',
            'data = "a9a"',
            f'data_dir = "{data_dir}"',
            f"columns = [{first}, {end}]",
            f'certificate = "{certs / (name + ".pem")}"',
            f'key = "{certs / (name + ".key")}"',
        ]
    path = folder / f"{job_id}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


class _Collector:
    name = "leader"

    def __init__(self) -> None:
        self.reports = []

    def handle(self, message):
        self.reports.append(message)
        return []


def time_inprocess(config: Path) -> float:
    """Seconds of all rounds with the job's roles on the in-process engine."""
    from dpfed.engines import InProcessEngine
    from dpfed.protocols.vertical.host import VerticalHost
    from dpfed.runtime.jobfile import load_job

    spec = load_job(config)
    hosts = {name: VerticalHost(spec, name) for name in spec.names}
    collector = _Collector()
    started = time.perf_counter()
    InProcessEngine().run({**hosts, "leader": collector}, hosts[spec.names[0]].start())
    seconds = time.perf_counter() - started
    assert len(collector.reports) == spec.params["iterations"]
    return seconds


def time_networked(config: Path, out: Path, env: dict) -> float:
    """Seconds from the leader's begin to the last round report, three party processes."""
    from dpfed.runtime.jobfile import load_job
    from dpfed.runtime.leader import Leader

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
        result = Leader(spec, progress=False).run(out)
    finally:
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    return float(result["history"][-1]["seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("DPFED_DATA"))
    parser.add_argument("--out", default=str(HERE / "results" / "network.json"))
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per process")
    args = parser.parse_args(argv)
    if not args.data_dir:
        parser.error("--data-dir (or DPFED_DATA) must name a folder holding a9a/a9a")
    data_dir = Path(args.data_dir).resolve()
    threads = str(args.threads)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = threads
    env = dict(os.environ)

    from bench_vertical import machine_info
    from dpfed.runtime.certs import init_certificates

    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        certs = folder / "certs"
        init_certificates(certs, [name for name, _ in PARTIES])
        for evaluate in ("full", "none"):
            inproc, network = [], []
            for k in range(args.repeats):
                job_id = f"bench-{evaluate}-{k}"
                config = write_job(
                    folder,
                    data_dir,
                    job_id=job_id,
                    iterations=args.iterations,
                    evaluate=evaluate,
                    certs=certs,
                )
                inproc.append(time_inprocess(config))
                network.append(time_networked(config, folder / f"{job_id}.json", env))
            t = args.iterations
            per_in = statistics.median(inproc) / t
            per_net = statistics.median(network) / t
            runs[evaluate] = {
                "inprocess_seconds": inproc,
                "networked_seconds": network,
                "inprocess_ms_per_round": 1e3 * per_in,
                "networked_ms_per_round": 1e3 * per_net,
                "overhead_ms_per_round": 1e3 * (per_net - per_in),
                "ratio": per_net / per_in,
            }
            print(
                f"evaluate={evaluate}: in-process {1e3 * per_in:.1f} ms/round, networked "
                f"{1e3 * per_net:.1f} ms/round, overhead {1e3 * (per_net - per_in):+.1f} ms "
                f"(ratio {per_net / per_in:.2f})"
            )
    payload = {
        "benchmark": "networked runtime vs in-process, a9a 40|43|40, mechanism none",
        "n_samples": 32561,
        "iterations": args.iterations,
        "repeats": args.repeats,
        "target_overhead_ms_per_round": 10.0,
        "runs": runs,
        "machine": machine_info(args.threads),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
