"""A networked vertical job on one machine: three party processes and a leader.

What the walkthrough of ``docs/networked.md`` does in four terminals: ``dpfed certs init``, a
job file putting three parties on columns of scikit-learn's breast cancer data (``label``
holds the labels; ``bank`` and ``shop`` have privacy budgets) on free loopback ports, one
``dpfed party`` process per party, and ``dpfed run`` leading the job with the ``sound``
mechanism. It prints the result's figures and each party's ledger (``dpfed budget show``), and
stops every process it started, whatever happens. Needs the ``net`` extra (``dpfed[net]``)::

    python examples/networked_job.py                # in a temporary folder
    python examples/networked_job.py --keep bc-job  # keep certs/, the job file, result.json,
                                                    # logs/ and work/ (the ledgers)
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

DPFED = [sys.executable, "-m", "dpfed.cli"]  # the `dpfed` command of this Python
PARTIES = {"label": (0, 10), "bank": (10, 20), "shop": (20, 30)}  # breast_cancer columns
BUDGETED = ("bank", "shop")  # the parties whose rows the sound mechanism protects


def free_ports(n: int, first: int = 18050) -> list[int]:
    """``n`` loopback ports from ``first`` up that nothing listens on (below the ephemeral
    range, as docs/networked.md advises)."""
    ports: list[int] = []
    for port in range(first, first + 1000):
        with socket.socket() as s:
            try:  # a port in use (listening, or bound by anything) is skipped
                s.bind(("127.0.0.1", port))
                ports.append(port)
            except OSError:
                pass
        if len(ports) == n:
            return ports
    raise RuntimeError(f"fewer than {n} free ports from {first}")


def make_certificates(folder: Path) -> None:
    """``dpfed certs init``: a CA and certificates for the leader and every party."""
    done = subprocess.run(
        [*DPFED, "certs", "init", "--out", str(folder / "certs"), "--parties", ",".join(PARTIES)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"error: dpfed certs init: {done.stderr.strip()}")


JOB = """\
[job]
id = "{job_id}"
protocol = "vertical"
round_timeout = 60.0
grace = 10.0
evaluate = "test"

[params]
{iterations}mechanism = "sound"
epsilon = {epsilon}
delta = 1e-5

[tls]
ca = "certs/ca.pem"

[leader]
address = "127.0.0.1:{port}"
certificate = "certs/leader.pem"
key = "certs/leader.key"
"""
PARTY = """
[[party]]
name = "{name}"
address = "127.0.0.1:{port}"
data = "breast_cancer"
columns = [{first}, {end}]
certificate = "certs/{name}.pem"
key = "certs/{name}.key"
{budget}"""


def write_job(
    folder: Path,
    job_id: str,
    *,
    epsilon: float,
    budget: float,
    iterations: int | None = 10,
    first_port: int = 18050,
) -> Path:
    """Write ``folder/<job_id>.toml``: the walkthrough's job file on free ports (no
    ``iterations``: the sound mechanism's public rule picks the rounds)."""
    leader, *ports = free_ports(1 + len(PARTIES), first_port)
    # rounds above the sound mechanism's public rule must be asked for by name
    rounds = "" if iterations is None else f"iterations = {iterations}\nrounds_above_rule = true\n"
    text = JOB.format(job_id=job_id, iterations=rounds, epsilon=epsilon, port=leader)
    for (name, (first, end)), port in zip(PARTIES.items(), ports, strict=True):
        limit = f"budget = {{ epsilon = {budget}, delta = 1e-5 }}\n" if name in BUDGETED else ""
        text += PARTY.format(name=name, port=port, first=first, end=end, budget=limit)
    config = folder / f"{job_id}.toml"
    config.write_text(text)
    return config


def with_parties(
    config: Path, parties, command: list[str], *, timeout: float = 120.0, log_prefix: str = ""
) -> subprocess.CompletedProcess:
    """Start one ``dpfed party`` per party of ``parties``, run the leader's ``command`` (the
    arguments after ``dpfed``) in the job file's folder, and stop the parties (each exits by
    itself when the job or prediction ends; any still running is killed). Each party's output
    goes to ``logs/<log_prefix><name>.log``."""
    folder = config.parent
    (folder / "logs").mkdir(exist_ok=True)
    procs: list[subprocess.Popen] = []
    finished = False
    try:
        for name in parties:
            with (folder / "logs" / f"{log_prefix}{name}.log").open("ab") as log:
                procs.append(
                    subprocess.Popen(
                        [*DPFED, "party", "--config", config.name, "--name", name],
                        cwd=folder,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        done = subprocess.run(
            [*DPFED, *command], cwd=folder, capture_output=True, text=True, timeout=timeout
        )
        finished = True
        return done
    finally:  # on any error (a timeout, Ctrl-C) the parties are stopped at once
        for proc in procs:
            try:
                proc.wait(timeout=15 if finished else 0.1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_job(config: Path, out: Path, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """The walkthrough's parties and ``dpfed run`` on ``config`` (:func:`with_parties`)."""
    return with_parties(
        config,
        PARTIES,
        ["run", "--config", config.name, "--out", str(out)],
        timeout=timeout,
        log_prefix=f"{config.stem}-",
    )


def ledger_path(folder: Path, name: str) -> Path:
    """Party ``name``'s ledger: the default ``work/<name>/ledger.sqlite`` of the job file."""
    return folder / "work" / name / "ledger.sqlite"


def show_ledgers(folder: Path) -> None:
    """Print ``dpfed budget show`` of every party that has a ledger."""
    for name in PARTIES:
        path = ledger_path(folder, name)
        print(f"\n$ dpfed budget show --ledger {path.relative_to(folder)}")
        if not path.exists():
            print(f"(no ledger: {name}'s rows are not protected, so it releases nothing noisy)")
            continue
        shown = subprocess.run(
            [*DPFED, "budget", "show", "--ledger", str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        print(shown.stdout.rstrip())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keep", type=Path, metavar="DIR", help="run in DIR and keep it")
    p.add_argument("--epsilon", type=float, default=1.0, help="the job's epsilon (delta 1e-5)")
    p.add_argument("--budget", type=float, default=4.0, help="bank's and shop's budget")
    p.add_argument("--iterations", type=int, default=10, help="ADMM rounds")
    p.add_argument("--port", type=int, default=18050, help="first port to try")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up when killed too

    with tempfile.TemporaryDirectory(prefix="dpfed-job-") as tmp:
        folder = (args.keep or Path(tmp)).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        make_certificates(folder)
        config = write_job(
            folder,
            "bc-sound",
            epsilon=args.epsilon,
            budget=args.budget,
            iterations=args.iterations,
            first_port=args.port,
        )
        print(f"job file {config} (certificates in {folder / 'certs'})")
        done = run_job(config, folder / "result.json")
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            for log in sorted((folder / "logs").glob("*.log")):  # the parties' output
                print(f"--- {log.name}\n{log.read_text()}", file=sys.stderr)
            sys.exit(f"error: dpfed run exited with status {done.returncode}")
        print(done.stdout.rstrip())  # the leader's summary: rounds, test figures, privacy
        privacy = json.loads((folder / "result.json").read_text())["privacy"]
        for name, figures in privacy["per_party"].items():
            print(f"  {name}: epsilon {figures['epsilon']:.4g} ({figures['releases']} releases)")
        show_ledgers(folder)
        if args.keep:
            print(f"\nkept {folder}")


if __name__ == "__main__":
    main()
