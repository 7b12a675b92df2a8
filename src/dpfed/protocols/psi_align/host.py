"""The alignment job as the networked runtime hosts it (:mod:`dpfed.runtime.alignment`).

Each party reads its own table (and test table) through its schema, keeps its PSI key (and
the label holder its order key) in its folder of the alignment job, takes its role
(:mod:`dpfed.protocols.psi_align.roles`) and, once aligned, writes what it agreed to its
folder of the aligned job (``alignment.json``, owner-only): its own IDs in the agreed order,
every party's width and the digests. Its account to the leader holds the number of shared
rows and their digest only: no party's table size, no ID.

**What each party learns** (semi-honest parties): the label holder, which of its IDs each
other party holds, and each party's table size; every other party, which of its own IDs are
shared by all (it trains on them) and the label holder's table size. The leader learns how
many rows are shared and their digest. Membership in the intersection is not covered by any
epsilon (docs/tables.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfed._io import write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.data.psi import alignment_digest, new_psi_key, order_key
from dpfed.data.tables import load_schema, read_table
from dpfed.parameters import job_parameters, param
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.base import BaseProtocol
from dpfed.protocols.psi_align.messages import ALIGNMENT_MESSAGES
from dpfed.protocols.psi_align.roles import AlignmentHolder, AlignmentSeeker, column_hashes
from dpfed.runtime.alignment import ALIGNMENT_PROTOCOL, alignment_file, parent_job_id
from dpfed.runtime.hosting import RoleDelegate
from dpfed.runtime.jobspec import JobSpec, PartySpec
from dpfed.runtime.messages import Message
from dpfed.runtime.private_files import load_or_create_secret, private_folder
from dpfed.runtime.registry import JobRecord


def _parts(spec: JobSpec) -> tuple[str, ...]:
    return ("train", "test") if spec.parties[0].test else ("train",)


class AlignmentHost(RoleDelegate):
    """One party of an alignment job."""

    holds_data = False  # no ledger: membership is not a DP release (module docstring)
    exact_release = False
    ledger_support = True
    ledger_refusal = ""

    def __init__(self, spec: JobSpec, name: str) -> None:
        self.spec, self.name = spec, name
        self.index = spec.names.index(name)
        self.plan = []  # no release: nothing to reserve
        party = spec.party(name)
        if party.schema is None or not party.id_column:
            raise DpfedInputError(f"party {name!r} of an aligned job needs id_column and schema.")
        schema = load_schema(str(party.schema))
        if (schema.label is not None) != (self.index == 0):
            raise DpfedInputError(
                f"the label holder's schema names label and positive, and no other's: party "
                f"{name!r}'s {'does not' if self.index == 0 else 'does'}."
            )
        tables = {
            part: read_table(
                party.data if part == "train" else party.test,
                id_column=party.id_column,
                schema=schema,
                labels=self.index == 0,
            )
            for part in _parts(spec)
        }
        ids = {part: list(t.ids) for part, t in tables.items()}
        width = int(tables["train"].X.shape[1])
        declared = [c.name for c in schema.columns] + (
            [schema.label] if schema.label is not None else []
        )
        columns = column_hashes(parent_job_id(spec), declared)
        folder = party.workdir / spec.id
        psi_key = load_or_create_secret(folder, "psi.key", new_psi_key)
        self.role: AlignmentSeeker | AlignmentHolder
        if self.index == 0:
            self.role = AlignmentSeeker(
                name,
                spec.names[1:],
                ids,
                width=width,
                columns=columns,
                psi_key=psi_key,
                order_key=load_or_create_secret(folder, "order.key", order_key),
                min_rows=int(spec.params["min_rows"]),
            )
        else:
            self.role = AlignmentHolder(
                name, spec.names[0], ids, width=width, columns=columns, psi_key=psi_key
            )

    @property
    def events(self) -> list[PrivacyEvent]:
        return []

    def handle(self, message: Message) -> list[Message]:
        out = self.role.handle(message)
        if self.role.finished:
            self._write()
        return out

    def _write(self) -> None:
        """What it agreed, to its folder of the aligned job (the same bytes on a replay)."""
        role = self.role
        if role.refusal:
            return
        job = parent_job_id(self.spec)
        path = alignment_file(self.spec, self.name, job)
        private_folder(path.parent)
        write_json_atomic(
            path,
            {
                "job": job,
                "digest": self.spec.digest,
                "widths": role.widths,
                "parts": {
                    part: {"ids": order, "digest": alignment_digest(order)}
                    for part, order in role.orders.items()
                },
            },
        )

    def model(self) -> np.ndarray:
        return np.zeros(0)

    def describe(self) -> dict[str, Any]:
        return {"n_samples": 0}  # its table's size stays with it

    def final(self) -> dict[str, Any]:
        role = self.role
        if role.refusal:
            return {"n_samples": 0, "refusal": role.refusal}
        return {
            "n_samples": 0,
            "parts": {
                part: {"rows": len(order), "digest": alignment_digest(order)}
                for part, order in role.orders.items()
            },
        }

    def losses(self, models: list[list[float]]) -> list[float]:
        raise DpfedInputError("an alignment job trains no model.")


@dataclass(frozen=True)
class AlignmentParams:
    """``[params]`` of an alignment job, derived from its aligned job
    (:func:`dpfed.runtime.alignment.alignment_spec`)."""

    job: str | None = param(help="the aligned job the alignment serves")
    min_rows: int = param(1, help="the fewest shared training rows accepted")


class AlignmentProtocol(BaseProtocol):
    """Private set intersection of every party's IDs with the label holder's, before an
    aligned vertical job."""

    name = ALIGNMENT_PROTOCOL
    params = job_parameters(AlignmentParams)
    holds = "columns"
    dataless_role = None
    same_rows = False
    messages = ALIGNMENT_MESSAGES
    report = None

    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        missing = [p.name for p in parties if p.schema is None or not p.id_column]
        if missing or len(parties) < 2:
            raise DpfedInputError(
                f"an alignment needs two or more parties with id_column and schema. Found "
                f"{missing or len(parties)}."
            )

    def private(self, params: Mapping[str, Any]) -> bool:
        return False

    def host(self, spec: JobSpec, name: str) -> AlignmentHost:
        return AlignmentHost(spec, name)

    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        """The shared rows' count and digest per part, checked equal at every party; refused
        with the label holder's reason if it refused."""
        accounts = record.accounts
        refusal = accounts[spec.names[0]].get("refusal")
        if refusal:
            raise DpfedInputError(f"the alignment was refused: {refusal}.")
        parts = {n: a.get("parts") for n, a in accounts.items()}
        if len({repr(p) for p in parts.values()}) != 1:
            raise DpfedInputError(f"the parties agreed on different rows: {parts}.")
        return {
            "protocol": ALIGNMENT_PROTOCOL,
            "job": parent_job_id(spec),
            "align": "psi",
            "parties": spec.names,
            "how": "private set intersection of each party's IDs with the label holder's "
            "(ECDH-PSI, OpenMined's library), rows in an HMAC order",
            "parts": parts[spec.names[0]],
            "seconds": record.seconds,
        }


#: The alignment job, as registered in :data:`dpfed.runtime.registry.PROTOCOL_REGISTRY`.
PROTOCOL = AlignmentProtocol()
