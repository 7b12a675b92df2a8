"""A parsed job file: the job, its parties and their endpoints (:mod:`dpfed.runtime.jobfile`
reads and validates the TOML file into these)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpfed._validation import DpfedInputError

#: The name of a job's leader (reserved: no party may take it).
LEADER = "leader"


@dataclass(frozen=True)
class Budget:
    """A party's privacy budget on one data set."""

    epsilon: float
    delta: float


@dataclass(frozen=True)
class Endpoint:
    """Where a process listens and which certificate and key it presents."""

    name: str
    address: str
    certificate: Path
    key: Path
    listen: str = ""

    @property
    def bind(self) -> str:
        """The address to listen on (``listen``, or else ``address``)."""
        return self.listen or self.address


@dataclass(frozen=True)
class PartySpec(Endpoint):
    """One party: its endpoint, its data and where it keeps its state."""

    data: str = ""
    data_dir: Path | None = None
    columns: tuple[int, int] | None = None
    rows: tuple[int, int] | None = None
    role: str = ""
    workdir: Path = Path(".")
    ledger: Path = Path("ledger.sqlite")
    dataset: str = ""
    budget: Budget | None = None
    #: An aligned job's party (``[job].align``): its test table, ID column and schema file.
    test: str = ""
    id_column: str = ""
    schema: Path | None = None

    @property
    def n_features(self) -> int:
        if self.columns is None:
            raise DpfedInputError(f"party {self.name!r} holds rows, not a column range.")
        return self.columns[1] - self.columns[0]


@dataclass(frozen=True)
class JobSpec:
    """A parsed, validated job file."""

    path: Path
    id: str
    protocol: str
    params: dict[str, Any]
    ca: Path
    leader: Endpoint
    parties: tuple[PartySpec, ...]
    round_timeout: float = 60.0
    grace: float = 10.0
    idle_timeout: float = 3600.0
    max_message_bytes: int = 64 * 2**20
    evaluate: str = "full"
    checkpoint: Path = Path("checkpoint")
    fsync: bool = False
    simulation: bool = False
    prediction_recipients: tuple[str, ...] = ()
    #: Whether ``dpfed predict`` may score rows a party recognises as its training rows
    #: (their exact scores, which training released only with noise).
    predict_training_rows: bool = False
    #: How the parties' own tables are aligned by ID (``"psi"``), or ``""`` for column ranges
    #: of one data set; and the fewest aligned rows a job accepts.
    align: str = ""
    min_rows: int = 1
    #: The job file's text as read (what a leader presents to a party service); not part of
    #: the digest, which covers the shared settings only.
    text: str = field(default="", repr=False, compare=False)

    @property
    def names(self) -> list[str]:
        """Party names in file order (the label holder first)."""
        return [p.name for p in self.parties]

    def party(self, name: str) -> PartySpec:
        for p in self.parties:
            if p.name == name:
                return p
        raise DpfedInputError(f"party must be one of {self.names}. Found {name!r}.")

    @property
    def allowed_recipients(self) -> tuple[str, ...]:
        """Who may receive the scores of a prediction with the trained model:
        ``[job].prediction_recipients``, by default the label holder (the first party) alone."""
        return self.prediction_recipients or (self.names[0],)

    def endpoint(self, name: str) -> Endpoint:
        return self.leader if name == LEADER else self.party(name)

    def _shared(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "protocol": self.protocol,
            "params": self.params,
            "evaluate": self.evaluate,
            "simulation": self.simulation,
            "prediction_recipients": list(self.allowed_recipients),
            # only when set, so that the digests of job files without the key stay the same
            **({"predict_training_rows": True} if self.predict_training_rows else {}),
            **({"align": self.align, "min_rows": self.min_rows} if self.align else {}),
            "max_message_bytes": self.max_message_bytes,
            "leader": self.leader.address,
            "parties": [
                [p.name, p.address, p.role, _shown(p.columns), _shown(p.rows)] for p in self.parties
            ],
        }

    @property
    def digest(self) -> str:
        """SHA-256 of what every process of the job must agree on (no local paths)."""
        return _sha256(self._shared())

    def key_digests(self) -> dict[str, str]:
        """One SHA-256 per key of :attr:`digest`'s content (``params.<name>`` per parameter,
        ``parties.<name>`` per party, ``parties`` for their order), so that two processes
        whose files differ can name where without showing each other the values."""
        shared = self._shared()
        keys = {k: _sha256(v) for k, v in shared.items() if k not in ("params", "parties")}
        keys |= {f"params.{k}": _sha256(v) for k, v in self.params.items()}
        keys |= {f"parties.{row[0]}": _sha256(row) for row in shared["parties"]}
        keys["parties"] = _sha256([p.name for p in self.parties])
        return keys


def differing_keys(ours: dict[str, str], theirs: dict[str, str]) -> list[str]:
    """The keys of two :meth:`JobSpec.key_digests` that differ or exist on one side only."""
    return sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))


def _sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _shown(span: tuple[int, int] | None) -> list[int] | None:
    return None if span is None else list(span)


def describe(spec: JobSpec) -> dict[str, Any]:
    """A JSON-able view of the job (for logs and results)."""
    return {
        "id": spec.id,
        "protocol": spec.protocol,
        "digest": spec.digest,
        "parties": [
            {
                "name": p.name,
                "address": p.address,
                "role": p.role or None,
                "columns": _shown(p.columns),
                "rows": _shown(p.rows),
            }
            for p in spec.parties
        ],
        "params": dict(spec.params),
        "round_timeout": spec.round_timeout,
        "grace": spec.grace,
        "simulation": spec.simulation,
    }


__all__ = ["LEADER", "Budget", "Endpoint", "JobSpec", "PartySpec", "describe", "differing_keys"]
