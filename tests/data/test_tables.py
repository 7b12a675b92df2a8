"""Tests for dpfed.data.tables: a party's own CSV read through its schema."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.cli import main
from dpfed.data.tables import (
    check_disjoint,
    draft_schema,
    load_schema,
    read_table,
    schema_from_dict,
)

BANK = """customer_id, age, workclass, balance
C1000003, 25, Private, 100.5
C1000001, 90, Federal-gov, -20
C1000002, 17, Never-worked, 5000
"""

BANK_SCHEMA = """
[columns.age]
bounds = [17, 90]

[columns.workclass]
categories = ["Private", "Federal-gov"]
other = true

[columns.balance]
bounds = [0, 1000]
"""

SHOP = """customer_id,visits,income
C1000001,3,>50K
C1000002,0,<=50K
"""

SHOP_SCHEMA = """
label = "income"
positive = ">50K"

[columns.visits]
bounds = [0, 100]
"""


def _files(tmp_path, table: str, schema: str, name: str = "bank"):
    (tmp_path / f"{name}.csv").write_text(table)
    (tmp_path / f"{name}.schema.toml").write_text(schema)
    return tmp_path / f"{name}.csv", load_schema(tmp_path / f"{name}.schema.toml")


def test_a_table_is_encoded_from_its_schema_alone(tmp_path):
    path, schema = _files(tmp_path, BANK, BANK_SCHEMA)
    table = read_table(path, id_column="customer_id", schema=schema)
    assert table.ids == ("C1000003", "C1000001", "C1000002")  # the file's order
    assert table.feature_names == (
        "age",
        "workclass=Private",
        "workclass=Federal-gov",
        "workclass=other",
        "balance",
    )
    np.testing.assert_allclose(
        table.X,
        [
            [8 / 73, 1, 0, 0, 100.5 / 1000],
            [1.0, 0, 1, 0, 0.0],  # -20 clipped to the bound 0
            [0.0, 0, 0, 1, 1.0],  # an unknown category -> other; 5000 clipped to 1000
        ],
    )
    assert table.clipped == {"age": 0, "balance": 2}
    assert table.y is None
    record = schema.record()
    assert record["columns"]["age"] == [17.0, 90.0]
    assert record["columns"]["workclass"] == {
        "categories": ["Private", "Federal-gov"],
        "other": True,
    }
    # rows taken in another order (an agreed intersection's)
    taken = table.take(["C1000001", "C1000002"])
    np.testing.assert_array_equal(taken.X, table.X[[1, 2]])
    with pytest.raises(DpfedInputError, match="1 ID"):
        table.take(["C9"])


def test_the_label_holder_reads_its_labels(tmp_path):
    path, schema = _files(tmp_path, SHOP, SHOP_SCHEMA, "shop")
    table = read_table(path, id_column="customer_id", schema=schema)
    np.testing.assert_array_equal(table.y, [1.0, -1.0])
    assert table.feature_names == ("visits",)
    unlabelled = read_table(path, id_column="customer_id", schema=schema, labels=False)
    assert unlabelled.y is None


@pytest.mark.parametrize(
    ("table", "says"),
    [
        (
            BANK.replace("C1000002", "C1000001"),
            "line 4: the ID 'C1000001' appears twice (first on line 3)",
        ),
        (BANK.replace("C1000002", ""), "line 4: the ID ('customer_id') is empty"),
        (
            BANK.replace(", balance", "")
            .replace(", 100.5", "")
            .replace(", -20", "")
            .replace(", 5000", ""),
            "lacks the column(s) ['balance']",
        ),
        (
            BANK.replace("100.5", "lots"),
            "line 2: column 'balance' is numeric in the schema, but holds 'lots'",
        ),
        (BANK.replace("100.5", "nan"), "holds 'nan'. Expected a finite number"),
        (BANK.replace("Federal-gov, -20", "Federal-gov"), "line 3: 3 values for 4 columns"),
        ("", "is empty: expected a header row"),
    ],
)
def test_bad_tables_are_refused_by_name(tmp_path, table, says):
    path, schema = _files(tmp_path, table, BANK_SCHEMA)
    with pytest.raises(DpfedInputError) as refused:
        read_table(path, id_column="customer_id", schema=schema)
    assert says in str(refused.value)


def test_an_unknown_category_is_refused_without_other(tmp_path):
    path, schema = _files(tmp_path, BANK, BANK_SCHEMA.replace("other = true", ""))
    with pytest.raises(
        DpfedInputError,
        match=r"line 4: column 'workclass' holds "
        r"'Never-worked'.*other = true",
    ):
        read_table(path, id_column="customer_id", schema=schema)


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"columns": {"a": {"bounds": [1, 1]}}}, "lower < upper"),
        ({"columns": {"a": {"bounds": [0, 1], "categories": ["x"]}}}, "not both"),
        ({"columns": {"a": {"categories": []}}}, "non-empty list"),
        ({"columns": {"a": {"categories": ["x", "x"]}}}, "lists a value twice"),
        ({"columns": {"a": {"categories": ["x"], "other": "yes"}}}, "true or false"),
        ({"columns": {"a": {}}}, "must declare bounds"),
        ({"columns": {}}, "at least one"),
        ({"label": "y", "columns": {"a": {"bounds": [0, 1]}}}, "label and positive go together"),
        (
            {"label": "a", "positive": "1", "columns": {"a": {"bounds": [0, 1]}}},
            "cannot also be a feature",
        ),
        ({"colums": {}}, "unknown keys ['colums']"),
    ],
)
def test_bad_schemas_are_refused_by_name(doc, says):
    with pytest.raises(DpfedInputError) as refused:
        schema_from_dict(doc, "bank.schema.toml")
    assert says in str(refused.value)


def test_two_parties_declaring_one_column_are_refused():
    bank = schema_from_dict({"columns": {"age": {"bounds": [0, 1]}}})
    shop = schema_from_dict(
        {"label": "age", "positive": "1", "columns": {"visits": {"bounds": [0, 1]}}}
    )
    check_disjoint(
        {"bank": bank, "other": schema_from_dict({"columns": {"visits2": {"bounds": [0, 1]}}})}
    )
    with pytest.raises(DpfedInputError, match="'bank' and 'shop' both declare the column 'age'"):
        check_disjoint({"bank": bank, "shop": shop})


def test_a_draft_reads_the_data_says_so_loudly_and_loads(tmp_path, capsys):
    (tmp_path / "shop.csv").write_text(SHOP)
    text = draft_schema(
        tmp_path / "shop.csv", id_column="customer_id", label="income", positive=">50K"
    )
    assert text.startswith("# DRAFT SCHEMA, READ FROM THE DATA: NOT PUBLIC UNTIL A PERSON")
    assert text.count("READ FROM THE DATA: replace") == 1
    schema = schema_from_dict(tomllib.loads(text))
    assert schema.label == "income" and schema.positive == ">50K"
    assert [c.name for c in schema.columns] == ["visits"]  # not the ID, not the label
    out = tmp_path / "shop.schema.toml"
    assert (
        main(
            [
                "schema",
                "draft",
                "--data",
                str(tmp_path / "shop.csv"),
                "--id",
                "customer_id",
                "--label",
                "income",
                "--positive",
                ">50K",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert out.read_text() == text
    assert "DRAFT" in capsys.readouterr().err
    assert main(["schema", "draft", "--data", str(tmp_path / "shop.csv"), "--id", "nope"]) == 2
    assert "has no column 'nope'" in capsys.readouterr().err


def test_three_organisations_tables_made_from_adult_read_through_their_schemas(tmp_path):
    """tools/make_party_tables.py: string IDs, shuffled rows, about 90 % shared customers,
    1,500 IDs of each party's own, raw categorical strings, schemas of public bounds."""
    import importlib.util
    import os
    from pathlib import Path

    data = os.environ.get("DPFED_DATA")
    if not data or not (Path(data) / "adult" / "adult.data").is_file():
        pytest.skip("Adult not found under $DPFED_DATA")
    tool = Path(__file__).resolve().parents[2] / "tools" / "make_party_tables.py"
    spec = importlib.util.spec_from_file_location("make_party_tables", tool)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--out", str(tmp_path)])
    tables = {
        name: read_table(
            tmp_path / name / "train.csv",
            id_column="customer_id",
            schema=load_schema(tmp_path / name / "schema.toml"),
        )
        for name in module.PARTIES
    }
    check_disjoint({name: t.schema for name, t in tables.items()})
    ids = {name: set(t.ids) for name, t in tables.items()}
    common = set.intersection(*ids.values())
    assert 0.65 * 32561 < len(common) < 0.8 * 32561  # 0.9^3 of the rows, about
    for name, own in ids.items():
        others = set.union(*(v for k, v in ids.items() if k != name))
        assert len(own - others) >= 1500
        assert all(v.startswith("C") and len(v) == 8 for v in own)
    bank = tables["bank"]
    assert bank.y is not None and 0.2 < np.mean(bank.y > 0) < 0.3  # Adult's >50K share
    assert list(bank.ids) != sorted(bank.ids)  # shuffled
    # new customers to score by ID: in no table, about 3 % missing at each party, no label
    answers = (tmp_path / "answers.csv").read_text().splitlines()
    assert answers[0] == "customer_id,income" and len(answers) == 2001
    known = {line.split(",")[0] for line in answers[1:]}
    tested = set(
        read_table(
            tmp_path / "bank" / "test.csv",
            id_column="customer_id",
            schema=load_schema(tmp_path / "bank" / "schema.toml"),
        ).ids
    )
    for name in module.PARTIES:
        new = read_table(
            tmp_path / name / "new.csv",
            id_column="customer_id",
            labels=False,
            schema=load_schema(tmp_path / name / "schema.toml"),
        )
        assert set(new.ids) <= known and not set(new.ids) & (ids[name] | tested)
        assert 0.94 * 2000 < len(new.ids) < 0.995 * 2000


