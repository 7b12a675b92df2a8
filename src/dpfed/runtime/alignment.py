"""The alignment of an aligned job (``[job].align = "psi"``) as a job of its own.

Before a vertical job on the parties' own tables can open, its parties must agree on which
rows they share and in what order: the number of rows sets the job's rounds and noise, so it
must be known before any budget is reserved. The leader therefore runs the job's
**alignment job** first, a job of the registered protocol :data:`ALIGNMENT_PROTOCOL` derived
from the same job file (:func:`alignment_spec`, id ``<job id>.psi``), in which the label holder
runs private set intersection with every other party (:mod:`dpfed.protocols.psi_align`). Each
party writes what it agreed, in its own work folder of the job (:func:`alignment_file`): its
IDs in the agreed order and every party's width, never sent to the leader, which learns the
number of shared rows and their digest. The job itself then reads its rows in that order
(:func:`read_alignment`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.runtime.jobspec import JobSpec

__all__ = [
    "ALIGNMENT_FILE",
    "ALIGNMENT_PROTOCOL",
    "alignment_file",
    "alignment_job_id",
    "alignment_result_path",
    "alignment_spec",
    "own_table_path",
    "parent_job_id",
    "read_alignment",
]

#: The protocol of an alignment job (:mod:`dpfed.protocols.psi_align`).
ALIGNMENT_PROTOCOL = "psi_align"
#: What an alignment job's id adds to its job's.
_SUFFIX = ".psi"
#: The file, in a party's folder of the aligned job, that holds what it agreed.
ALIGNMENT_FILE = "alignment.json"


def alignment_job_id(job_id: str) -> str:
    """The id of job ``job_id``'s alignment job."""
    return job_id + _SUFFIX


def parent_job_id(spec: JobSpec) -> str:
    """The aligned job an alignment job ``spec`` serves."""
    return str(spec.params["job"])


def alignment_spec(spec: JobSpec) -> JobSpec:
    """Job ``spec``'s alignment job: the same parties, endpoints and settings, the protocol
    :data:`ALIGNMENT_PROTOCOL`, and as parameters the job it serves and ``[job].min_rows``.

    Raises
    ------
    DpfedInputError
        If ``spec`` is not an aligned job.
    """
    if spec.align != "psi":
        raise DpfedInputError(f'job {spec.id} is not aligned ([job].align is not "psi").')
    return replace(
        spec,
        id=alignment_job_id(spec.id),
        protocol=ALIGNMENT_PROTOCOL,
        params={"job": spec.id, "min_rows": spec.min_rows},
        evaluate="none",
        predict_training_rows=False,
        align="",
        checkpoint=spec.checkpoint / "alignment",
    )


def alignment_file(spec: JobSpec, name: str, job_id: str | None = None) -> Path:
    """Where party ``name`` keeps what it agreed for job ``job_id`` (default ``spec.id``):
    ``<workdir>/<job id>/alignment.json``."""
    return spec.party(name).workdir / (job_id or spec.id) / ALIGNMENT_FILE


def alignment_result_path(spec: JobSpec) -> Path:
    """Where the leader keeps the result of job ``spec``'s alignment job (counts and
    digests, no ID)."""
    return spec.checkpoint / "alignment" / "result.json"


def read_alignment(spec: JobSpec, name: str) -> dict[str, Any]:
    """What party ``name`` agreed in job ``spec``'s alignment job.

    Raises
    ------
    DpfedInputError
        If the party has not taken part in the alignment (``dpfed run`` runs it first), or the
        file is not one this version wrote.
    """
    path = alignment_file(spec, name)
    if not path.exists():
        raise DpfedInputError(
            f"{name} has no alignment for job {spec.id} ({path} is missing): `dpfed run` runs "
            f"the alignment job {alignment_job_id(spec.id)} first, and {name} must take part."
        )
    record = json.loads(path.read_text())
    if record.get("job") != spec.id or record.get("digest") != alignment_spec(spec).digest:
        raise DpfedInputError(
            f"{path} was written for another job file than job {spec.id}'s; remove the "
            f"alignment job's folder {alignment_job_id(spec.id)} and this file to align again."
        )
    return dict(record)


def own_table_path(spec: JobSpec, name: str, data: str) -> Path:
    """The file ``data`` (a path relative to party ``name``'s data folder: its ``data_dir``,
    else the job file's folder) that party ``name`` reads, e.g. the rows of a prediction by ID.

    Raises
    ------
    DpfedInputError
        If ``data`` names a file outside that folder (a leader cannot make a party read other
        files), or no file.
    """
    party = spec.party(name)
    root = (party.data_dir if party.data_dir is not None else spec.path.parent).resolve()
    target = (root / data).resolve()
    if root not in target.parents:
        raise DpfedInputError(
            f"{name} reads its own tables in its data folder {str(root)!r}; {data!r} lies "
            "outside it."
        )
    if not target.is_file():
        raise DpfedInputError(f"{name} has no file {data!r} in its data folder {str(root)!r}.")
    return target
