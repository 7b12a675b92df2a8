"""An aligned job's alignment job: derived from the job file, and what a party kept."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from dpfed._validation import DpfedInputError
from dpfed.runtime.alignment import (
    ALIGNMENT_PROTOCOL,
    alignment_file,
    alignment_job_id,
    alignment_result_path,
    alignment_spec,
    own_table_path,
    parent_job_id,
    read_alignment,
)
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.prediction import Predictor


def _job(tmp_path, *, align: bool = True):
    lines = [
        "[job]",
        'id = "tables"',
        'protocol = "vertical"',
        'align = "psi"\nmin_rows = 5' if align else "",
        "[params]",
        'mechanism = "none"',
        "[tls]",
        'ca = "ca.pem"',
        "[leader]",
        'address = "127.0.0.1:1"',
        'certificate = "l.pem"',
        'key = "l.key"',
    ]
    for k, name in enumerate(("label", "bank")):
        lines += [
            "[[party]]",
            f'name = "{name}"',
            f'address = "127.0.0.1:{k + 2}"',
            f'certificate = "{name}.pem"',
            f'key = "{name}.key"',
        ]
        lines += (
            [f'data = "{name}.csv"', 'id_column = "id"', f'schema = "{name}.toml"']
            if align
            else ['data = "breast_cancer"', f"columns = [{5 * k}, {5 * k + 5}]"]
        )
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return load_job(path)


def test_the_alignment_job_is_the_same_parties_under_its_own_id_protocol_and_folder(tmp_path):
    spec = _job(tmp_path)
    aligning = alignment_spec(spec)
    assert aligning.id == alignment_job_id("tables") == "tables.psi"
    assert aligning.protocol == ALIGNMENT_PROTOCOL
    assert aligning.params == {"job": "tables", "min_rows": 5}
    assert parent_job_id(aligning) == "tables"
    assert aligning.parties == spec.parties and aligning.leader == spec.leader
    assert aligning.checkpoint == spec.checkpoint / "alignment"
    assert aligning.digest != spec.digest  # two jobs, two digests
    assert alignment_result_path(spec).parent == aligning.checkpoint
    with pytest.raises(DpfedInputError, match="not aligned"):
        alignment_spec(_job(tmp_path, align=False))


def test_a_party_without_its_alignment_or_with_another_jobs_is_refused(tmp_path):
    spec = _job(tmp_path)
    with pytest.raises(DpfedInputError, match=r"runs the alignment job tables\.psi first"):
        read_alignment(spec, "bank")
    path = alignment_file(spec, "bank")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"job": "tables", "digest": "another", "parts": {}}))
    with pytest.raises(DpfedInputError, match="written for another job file"):
        read_alignment(spec, "bank")
    path.write_text(
        json.dumps(
            {"job": "tables", "digest": alignment_spec(spec).digest, "widths": [3, 2], "parts": {}}
        )
    )
    assert read_alignment(spec, "bank")["widths"] == [3, 2]


def test_a_party_reads_its_own_rows_in_its_data_folder_only(tmp_path):
    spec = _job(tmp_path)
    (tmp_path / "new.csv").write_text("id\n")
    assert own_table_path(spec, "bank", "new.csv") == (tmp_path / "new.csv").resolve()
    with pytest.raises(DpfedInputError, match="lies outside it"):
        own_table_path(spec, "bank", "../elsewhere.csv")
    with pytest.raises(DpfedInputError, match=r"has no file 'none\.csv'"):
        own_table_path(spec, "bank", "none.csv")


def test_scores_by_id_go_to_a_party_never_to_the_leader(tmp_path):
    spec = replace(_job(tmp_path), prediction_recipients=("label", "leader"))
    with pytest.raises(DpfedInputError, match="the leader cannot receive scores by ID"):
        Predictor(spec, recipient="leader")
