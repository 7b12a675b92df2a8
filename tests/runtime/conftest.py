"""Networked jobs for the tests: certificates, job files and real processes on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

DPFED = [sys.executable, "-m", "dpfed.cli"]
#: A party's own permission to send exact values although it has a budget.
ALLOW_EXACT = "--allow-exact-disclosure"


def allowing_exact(names) -> dict[str, list[str]]:
    """``party_args`` that give every party of ``names`` its own ``--allow-exact-disclosure``
    (budgeted parties of a job with ``evaluate = "full"``)."""
    return {name: [ALLOW_EXACT] for name in names}


#: The role a party without data (span None) takes, by protocol.
DATALESS_ROLES = {"consensus": "server", "secure_sum": "compute"}


def _port_slice() -> range:
    """This test process's own ports: a slice of those below the kernel's ephemeral range.

    A port found free by binding and closing it could be taken before the party binds it. The
    ports handed out here cannot be: outgoing connections (the leader's and every gRPC
    client's) take their local ports from the ephemeral range only, and each pytest-xdist
    worker draws from its own slice, so no other test process hands out the same port.
    """
    try:
        first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768  # Linux's default
    low, high = 20000, max(first_ephemeral, 20000 + 1000)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    size = (high - low) // max(workers, 1)
    return range(low + worker * size, low + (worker + 1) * size)


_PORTS = _port_slice()
_next_port = [_PORTS.start + os.getpid() % len(_PORTS)]


def free_ports(n: int) -> list[int]:
    """``n`` ports no other test process hands out and nothing listens on now (the next ones
    of this process's slice, :func:`_port_slice`, in turn)."""
    ports: list[int] = []
    for _ in range(len(_PORTS)):
        if len(ports) == n:
            break
        port = _next_port[0]
        _next_port[0] = port + 1 if port + 1 < _PORTS.stop else _PORTS.start
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # another program listens there
        ports.append(port)
    assert len(ports) == n, f"no {n} free ports in {_PORTS}"
    return ports


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def interruptible() -> None:
    """Call before starting a ``dpfed`` process: SIGINT then reaches it as a terminal gives it.

    A child inherits an ignored or a blocked SIGINT across ``exec``, and a handled one is reset
    to the default there. Libraries loaded in a long test session can leave this process's
    SIGINT ignored or blocked, so it is handled (Python's default handler) and unblocked here,
    in the parent. Not in a ``preexec_fn``: that makes ``subprocess`` use ``fork()`` instead of
    ``vfork()``, gRPC's fork handlers then restart its poller in the child, and the child
    aborts on the epoll descriptor ``close_fds`` closed before it can exec (grpc/grpc#43055;
    seen as a party never reached and a leader killed by SIGABRT in full runs).
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class NetJob:
    """A job folder (certificates, job file, work folders) and its processes."""

    def __init__(
        self,
        folder: Path,
        certs: Path,
        parties,
        *,
        job_id: str,
        params: dict,
        job: dict | None = None,
        budgets: dict | None = None,
        shared: Path | None = None,
        protocol: str = "vertical",
        party_args: dict | None = None,
    ) -> None:
        """``parties``: ``(name, data, span)`` tuples; the span is a column range for a
        vertical job and a row range otherwise, and None marks a consensus server or a
        secure-sum compute node. ``party_args``: extra ``dpfed party`` arguments by party
        name (e.g. its own ``--allow-exact-disclosure``)."""
        self.folder = folder
        self.party_args = {name: list(args) for name, args in (party_args or {}).items()}
        self.job_id = job_id
        self.names = [name for name, _, _ in parties]
        self.procs: dict[str, subprocess.Popen] = {}
        folder.mkdir(parents=True, exist_ok=True)
        ports = free_ports(len(parties) + 1)
        lines = ["[job]", f'id = "{job_id}"', f'protocol = "{protocol}"']
        holds = "columns" if protocol == "vertical" else "rows"
        settings = {"round_timeout": 30.0, "grace": 2.0, "idle_timeout": 120.0} | (job or {})
        lines += [f"{k} = {_toml_value(v)}" for k, v in settings.items()]
        lines += ["", "[params]"] + [f"{k} = {_toml_value(v)}" for k, v in params.items()]
        lines += [
            "",
            "[tls]",
            f'ca = "{certs / "ca.pem"}"',
            "",
            "[leader]",
            f'address = "127.0.0.1:{ports[0]}"',
            f'certificate = "{certs / "leader.pem"}"',
            f'key = "{certs / "leader.key"}"',
        ]
        work = shared or folder
        for (name, data, span), port in zip(parties, ports[1:], strict=True):
            lines += [
                "",
                "[[party]]",
                f'name = "{name}"',
                f'address = "127.0.0.1:{port}"',
                f'data = "{data}"',
                f'certificate = "{certs / (name + ".pem")}"',
                f'key = "{certs / (name + ".key")}"',
                f'ledger = "{work / "ledgers" / (name + ".sqlite")}"',
            ]
            if span is None:
                lines.append(f'role = "{DATALESS_ROLES.get(protocol, "server")}"')
            else:
                lines += [
                    f"{holds} = {_toml_value(list(span))}",
                    f'dataset = "{data}:{span[0]}-{span[1]}"',
                ]
            if budgets and name in budgets:
                lines.append(f"budget = {_toml_value(budgets[name])}")
        self.config = folder / "job.toml"
        self.config.write_text("\n".join(lines) + "\n")
        self.out = folder / "result.json"

    def env(self) -> dict:
        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        return env

    def start_party(self, name: str, *extra: str) -> subprocess.Popen:
        """Start party ``name`` with its ``party_args`` and ``extra`` arguments."""
        log = open(self.folder / f"{name}.log", "ab")
        interruptible()
        proc = subprocess.Popen(
            [
                *DPFED,
                "party",
                "--config",
                str(self.config),
                "--name",
                name,
                *self.party_args.get(name, []),
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env(),
        )
        self.procs[name] = proc
        return proc

    def start_parties(self) -> None:
        for name in self.names:
            self.start_party(name)

    def run_args(self, *extra: str) -> list[str]:
        return [*DPFED, "run", "--config", str(self.config), "--out", str(self.out), *extra]

    def run(self, *extra: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.run_args(*extra),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(),
        )

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()

    def wait_parties(self, timeout: float = 30.0) -> dict[str, int]:
        codes = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                codes[name] = None
        return codes

    def workdir(self, name: str) -> Path:
        """Party ``name``'s job folder (its secret, journal, snapshot and model)."""
        return self.folder / "work" / name / self.job_id

    def secret_rngs(self, names=None) -> list:
        """The noise generators of the parties' own secrets (to reproduce a deployment run in
        one process)."""
        from dpfed.privacy.noise_source import secret_generator
        from dpfed.runtime.hosting import NOISE_SECRET_FILE

        return [
            secret_generator((self.workdir(n) / NOISE_SECRET_FILE).read_bytes())
            for n in (names or self.names)
        ]

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(scope="session")
def job_certs(tmp_path_factory) -> Path:
    """One CA with the leader, the usual party names and an outsider, for every test."""
    from dpfed.runtime.certs import init_certificates

    folder = tmp_path_factory.mktemp("certs")
    init_certificates(
        folder,
        [
            "label",
            "bank",
            "shop",
            "mallory",
            "server",
            *(f"node{k}" for k in range(6)),
            *(f"compute{k}" for k in range(3)),
            *(f"client{k}" for k in range(20)),
        ],
    )
    return folder


@pytest.fixture(scope="session")
def foreign_certs(tmp_path_factory) -> Path:
    """Another CA issuing the same names."""
    from dpfed.runtime.certs import init_certificates

    folder = tmp_path_factory.mktemp("foreign")
    init_certificates(folder, ["label", "bank", "shop"])
    return folder


@pytest.fixture
def netjob(tmp_path, job_certs):
    """Factory of :class:`NetJob` in this test's folder; stops every process at the end."""
    jobs: list[NetJob] = []

    def make(
        parties,
        *,
        job_id="job",
        params=None,
        job=None,
        budgets=None,
        sub="",
        shared=None,
        protocol="vertical",
        party_args=None,
    ) -> NetJob:
        j = NetJob(
            tmp_path / sub if sub else tmp_path,
            job_certs,
            parties,
            job_id=job_id,
            params=params or {},
            job=job,
            budgets=budgets,
            shared=shared,
            protocol=protocol,
            party_args=party_args,
        )
        jobs.append(j)
        return j

    yield make
    for j in jobs:
        j.stop_all()
