"""Aligned jobs: the parties' own CSV tables, joined by ID in one process, trained with
``dpfed train vertical --config job.toml``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.cli.main import main
from dpfed.data.join import join_tables
from dpfed.data.tables import load_schema, read_table
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical
from dpfed.runtime.jobfile import load_job

#: The parties of the tables (``party_tables`` in tests/conftest.py), label holder first.
TABLE_COLUMNS = ("label", "bank", "shop")


def _job(
    folder: Path,
    params: str = 'mechanism = "none"\niterations = 30',
    *,
    extra_job: str = "",
    tests: bool = True,
) -> Path:
    lines = [
        "[job]",
        'id = "tables"',
        'protocol = "vertical"',
        'align = "psi"',
        extra_job,
        "[params]",
        params,
        "[tls]",
        'ca = "ca.pem"',
        "[leader]",
        'address = "127.0.0.1:1"',
        'certificate = "l.pem"',
        'key = "l.key"',
    ]
    for k, name in enumerate(TABLE_COLUMNS):
        lines += [
            "[[party]]",
            f'name = "{name}"',
            f'address = "127.0.0.1:{k + 2}"',
            f'certificate = "{name}.pem"',
            f'key = "{name}.key"',
            f'data_dir = "{folder}"',
            f'data = "{name}.train.csv"',
            'id_column = "customer_id"',
            f'schema = "{name}.schema.toml"',
        ]
        if tests:
            lines.append(f'test = "{name}.test.csv"')
    path = folder / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_join_takes_the_ids_every_party_holds_in_the_label_holders_order(
    tmp_path, party_tables
):
    held = party_tables(tmp_path)
    spec = load_job(_job(tmp_path))
    joined = join_tables(spec.parties, min_rows=spec.min_rows)
    shared = held["label"] & held["bank"] & held["shop"]
    assert joined.record["joined_rows"] == len(shared) == joined.blocks[0].shape[0]
    assert joined.record["rows_per_table"] == {n: len(v) for n, v in held.items()}
    # the label holder's order, and every block's row i is the same customer
    label = read_table(
        tmp_path / "label.train.csv",
        id_column="customer_id",
        schema=load_schema(tmp_path / "label.schema.toml"),
    )
    order = [i for i in label.ids if i in shared]
    bank = read_table(
        tmp_path / "bank.train.csv",
        id_column="customer_id",
        schema=load_schema(tmp_path / "bank.schema.toml"),
    )
    np.testing.assert_array_equal(joined.blocks[1], bank.take(order).X)
    np.testing.assert_array_equal(joined.labels, label.take(order).y)
    assert [b.shape[1] for b in joined.blocks] == [4 + 2, 5, 5]  # size one-hot: 2 columns
    assert joined.test_blocks is not None and joined.test_blocks[0].shape[0] == 120
    # no ID in what a result may record
    assert not any(i in json.dumps(joined.record) for i in shared)


def test_train_vertical_config_runs_the_job_in_process_and_records_no_id(
    tmp_path, capsys, party_tables
):
    held = party_tables(tmp_path)
    job = _job(tmp_path)
    out = tmp_path / "result.json"
    assert (
        main(
            ["train", "vertical", "--config", str(job), "--out", str(out), "--quiet", "--baselines"]
        )
        == 0
    )
    result = json.loads(out.read_text())
    text = out.read_text()
    assert not any(i in text for i in held["label"] | held["bank"] | held["shop"])
    assert result["data"]["alignment"]["joined_rows"] == result["data"]["n_train"]
    assert result["data"]["alignment"]["digest"]
    assert set(result["preprocessing"]) == set(TABLE_COLUMNS)
    # the same model as training on the joined arrays directly
    spec = load_job(job)
    joined = join_tables(spec.parties)
    direct = train_vertical(
        joined.blocks,
        joined.labels,
        VerticalConfig(mechanism="none", iterations=30),
        names=joined.names,
        test_blocks=joined.test_blocks,
        test_labels=joined.test_labels,
    )
    assert result["final"]["test_accuracy"] == pytest.approx(
        direct.to_json()["final"]["test_accuracy"], abs=1e-12
    )
    assert result["final"]["test_accuracy"] > 0.88
    # about scikit-learn's central model on the same joined table
    central = result["baselines"]["centralized"]["test_accuracy"]
    assert abs(result["final"]["test_accuracy"] - central) < 0.03
    assert "aligned" in capsys.readouterr().out


def test_aligned_jobs_are_refused_where_they_cannot_run(tmp_path, capsys, party_tables):
    party_tables(tmp_path)
    job = _job(tmp_path)
    # a party's table keys need align
    text = job.read_text().replace('align = "psi"\n', "")
    with pytest.raises(DpfedInputError, match=r"needs \[job\]\.align"):
        load_job(_write(tmp_path / "noalign.toml", text))
    # an aligned party has no column range
    text = job.read_text().replace(
        'id_column = "customer_id"', 'id_column = "customer_id"\ncolumns = [0, 4]', 1
    )
    with pytest.raises(DpfedInputError, match="an aligned party has no columns"):
        load_job(_write(tmp_path / "cols.toml", text))
    # fewer shared rows than the job's floor
    floor = _job(tmp_path, extra_job="min_rows = 100000")
    assert (
        main(["train", "vertical", "--config", str(floor), "--out", str(tmp_path / "f.json")]) == 2
    )
    assert "fewer than [job].min_rows = 100000" in capsys.readouterr().err
    assert not (tmp_path / "f.json").exists()
    # some parties with test tables, others without
    text = _job(tmp_path).read_text().replace('test = "shop.test.csv"\n', "")
    mixed = _write(tmp_path / "mixed.toml", text)
    with pytest.raises(DpfedInputError, match="every party gives a test table or none"):
        join_tables(load_job(mixed).parties)
    # two parties declaring the same column
    (tmp_path / "shop.schema.toml").write_text(
        (tmp_path / "shop.schema.toml").read_text() + "[columns.f4]\nbounds = [0, 100]\n"
    )
    with pytest.raises(DpfedInputError, match="both declare the column 'f4'"):
        join_tables(load_job(job).parties)
    # --data and --config together
    assert (
        main(
            [
                "train",
                "vertical",
                "--config",
                str(job),
                "--data",
                "a9a",
                "--out",
                str(tmp_path / "x.json"),
            ]
        )
        == 2
    )
    assert "--config takes the data" in capsys.readouterr().err


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
