"""A party as a long-running service: ``dpfed party --config party.toml``.

One process per organisation serves any number of jobs and predictions, one after another or
at once, until SIGTERM. Its own file, ``party.toml``, holds its identity and policy; the job
file comes from the leader, with the first request of each job (:class:`~dpfed.runtime.
control.OpenJob`, :class:`~dpfed.runtime.control.OpenPrediction`), and is checked exactly as a
party started for that one job checks its own copy (digest, version, message kinds, budget,
closed job ids, exact disclosure), by the same :class:`~dpfed.runtime.party.PartyNode`. What
the leader's file cannot decide is the service's: its certificate, key and CA, its work
folder and ledger, where its data lives (``data_dir``; a file path outside it is refused),
its budget and its policy. ::

    name = "bank"
    address = "bank.example:50051"     # what job files must name for this party
    certificate = "certs/bank.pem"
    key = "certs/bank.key"
    ca = "certs/ca.pem"
    workdir = "work/bank"              # journals, noise secrets, the ledger
    data_dir = "data/bank"             # optional (paths relative to party.toml)
    budget = { epsilon = 3.0, delta = 1e-5 }   # optional: one budget for all its jobs,
    # or one per data set: budget = { a9a = { epsilon = 3.0, delta = 1e-5 }, ... }
    allow_exact_disclosure = false     # optional policy
    protocols = ["vertical"]           # optional policy: the protocols it takes part in
    recipients = ["label"]             # optional policy: who may receive its prediction shares

Every job's state stays in ``workdir/<job id>/`` (the presented job file is kept there as
``job.toml``), so a restarted service continues a stopped job when the leader resumes it and
serves predictions with a finished job's model. On SIGTERM the service stops taking requests,
lets each job's links hand over what is queued, and closes its journals and ledger: a job
in progress is continued by ``dpfed run --resume`` once the service is back.
"""

from __future__ import annotations

import logging
import signal
import threading
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc

from dpfed._validation import DpfedInputError
from dpfed.runtime import wire
from dpfed.runtime.alignment import alignment_job_id, alignment_spec
from dpfed.runtime.certs import load_identity
from dpfed.runtime.control import OpenJob, OpenPrediction, PredictRequest
from dpfed.runtime.jobfile import check_job_id, parse_job
from dpfed.runtime.jobspec import Budget, JobSpec, PartySpec
from dpfed.runtime.links import received_frames
from dpfed.runtime.logs import process_logger
from dpfed.runtime.party import PartyNode
from dpfed.runtime.private_files import private_file, private_folder
from dpfed.runtime.registry import protocol_names
from dpfed.runtime.transport import Refused, connection_limit, serve

__all__ = ["PartyConfig", "PartyService", "is_party_config", "load_party_config"]

#: Keys of ``party.toml``.
PARTY_KEYS = frozenset(
    {
        "name",
        "address",
        "listen",
        "certificate",
        "key",
        "ca",
        "workdir",
        "data_dir",
        "budget",
        "allow_exact_disclosure",
        "protocols",
        "recipients",
        "max_message_mb",
    }
)

#: The data-set label of a service's ledger: one budget for every job it serves.
SERVICE_DATASET = "all jobs of this service"


def _log(name: str, text: str, level: int = logging.INFO) -> None:
    process_logger(__name__, name).log(level, text)


@dataclass(frozen=True)
class PartyConfig:
    """A party service's own settings (``party.toml``; the module docstring)."""

    path: Path
    name: str
    address: str
    certificate: Path
    key: Path
    ca: Path
    workdir: Path
    listen: str = ""
    data_dir: Path | None = None
    budget: Budget | dict[str, Budget] | None = None
    allow_exact_disclosure: bool = False
    protocols: tuple[str, ...] = ()
    recipients: tuple[str, ...] = ()
    max_message_bytes: int = 64 * 2**20

    @property
    def bind(self) -> str:
        """The address to listen on (``listen``, or else ``address``)."""
        return self.listen or self.address

    @property
    def ledger(self) -> Path:
        return self.workdir / "ledger.sqlite"