def test_a_parquet_table_reads_as_the_same_csv_does(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path, schema = _files(tmp_path, BANK, BANK_SCHEMA)
    from_csv = read_table(path, id_column="customer_id", schema=schema)
    columns = {
        "customer_id": ["C1000003", "C1000001", "C1000002"],
        "age": [25, 90, 17],
        "workclass": ["Private", "Federal-gov", "Never-worked"],
        "balance": [100.5, -20.0, 5000.0],
    }
    pq.write_table(pa.table(columns), tmp_path / "bank.parquet")
    from_parquet = read_table(tmp_path / "bank.parquet", id_column="customer_id", schema=schema)
    assert from_parquet.ids == from_csv.ids
    np.testing.assert_array_equal(from_parquet.X, from_csv.X)
    # a missing value and a duplicate ID are refused by line, as in a CSV
    pq.write_table(
        pa.table({**columns, "balance": [100.5, None, 5000.0]}), tmp_path / "gap.parquet"
    )
    with pytest.raises(DpfedInputError, match="line 3: column 'balance' is numeric"):
        read_table(tmp_path / "gap.parquet", id_column="customer_id", schema=schema)
    pq.write_table(
        pa.table({**columns, "customer_id": ["C1", "C2", "C1"]}), tmp_path / "twice.parquet"
    )
    with pytest.raises(DpfedInputError, match="line 4: the ID 'C1' appears twice"):
        read_table(tmp_path / "twice.parquet", id_column="customer_id", schema=schema)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(DpfedInputError, match="not a Parquet file"):
        read_table(tmp_path / "bad.parquet", id_column="customer_id", schema=schema)
