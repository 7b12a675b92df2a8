"""The TOML job file of a networked job: the protocol, its parameters, and every party.

Example (a 3-party vertical job; paths are relative to the job file's folder)::

    [job]
    id = "a9a-demo"            # names the job in ledgers and checkpoints
    protocol = "vertical"
    round_timeout = 60.0       # seconds one round may take
    grace = 10.0               # seconds a disconnected party has to come back
    evaluate = "test"          # full | test | none; default full without a privacy mechanism,
                               # test with one (see dpfed.protocols.vertical.evaluation)
    # simulation = true        # allows [params].seed: every party's noise from one seed that
                               # every party holds, so NO privacy between the parties
    # prediction_recipients = ["label"]   # who may receive `dpfed predict`'s scores
                               # (default: the label holder; "leader" allowed if listed)
    # predict_training_rows = true   # EXACT scores of training rows: lets `dpfed predict`
                               # score rows a party recognises as its training rows (refused
                               # by default; a party with a budget also needs its own
                               # `dpfed party --allow-exact-disclosure`)

    [params]                   # the options of `dpfed train vertical`
    iterations = 20            # above the sound mechanism's public rule: refused unless
    rounds_above_rule = true   # this is set (leave iterations out to use the rule)
    mechanism = "sound"
    epsilon = 1.0
    delta = 1e-5

    [tls]
    ca = "certs/ca.pem"

    [leader]
    address = "127.0.0.1:50050"
    certificate = "certs/leader.pem"
    key = "certs/leader.key"

    [[party]]                  # the first party holds the labels
    name = "label"
    address = "127.0.0.1:50051"
    data = "a9a"               # a named data set (under data_dir or $DPFED_DATA) or a LIBSVM file
    columns = [0, 40]          # the half-open column range this party holds
    certificate = "certs/label.pem"
    key = "certs/label.key"
    workdir = "work/label"     # checkpoints and the party's model
    budget = { epsilon = 4.0, delta = 1e-5 }   # first use of the ledger sets the budget

Every party reads the same file (or a copy whose shared parts agree: the leader and each party
compare :attr:`JobSpec.digest`, which covers the job, the parameters and every party's name,
address and columns, but not the local paths).

Noise
-----
Every process reads the job file, so nothing in it may determine a party's noise. Each party
draws its noise from a secret of its own (:mod:`dpfed.privacy.noise_source`), created in its
work folder when it first serves the job. ``[params].seed`` is refused unless the job declares
``[job].simulation = true``: then every party's noise comes from that seed, the run equals the
in-process run with the same seed bit for bit, any party can subtract any other party's noise,
and the result says that the run has no privacy. A party with a privacy budget refuses a
simulation.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.runtime.jobspec import LEADER, Budget, Endpoint, JobSpec, PartySpec, describe
from dpfed.runtime.registry import FederatedProtocol, get_protocol

EVALUATE = ("full", "test", "none")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def _table(doc: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise DpfedInputError(f"{where} needs a [{key}] table. Found {value!r}.")
    return value


def _text(table: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value:
        raise DpfedInputError(f"{where}.{key} must be a non-empty string. Found {value!r}.")
    return value


def _name(value: str, where: str) -> str:
    if not _NAME.match(value) or set(value) == {"."}:
        raise DpfedInputError(
            f"{where} must be 1-64 letters, digits, '_', '.' or '-', not only dots (it names "
            f"folders). Found {value!r}."
        )
    return value


def check_job_id(value: object) -> str:
    """``value`` if it is a valid ``[job].id`` (it names a folder in every work folder)."""
    if not isinstance(value, str):
        raise DpfedInputError(f"a job id is a string. Found {value!r}.")
    return _name(value, "[job].id")


def _address(value: str, where: str) -> str:
    match = _ADDRESS.match(value)
    if not match or not 0 < int(match.group(2)) < 65536:
        raise DpfedInputError(f"{where} must be host:port. Found {value!r}.")
    return value


def _number(table: dict[str, Any], key: str, where: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DpfedInputError(f"{where}.{key} must be a number. Found {value!r}.")
    return check_positive(f"{where}.{key}", value)


def _listen(table: dict[str, Any], where: str) -> str:
    """The optional local listening address (e.g. ``0.0.0.0:18052`` behind a NAT)."""
    if "listen" not in table:
        return ""
    return _address(_text(table, "listen", where), f"{where}.listen")


def _path(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _reject_unknown(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise DpfedInputError(
            f"{where} has unknown keys {unknown}. Expected some of {sorted(allowed)}."
        )


def _params(table: Any, protocol: FederatedProtocol) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise DpfedInputError(f"[params] must be a table. Found {table!r}.")
    allowed = protocol.params
    _reject_unknown(table, set(allowed), "[params]")
    return {key: allowed[key].read(value, f"[params].{key}") for key, value in table.items()}


def _budget(value: Any, where: str) -> Budget | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"epsilon", "delta"}:
        raise DpfedInputError(f"{where} must be {{ epsilon = ..., delta = ... }}. Found {value!r}.")
    if not isinstance(value["delta"], float):
        raise DpfedInputError(f"{where}.delta must be a number. Found {value['delta']!r}.")
    return Budget(
        _number(value, "epsilon", where, 0.0), check_open_unit(f"{where}.delta", value["delta"])
    )


_PARTY_KEYS = {
    "name",
    "address",
    "listen",
    "certificate",
    "key",
    "data",
    "data_dir",
    "columns",
    "rows",
    "role",
    "workdir",
    "ledger",
    "dataset",
    "budget",
    "test",
    "id_column",
    "schema",
}

#: The keys of a party's own table, which ``[job].align`` needs (and nothing else takes).
_TABLE_KEYS = ("test", "id_column", "schema")

#: How the rows of the parties' own tables are aligned (``[job].align``).
ALIGNMENTS = ("psi",)


def _span(table: dict[str, Any], key: str, where: str) -> tuple[int, int]:
    span = table.get(key)
    if (
        not isinstance(span, list)
        or len(span) != 2
        or not all(isinstance(c, int) and not isinstance(c, bool) for c in span)
        or not 0 <= span[0] < span[1]
    ):
        raise DpfedInputError(
            f"{where}.{key} must be [first, end) with 0 <= first < end. Found {span!r}."
        )
    return span[0], span[1]


def _party_endpoint(table: dict[str, Any], name: str, where: str, base: Path) -> dict[str, Any]:
    """A party's name, address, listen address, certificate and key."""
    return {
        "name": name,
        "address": _address(_text(table, "address", where), f"{where}.address"),
        "listen": _listen(table, where),
        "certificate": _path(base, _text(table, "certificate", where)),
        "key": _path(base, _text(table, "key", where)),
    }


