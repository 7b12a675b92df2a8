"""An aligned vertical job over the network: the parties' own tables, aligned by private set
intersection in an alignment job the leader runs first, then trained on the agreed rows."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from dpfed.cli.main import main
from dpfed.data.tables import load_schema, read_table
from dpfed.runtime.jobfile import load_job

from .test_networked_prediction import _predict

PARTIES = ("label", "bank", "shop")


def aligned_job(netjob, tmp_path, *, params: str, extra_job: str = "", per_party: bool = False):
    """A NetJob whose job file names each party's own tables (``party_tables``), in one
    folder or (``per_party``) in a folder per party."""
    pytest.importorskip("private_set_intersection.python")
    job = netjob([(n, "unused", (0, 1)) for n in PARTIES], job_id="tables")
    spec = load_job(job.config)
    data = tmp_path / "tables"
    certs = spec.ca.parent
    lines = [
        "[job]",
        'id = "tables"',
        'protocol = "vertical"',
        'align = "psi"',
        "round_timeout = 60.0",
        "grace = 2.0",
        "idle_timeout = 120.0",
        extra_job,
        "[params]",
        params,
        "[tls]",
        f'ca = "{spec.ca}"',
        "[leader]",
        f'address = "{spec.leader.address}"',
        f'certificate = "{certs / "leader.pem"}"',
        f'key = "{certs / "leader.key"}"',
    ]
    for p in spec.parties:
        lines += [
            "[[party]]",
            f'name = "{p.name}"',
            f'address = "{p.address}"',
            f'certificate = "{certs / (p.name + ".pem")}"',
            f'key = "{certs / (p.name + ".key")}"',
            f'data_dir = "{data / p.name if per_party else data}"',
            f'data = "{p.name}.train.csv"',
            f'test = "{p.name}.test.csv"',
            'id_column = "customer_id"',
            f'schema = "{p.name}.schema.toml"',
            f'ledger = "{tmp_path / "ledgers" / (p.name + ".sqlite")}"',
        ]
    job.config.write_text("\n".join(lines) + "\n")
    return job, data


def _write_new_rows(
    data: Path, *, drop_at_shop: int, unknown_at_label: int, seed: int = 1
) -> dict[str, list[str]]:
    """Every party's ``new.csv``: its test rows in an order of its own; the shop without
    ``drop_at_shop`` of them, the label holder (without labels) with ``unknown_at_label`` IDs
    nobody else has. Returns each party's IDs in its file's order."""
    rng = np.random.default_rng(seed)
    ids = {}
    for name in PARTIES:
        header, *rows = (data / name / f"{name}.test.csv").read_text().splitlines()
        columns = header.split(",")
        if name == "label":  # rows to score carry no label
            keep = [k for k, c in enumerate(columns) if c != "diagnosis"]
            columns = [columns[k] for k in keep]
            rows = [",".join(r.split(",")[k] for k in keep) for r in rows]
            rows += [
                ",".join([f"N{j:07d}", *["1"] * (len(columns) - 2), "small"])
                for j in range(unknown_at_label)
            ]
        rows = [rows[k] for k in rng.permutation(len(rows))]
        if name == "shop":
            rows = rows[drop_at_shop:]
        (data / name / "new.csv").write_text("\n".join([",".join(columns), *rows]) + "\n")
        ids[name] = [r.split(",")[0] for r in rows]
    return ids


@pytest.mark.slow
def test_an_aligned_job_trains_and_predicts_by_id_over_the_network_and_the_leader_sees_no_id(
    netjob, tmp_path, party_tables
):
    job, data = aligned_job(
        netjob, tmp_path, params='mechanism = "none"\niterations = 30', per_party=True
    )
    held = party_tables(data, per_party=True)
    shared = held["label"] & held["bank"] & held["shop"]
    job.start_parties()
    done = job.run(timeout=240)
    assert done.returncode == 0, done.stderr + "".join(job.log(n) for n in PARTIES)
    assert f"aligned {len(shared)} rows shared by every party" in done.stdout
    result = json.loads(job.out.read_text())
    alignment = result["data"]["alignment"]
    assert alignment["parts"]["train"]["rows"] == len(shared)
    assert result["parties"][0]["n_features"] == 6  # 4 numeric and a one-hot of two
    # each party served the alignment job, then the job, and exited
    assert job.wait_parties(timeout=60) == dict.fromkeys(PARTIES, 0)
    # the same model as the job in one process (its rows in another order: the sums over
    # rows differ in rounding only)
    inproc = tmp_path / "inprocess.json"
    assert (
        main(["train", "vertical", "--config", str(job.config), "--out", str(inproc), "--quiet"])
        == 0
    )
    local = json.loads(inproc.read_text())
    assert local["data"]["alignment"]["joined_rows"] == len(shared)
    assert result["final"]["test_accuracy"] == pytest.approx(
        local["final"]["test_accuracy"], abs=1e-9
    )
    assert result["final"]["train_objective"] == pytest.approx(
        local["final"]["train_objective"], rel=1e-9
    )
    assert result["final"]["test_accuracy"] > 0.88
    # predictions by ID: each party's own new.csv, in its own order; the shop lacks 10 of
    # the label holder's IDs, and 3 of the label holder's IDs are nobody else's
    new_ids = _write_new_rows(data, drop_at_shop=10, unknown_at_label=3)
    receipt_path = tmp_path / "receipt.json"
    predicted, codes = _predict(job, "new.csv", receipt_path)
    assert predicted.returncode == 0, predicted.stderr + "".join(job.log(n) for n in PARTIES)
    assert codes == dict.fromkeys(PARTIES, 0)
    receipt = json.loads(receipt_path.read_text())
    scored = json.loads(Path(receipt["path"]).read_text())
    assert stat.S_IMODE(Path(receipt["path"]).stat().st_mode) == 0o600
    expected = [i for i in new_ids["label"] if i in new_ids["bank"] and i in new_ids["shop"]]
    assert scored["ids"] == expected and receipt["n_rows"] == len(expected)  # the file's order
    assert scored["not_scored"]["rows"] == 13
    assert scored["not_scored"]["missing_at"] == {"bank": 3, "shop": 13}
    assert sorted(scored["not_scored"]["ids"]) == sorted(set(new_ids["label"]) - set(expected))
    # the scores are the trained model's: every party's columns of the row times its part
    reference = np.zeros(len(expected))
    for name in PARTIES:
        coef = json.loads((job.folder / "work" / name / "tables" / "model.json").read_text())
        own = read_table(
            data / name / "new.csv",
            id_column="customer_id",
            labels=False,
            schema=load_schema(data / name / f"{name}.schema.toml"),
        )
        weights = np.asarray(coef["coef"])
        if "intercept" in coef:  # the label holder's: its rows get the intercept column
            weights, shift = weights[:-1], coef["intercept"]
        else:
            shift = 0.0
        reference += own.take(expected).X @ weights + shift
    np.testing.assert_allclose(scored["scores"], reference, rtol=1e-9, atol=1e-12)
    truth = read_table(
        data / "label" / "label.test.csv",
        id_column="customer_id",
        schema=load_schema(data / "label" / "label.schema.toml"),
    ).take(expected)
    accuracy = np.mean((np.asarray(scored["probability"]) > 0.5) == (truth.y > 0))
    assert accuracy > 0.88
    # rows whose IDs are training rows' are refused by ID, whatever the file is called
    for name in PARTIES:
        shutil.copy(data / name / f"{name}.train.csv", data / name / "renamed.csv")
    refused, codes = _predict(job, "renamed.csv", tmp_path / "refused.json")
    assert refused.returncode != 0
    assert "rows whose IDs are its training rows'" in refused.stderr
    assert "predict_training_rows" in refused.stderr
    assert not (tmp_path / "refused.json").exists()
    # no customer ID in anything the leader wrote or printed
    ids = held["label"] | held["bank"] | held["shop"] | set(new_ids["label"])
    leader_files = [
        job.out,
        receipt_path,
        *(p for p in (job.folder / "checkpoint").rglob("*") if p.is_file()),
    ]
    texts = [done.stdout, done.stderr, predicted.stdout, predicted.stderr] + [
        p.read_bytes().decode("latin-1") for p in leader_files
    ]
    assert not [i for i in ids if any(i in t for t in texts)]
    # every party keeps what it agreed, owner-only, and the same digest as the leader's
    for name in PARTIES:
        path = job.folder / "work" / name / "tables" / "alignment.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        kept = json.loads(path.read_text())
        assert kept["parts"]["train"]["digest"] == alignment["parts"]["train"]["digest"]
        assert set(kept["parts"]["train"]["ids"]) == shared


@pytest.mark.slow
def test_too_few_shared_rows_end_the_alignment_with_the_reason(netjob, tmp_path, party_tables):
    job, data = aligned_job(
        netjob,
        tmp_path,
        params='mechanism = "none"\niterations = 30',
        extra_job="min_rows = 100000",
    )
    data.mkdir()
    party_tables(data)
    job.start_parties()
    done = job.run(timeout=240)
    assert done.returncode != 0
    assert "fewer than [job].min_rows = 100000" in done.stderr
    assert not job.out.exists()