def is_party_config(path: str | Path) -> bool:
    """Whether ``path`` is a party service's file rather than a job file (it has no ``[job]``
    table)."""
    try:
        return "job" not in tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def _text(doc: dict[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise DpfedInputError(f"{where}: {key} must be a non-empty string. Found {value!r}.")
    return value


def _budget(table: Any, where: str) -> Budget:
    if not (isinstance(table, dict) and set(table) == {"epsilon", "delta"}):
        raise DpfedInputError(
            f"{where} must be a table {{ epsilon = E, delta = D }}, or one such table per data "
            f"set. Found {table!r}."
        )
    eps, dlt = table["epsilon"], table["delta"]
    if not (
        isinstance(eps, int | float) and eps > 0 and isinstance(dlt, int | float) and 0 <= dlt < 1
    ):
        raise DpfedInputError(f"{where} needs epsilon > 0 and delta in [0, 1). Found {table!r}.")
    return Budget(float(eps), float(dlt))


def load_party_config(path: str | Path) -> PartyConfig:
    """Read and check ``party.toml``.

    Raises
    ------
    DpfedInputError
        Naming the key, the value found and what was expected.
    """
    path = Path(path)
    where = str(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise DpfedInputError(f"party file {where!r} does not exist.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DpfedInputError(f"party file {where!r} is not valid TOML: {exc}") from None
    unknown = sorted(set(doc) - PARTY_KEYS)
    if unknown:
        raise DpfedInputError(
            f"{where} has unknown keys {unknown}. Expected some of {sorted(PARTY_KEYS)}."
        )
    base = path.resolve().parent

    def local(value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else base / p

    budget: Budget | dict[str, Budget] | None = None
    if "budget" in doc:
        table = doc["budget"]
        if isinstance(table, dict) and table and all(isinstance(v, dict) for v in table.values()):
            budget = {str(data): _budget(v, f"{where}: budget.{data}") for data, v in table.items()}
        else:
            budget = _budget(table, f"{where}: budget")
    allow = doc.get("allow_exact_disclosure", False)
    if not isinstance(allow, bool):
        raise DpfedInputError(
            f"{where}: allow_exact_disclosure must be true or false. Found {allow!r}."
        )
    protocols = doc.get("protocols", [])
    known = protocol_names()
    if not (isinstance(protocols, list) and all(p in known for p in protocols)):
        raise DpfedInputError(f"{where}: protocols must list some of {known}. Found {protocols!r}.")
    recipients = doc.get("recipients", [])
    if not (isinstance(recipients, list) and all(isinstance(r, str) and r for r in recipients)):
        raise DpfedInputError(
            f'{where}: recipients must list party names (or "leader"). Found {recipients!r}.'
        )
    max_mb = doc.get("max_message_mb", 64)
    if not (isinstance(max_mb, int | float) and max_mb > 0):
        raise DpfedInputError(f"{where}: max_message_mb must be a number > 0. Found {max_mb!r}.")
    return PartyConfig(
        path=path,
        name=_text(doc, "name", where),
        address=_text(doc, "address", where),
        certificate=local(_text(doc, "certificate", where)),
        key=local(_text(doc, "key", where)),
        ca=local(_text(doc, "ca", where)),
        workdir=local(_text(doc, "workdir", where)),
        listen=str(doc.get("listen", "")),
        data_dir=local(_text(doc, "data_dir", where)) if "data_dir" in doc else None,
        budget=budget,
        allow_exact_disclosure=allow,
        protocols=tuple(protocols),
        recipients=tuple(recipients),
        max_message_bytes=int(max_mb * 2**20),
    )


def _is_path(data: str) -> bool:
    return "/" in data or Path(data).suffix in (".npy", ".csv", ".txt", ".svm", ".libsvm")


class PartyService:
    """Serve the jobs and predictions the leaders present, until :meth:`stop` (SIGTERM).

    Parameters
    ----------
    config : PartyConfig
    """

    def __init__(self, config: PartyConfig) -> None:
        self.config = config
        self.identity = load_identity(config.certificate, config.key, config.ca)
        if self.identity.name != config.name:
            raise DpfedInputError(
                f"the certificate {str(config.certificate)!r} is issued to "
                f"{self.identity.name!r}, not to party {config.name!r}."
            )
        private_folder(config.workdir)
        self.nodes: dict[str, PartyNode] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.served = 0

    # -- the jobs ---------------------------------------------------------------------------
    def job_spec(self, job_id: str, text: str) -> JobSpec:
        """The presented job file, with this party's own settings in place of the leader's.

        Raises
        ------
        DpfedInputError
            If the file names another id, does not name this party at this service's address,
            asks for a protocol the service's policy excludes, or points this party's data
            outside ``data_dir``.
        """
        cfg = self.config
        folder = cfg.workdir / job_id
        spec = parse_job(text, folder / "job.toml")
        aligning = bool(spec.align) and job_id == alignment_job_id(spec.id)
        if spec.id != job_id and not aligning:
            raise DpfedInputError(f"the presented job file is job {spec.id!r}, not {job_id!r}.")
        if cfg.protocols and spec.protocol not in cfg.protocols:
            raise DpfedInputError(
                f"{cfg.name} takes part in {list(cfg.protocols)} jobs only (its own policy). "
                f"Found protocol {spec.protocol!r}."
            )
        party = spec.party(cfg.name)
        if party.address != cfg.address:
            raise DpfedInputError(
                f"job {spec.id} names {cfg.name} at {party.address}; this service serves "
                f"{cfg.name} at {cfg.address}."
            )
        data, budget_key = party.data, party.data
        if spec.align:
            party, budget_key = self._own_tables(spec, party, text)
            data = party.data
        elif data and _is_path(data):
            if cfg.data_dir is None:
                raise DpfedInputError(
                    f"job {spec.id} reads {cfg.name}'s data from the file {data!r}; this service "
                    "has no data_dir to read files from."
                )
            root = cfg.data_dir.resolve()
            target = (root / data).resolve() if not Path(data).is_absolute() else Path(data)
            if root not in target.resolve().parents:
                raise DpfedInputError(
                    f"job {spec.id} reads {cfg.name}'s data from {data!r}, outside this "
                    f"service's data_dir {str(root)!r}."
                )
            data = str(target)
        budget, dataset = self._budget_for(spec, budget_key)
        ours = replace(
            party,
            certificate=cfg.certificate,
            key=cfg.key,
            listen=cfg.listen,
            workdir=cfg.workdir,
            ledger=cfg.ledger,
            data=data,
            data_dir=cfg.data_dir,  # never the leader's folder: None reads the default places
            budget=budget,
            dataset=dataset,
        )
        parties = tuple(ours if p.name == cfg.name else p for p in spec.parties)
        ours_spec = replace(spec, ca=cfg.ca, parties=parties)
        return alignment_spec(ours_spec) if aligning else ours_spec

    def _own_tables(self, spec: JobSpec, party: PartySpec, text: str) -> tuple[PartySpec, str]:
        """An aligned job's party: its table, test table and schema as the presented job file
        names them, read in this service's ``data_dir`` (never outside it); and the name its
        budget is kept under (the table as the job file names it)."""
        cfg = self.config
        if cfg.data_dir is None:
            raise DpfedInputError(
                f"job {spec.id} reads {cfg.name}'s own tables; this service has no data_dir "
                "to read them from."
            )
        table = next(t for t in tomllib.loads(text).get("party", []) if t.get("name") == cfg.name)
        root = cfg.data_dir.resolve()

        def inside(key: str) -> Path:
            value = str(table[key])
            target = (root / value).resolve()
            if root not in target.parents:
                raise DpfedInputError(
                    f"job {spec.id} names {cfg.name}'s {key} {value!r}, outside this "
                    f"service's data_dir {str(root)!r}."
                )
            return target

        own = replace(
            party,
            data=str(inside("data")),
            test=str(inside("test")) if "test" in table else "",
            schema=inside("schema"),
        )
        return own, str(table["data"])

    def _budget_for(self, spec: JobSpec, data: str) -> tuple[Budget | None, str]:
        """The budget and ledger label of a job reading ``data``: the service's one budget
        (label :data:`SERVICE_DATASET`), or the budget of that data set when ``budget`` is a
        table per data set (label: the data set as the job names it, whatever columns or rows
        it takes, so no span opens a fresh budget)."""
        budget = self.config.budget
        if not isinstance(budget, dict):
            return budget, SERVICE_DATASET
        if data not in budget:
            raise DpfedInputError(
                f"job {spec.id} reads {self.config.name}'s data {data!r}; this service holds "
                f"budgets for {sorted(budget)} only."
            )
        return budget[data], data

    def _node(self, job_id: str, request: Any) -> PartyNode:
        """The node of ``job_id``, built from the presented job file (or the copy kept from an
        earlier request) when there is none."""
        with self.lock:
            node = self.nodes.get(job_id)
            if node is not None:
                return node
            if self.stopping.is_set():
                raise Refused(grpc.StatusCode.UNAVAILABLE, f"{self.config.name} is stopping")
            kept = self.config.workdir / job_id / "job.toml"
            text = (
                getattr(request, "text", "")
                if isinstance(request, OpenJob | OpenPrediction)
                else ""
            )
            if not text and kept.exists():
                text = kept.read_text()
            if not text:
                raise Refused(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"{self.config.name} serves no job {job_id!r}: open it first (the leader "
                    "presents the job file with its first request)",
                )
            try:
                spec = self.job_spec(job_id, text)
                node = PartyNode(
                    spec,
                    self.config.name,
                    allow_exact_disclosure=self.config.allow_exact_disclosure,
                )
            except (DpfedInputError, OSError) as exc:
                raise Refused(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None
            private_file(kept).write_text(text)  # after PartyNode made the folder owner-only
            self.nodes[job_id] = node
            self.served += 1
            node.start()
            return node

    # -- requests ---------------------------------------------------------------------------
    def _job_of(self, payload: bytes | memoryview) -> str:
        try:
            job = wire.peek_header(payload, max_bytes=self.config.max_message_bytes)["job"]
        except wire.WireError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        try:
            return check_job_id(job)
        except DpfedInputError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None

    def _control(self, payload: bytes, peer: str) -> bytes:
        job = self._job_of(payload)
        if self.config.recipients:
            self._check_recipient(payload)
        with self.lock:
            node = self.nodes.get(job)
        if node is None:
            try:
                request = wire.decode(payload, max_bytes=self.config.max_message_bytes).message
            except wire.WireError as exc:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
            if peer != "leader":
                raise Refused(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"only the leader may control a job. Found {peer!r}",
                )
            if not isinstance(request, OpenJob | OpenPrediction):
                kept = self.config.workdir / job / "job.toml"
                if not kept.exists():
                    return self._unknown(job, request)
            node = self._node(job, request)
        return node._control(payload, peer)

    def _check_recipient(self, payload: bytes) -> None:
        """The service's own policy on who may receive its prediction shares (on top of the
        job file's ``prediction_recipients``, which the leader writes)."""
        try:
            request = wire.decode(payload, max_bytes=self.config.max_message_bytes).message
        except wire.WireError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        if isinstance(request, PredictRequest) and request.to not in self.config.recipients:
            raise Refused(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{self.config.name} sends prediction shares to {list(self.config.recipients)} "
                f"only (its own policy). Found {request.to!r}.",
            )

    def _unknown(self, job: str, request: Any) -> bytes:
        """A request for a job this service never opened: an abort is a no-op, the rest is
        refused."""
        if type(request).__name__ == "AbortJob":
            return b"{}"
        raise Refused(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"{self.config.name} serves no job {job!r}: open it first",
        )

    def _deliver(self, payload: bytes, peer: str) -> bytes:
        # a call carries a batch of frames (or one frame), all from one job's link
        jobs = {
            self._job_of(frame)
            for frame in received_frames(payload, max_bytes=self.config.max_message_bytes)
        }
        if len(jobs) != 1:
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"a delivery must carry the frames of one job. Found {sorted(jobs)}",
            )
        (job,) = jobs
        with self.lock:
            node = self.nodes.get(job)
        if node is None:
            raise Refused(
                grpc.StatusCode.UNAVAILABLE, f"{self.config.name} has not opened job {job!r} yet"
            )
        return node._deliver(payload, peer)

    # -- lifecycle --------------------------------------------------------------------------
    def _reap(self) -> None:
        """Close the nodes whose job or prediction is over, or whose leader went silent."""
        with self.lock:
            over = [(j, n) for j, n in self.nodes.items() if n.done.is_set() or n.idle_expired()]
            for job, _ in over:
                del self.nodes[job]
        for job, node in over:
            node.close()
            _log(self.config.name, f"job {job}: {node.exit_message or 'done'}; still serving")

    def stop(self) -> None:
        """Stop serving (what SIGTERM does)."""
        self.stopping.set()

    def serve(self, *, install_signals: bool = True) -> int:
        """Serve until :meth:`stop`; returns 0."""
        server = serve(
            self.identity,
            self.config.bind,
            {"Deliver": self._deliver, "Control": self._control},
            max_bytes=self.config.max_message_bytes,
            max_connections=connection_limit(64),
            workers=16,
        )
        if install_signals:
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
        _log(
            self.config.name,
            f"serving party {self.config.name} on {self.config.address} "
            f"(a service: jobs come from the leaders; SIGTERM stops it)",
        )
        try:
            while not self.stopping.wait(0.2):
                self._reap()
        finally:
            server.stop(grace=1.0).wait()
            with self.lock:
                nodes = list(self.nodes.items())
                self.nodes.clear()
            for job, node in nodes:
                node.close()
                _log(
                    self.config.name,
                    f"job {job}: stopped with the service; its state is kept in {node.folder}",
                )
        _log(self.config.name, f"stopped after serving {self.served} job(s) and predictions")
        return 0