def _party(
    table: dict[str, Any], index: int, base: Path, protocol: FederatedProtocol, align: str = ""
) -> PartySpec:
    where = f"[[party]] #{index + 1}"
    if not isinstance(table, dict):
        raise DpfedInputError(f"{where} must be a table. Found {table!r}.")
    _reject_unknown(table, _PARTY_KEYS, where)
    if align:
        return _table_party(table, where, base, protocol)
    given = [k for k in _TABLE_KEYS if k in table]
    if given:
        raise DpfedInputError(
            f"{where}: {given} describe a party's own table, which needs [job].align = "
            f'"psi" (rows aligned by their IDs). Found no align.'
        )
    name = _name(_text(table, "name", where), f"{where}.name")
    where = f"party {name!r}"
    if name == LEADER:
        raise DpfedInputError(f"{where}: the name {LEADER!r} is reserved for the job's leader.")
    role = table.get("role", "")
    if role not in ("", protocol.dataless_role):
        allowed = (
            f'"{protocol.dataless_role}"'
            if protocol.dataless_role
            else "absent (every party holds data)"
        )
        raise DpfedInputError(
            f"{where}.role may only be {allowed} in a {protocol.name} job. Found {role!r}."
        )
    holds = None if role else protocol.holds
    other = ({"columns", "rows"} - {holds}) & set(table)
    if other:
        raise DpfedInputError(
            f"{where}: a {protocol.name} {role or 'party'} has no {sorted(other)[0]}."
        )
    span = _span(table, holds, where) if holds else None
    data = _text(table, "data", where, default="none" if role == "compute" else None)
    workdir = _path(base, _text(table, "workdir", where, default=f"work/{name}"))
    ledger = _path(base, table["ledger"]) if "ledger" in table else workdir / "ledger.sqlite"
    data_dir = _path(base, _text(table, "data_dir", where)) if "data_dir" in table else None
    default_dataset = data if span is None else f"{data}[{span[0]}:{span[1]}]"
    if holds == "rows" and span is not None:
        default_dataset = f"{data}[rows {span[0]}:{span[1]}]"
    return PartySpec(
        **_party_endpoint(table, name, where, base),
        data=data,
        data_dir=data_dir,
        columns=span if holds == "columns" else None,
        rows=span if holds == "rows" else None,
        role=role,
        workdir=workdir,
        ledger=ledger,
        dataset=_text(table, "dataset", where, default=default_dataset),
        budget=_budget(table.get("budget"), f"{where}.budget"),
    )


_JOB_KEYS = {
    "id",
    "protocol",
    "round_timeout",
    "grace",
    "idle_timeout",
    "max_message_mb",
    "evaluate",
    "checkpoint",
    "fsync",
    "simulation",
    "prediction_recipients",
    "predict_training_rows",
    "align",
    "min_rows",
}


def _table_party(
    table: dict[str, Any], where: str, base: Path, protocol: FederatedProtocol
) -> PartySpec:
    """A party of an aligned job: its own CSV table (``data``, optional ``test``), keyed by
    ``id_column``, read through ``schema``; the paths relative to its ``data_dir``."""
    name = _name(_text(table, "name", where), f"{where}.name")
    where = f"party {name!r}"
    if protocol.holds != "columns":
        raise DpfedInputError(
            f"[job].align aligns the rows of parties that hold columns of the same customers "
            f"(a vertical job). Found protocol {protocol.name!r}, whose parties hold "
            f"{protocol.holds}."
        )
    for key in ("columns", "rows", "role"):
        if key in table:
            raise DpfedInputError(
                f"{where}: an aligned party has no {key} (its table's columns come from its "
                "schema, its rows from the alignment)."
            )
    workdir = _path(base, _text(table, "workdir", where, default=f"work/{name}"))
    data_dir = _path(base, _text(table, "data_dir", where)) if "data_dir" in table else None
    folder = data_dir if data_dir is not None else base
    data = str(_path(folder, _text(table, "data", where)))
    return PartySpec(
        **_party_endpoint(table, name, where, base),
        data=data,
        data_dir=data_dir,
        workdir=workdir,
        ledger=_path(base, table["ledger"]) if "ledger" in table else workdir / "ledger.sqlite",
        dataset=_text(table, "dataset", where, default=Path(data).name),
        budget=_budget(table.get("budget"), f"{where}.budget"),
        test=str(_path(folder, _text(table, "test", where))) if "test" in table else "",
        id_column=_text(table, "id_column", where),
        schema=_path(folder, _text(table, "schema", where)),
    )


#: What a simulation's result and every party's log say about it.
SIMULATION_WARNING = (
    "no privacy: noise is shared. [job].simulation = true: every party's noise comes from "
    "[params].seed, which every party holds, so any party can regenerate and subtract the "
    "others' noise; the epsilon figures are those a deployment (no seed: each party draws its "
    "noise from its own secret) would have."
)


def _simulation(job: dict[str, Any], params: dict[str, Any]) -> bool:
    """``[job].simulation``, checked against ``[params].seed``."""
    simulation = job.get("simulation", False)
    if not isinstance(simulation, bool):
        raise DpfedInputError(f"[job].simulation must be true or false. Found {simulation!r}.")
    if "seed" in params and not simulation:
        raise DpfedInputError(
            f"[params].seed = {params['seed']!r} would let every party, which all hold this job "
            "file, regenerate and subtract the others' noise. Leave it out (each party then "
            "draws its noise from its own secret), or declare a run without privacy with "
            "[job].simulation = true."
        )
    if simulation and "seed" not in params:
        raise DpfedInputError(
            "[job].simulation = true needs [params].seed, the seed every party's noise is "
            "drawn from. Found none."
        )
    return simulation


def load_job(path: str | Path) -> JobSpec:
    """Read and validate a job file.

    Raises
    ------
    DpfedInputError
        If the file is missing or not TOML, or any value is invalid; the message names the
        key, the value found and what was expected.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DpfedInputError(f"job file {str(path)!r} does not exist.") from None
    except UnicodeDecodeError as exc:
        raise DpfedInputError(f"job file {str(path)!r} is not valid TOML: {exc}") from None
    return parse_job(text, path)


def parse_job(text: str, path: str | Path) -> JobSpec:
    """Validate a job file's ``text`` as if it were read from ``path`` (relative paths in it
    resolve against ``path``'s folder): what a party service does with the job file a leader
    presents.

    Raises
    ------
    DpfedInputError
        As :func:`load_job`.
    """
    path = Path(path)
    doc = _document(text, path)
    base = path.resolve().parent
    job = _table(doc, "job", str(path))
    _reject_unknown(job, _JOB_KEYS, "[job]")
    job_id = _name(_text(job, "id", "[job]"), "[job].id")
    protocol, params = _protocol_and_params(job, doc)
    evaluate, simulation, fsync = _job_switches(job, protocol, params)
    tls = _table(doc, "tls", str(path))
    _reject_unknown(tls, {"ca"}, "[tls]")
    leader = _leader(doc, path, base)
    parties, align, min_rows = _parties(doc, job, base, protocol, leader)
    recipients, predict_training_rows = _prediction_options(job, [p.name for p in parties])
    max_mb = _number(job, "max_message_mb", "[job]", 64)
    spec = JobSpec(
        path=path,
        id=job_id,
        protocol=protocol.name,
        params=params,
        ca=_path(base, _text(tls, "ca", "[tls]")),
        leader=leader,
        parties=parties,
        round_timeout=_number(job, "round_timeout", "[job]", 60.0),
        grace=_number(job, "grace", "[job]", 10.0),
        idle_timeout=_number(job, "idle_timeout", "[job]", 3600.0),
        max_message_bytes=check_int(
            "[job].max_message_mb bytes", int(max_mb * 2**20), minimum=1024
        ),
        evaluate=evaluate,
        checkpoint=_path(base, _text(job, "checkpoint", "[job]", default=f"checkpoint/{job_id}")),
        fsync=fsync,
        simulation=simulation,
        prediction_recipients=recipients,
        predict_training_rows=predict_training_rows,
        align=align,
        min_rows=min_rows,
        text=text,
    )
    protocol.check_job(spec)
    return spec


def _document(text: str, path: Path) -> dict[str, Any]:
    """The job file's TOML document, with only the known top-level tables."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DpfedInputError(f"job file {str(path)!r} is not valid TOML: {exc}") from None
    _reject_unknown(doc, {"job", "params", "tls", "leader", "party"}, str(path))
    return doc


def _protocol_and_params(
    job: dict[str, Any], doc: dict[str, Any]
) -> tuple[FederatedProtocol, dict[str, Any]]:
    """``[job].protocol`` (or the variant ``[params]`` selects) and its ``[params]``."""
    protocol = get_protocol(_text(job, "protocol", "[job]"))
    raw_params = doc.get("params", {})
    if isinstance(raw_params, dict) and protocol.variant(raw_params):
        protocol = get_protocol(str(protocol.variant(raw_params)))
    return protocol, _params(raw_params, protocol)


def _job_switches(
    job: dict[str, Any], protocol: FederatedProtocol, params: dict[str, Any]
) -> tuple[str, bool, bool]:
    """``[job].evaluate``, ``[job].simulation`` and ``[job].fsync``."""
    # exact training scores are a diagnostic: on by default only when nothing is private
    default_evaluate = "test" if protocol.private(params) else "full"
    evaluate = _text(job, "evaluate", "[job]", default=default_evaluate)
    if evaluate not in EVALUATE:
        raise DpfedInputError(f"[job].evaluate must be one of {EVALUATE}. Found {evaluate!r}.")
    simulation = _simulation(job, params)
    fsync = job.get("fsync", False)
    if not isinstance(fsync, bool):
        raise DpfedInputError(f"[job].fsync must be true or false. Found {fsync!r}.")
    return evaluate, simulation, fsync


def _leader(doc: dict[str, Any], path: Path, base: Path) -> Endpoint:
    """The ``[leader]`` table's endpoint."""
    leader_table = _table(doc, "leader", str(path))
    _reject_unknown(leader_table, {"address", "listen", "certificate", "key"}, "[leader]")
    return Endpoint(
        LEADER,
        _address(_text(leader_table, "address", "[leader]"), "[leader].address"),
        _path(base, _text(leader_table, "certificate", "[leader]")),
        _path(base, _text(leader_table, "key", "[leader]")),
        _listen(leader_table, "[leader]"),
    )


def _parties(
    doc: dict[str, Any],
    job: dict[str, Any],
    base: Path,
    protocol: FederatedProtocol,
    leader: Endpoint,
) -> tuple[tuple[PartySpec, ...], str, int]:
    """The ``[[party]]`` tables' parties (distinct names and addresses, the leader's
    included), ``[job].align`` and ``[job].min_rows``."""
    tables = doc.get("party")
    if not isinstance(tables, list) or len(tables) < 2:
        raise DpfedInputError(f"a job needs at least two [[party]] tables. Found {tables!r}.")
    align = job.get("align", "")
    if "align" in job and align not in ALIGNMENTS:
        raise DpfedInputError(f"[job].align must be one of {ALIGNMENTS}. Found {align!r}.")
    min_rows = job.get("min_rows", 1)
    if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < 1:
        raise DpfedInputError(f"[job].min_rows must be an integer >= 1. Found {min_rows!r}.")
    parties = tuple(_party(t, k, base, protocol, align) for k, t in enumerate(tables))
    protocol.check_parties(parties)
    names = [p.name for p in parties]
    if len(set(names)) != len(names):
        raise DpfedInputError(f"party names must be distinct. Found {names}.")
    addresses = [leader.address, *(p.address for p in parties)]
    if len(set(addresses)) != len(addresses):
        raise DpfedInputError(f"every process needs its own address. Found {addresses}.")
    return parties, align, min_rows


def _prediction_options(job: dict[str, Any], names: list[str]) -> tuple[tuple[str, ...], bool]:
    """``[job].prediction_recipients`` (without repeats) and ``[job].predict_training_rows``."""
    recipients = job.get("prediction_recipients", [names[0]])
    if not (
        isinstance(recipients, list)
        and recipients
        and all(r in (*names, LEADER) for r in recipients)
    ):
        raise DpfedInputError(
            f"[job].prediction_recipients must list who may receive a prediction's scores, "
            f"each a party ({', '.join(names)}) or {LEADER!r}. Found {recipients!r}."
        )
    predict_training_rows = job.get("predict_training_rows", False)
    if not isinstance(predict_training_rows, bool):
        raise DpfedInputError(
            "[job].predict_training_rows must be true or false (whether `dpfed predict` may "
            f"score the parties' training rows exactly). Found {predict_training_rows!r}."
        )
    return tuple(dict.fromkeys(recipients)), predict_training_rows


__all__ = [
    "ALIGNMENTS",
    "EVALUATE",
    "LEADER",
    "SIMULATION_WARNING",
    "Budget",
    "Endpoint",
    "JobSpec",
    "PartySpec",
    "check_job_id",
    "describe",
    "load_job",
    "parse_job",
]
