"""Three organisations' own tables made from UCI Adult: string IDs, shuffled rows, about 90 %
of customers shared, raw categorical strings, and each party's schema of public bounds.

A bank (the label holder: income, age, education, capital), an insurer (household) and a
retailer (work and origin) each get ``train.csv`` and ``test.csv`` keyed by ``customer_id``
(``C`` and seven digits), in their own shuffled order; each party misses about 10 % of the
others' customers and holds 1,500 IDs nobody else has. Each also gets ``new.csv``: 2,000 new
customers taken out of Adult's test rows (not in any ``test.csv``), each party missing about
3 % of them, the bank's without the income column; their incomes are in ``answers.csv`` beside
the parties' folders, to check the scores of a prediction by ID against. The schemas take their
bounds and category lists from dpfed's declared public preprocessing of Adult
(``dpfed.data.specs.DATASET_SPECS["adult"]``: adult.names and the CPS top-codes), with an
explicit ``other`` column for unknown values (Adult writes a missing value as ``?``).

Run::

    DPFED_DATA=../shared/data python tools/make_party_tables.py --out tables

then read a table back with ``dpfed.data.tables`` (it prints each party's encoded shape).
"""

from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path

import numpy as np

from dpfed.data.specs import ADULT_CATEGORIES, DATASET_SPECS
from dpfed.data.tables import load_schema, read_table

COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)

#: Which party holds which columns (the bank also holds the label).
PARTIES = {
    "bank": ("age", "education", "education-num", "capital-gain", "capital-loss"),
    "insurer": ("marital-status", "relationship", "race", "sex"),
    "retailer": ("workclass", "occupation", "hours-per-week", "native-country"),
}
LABEL_HOLDER = "bank"
SHARED, OWN = 0.9, 1500
#: New customers to score by ID, and the share of them each party holds.
NEW, NEW_HELD = 2000, 0.97


def read_adult(path: Path) -> list[dict[str, str]]:
    rows = []
    with open(path) as handle:
        for line in handle:
            values = [v.strip() for v in line.strip().rstrip(".").split(",")]
            if len(values) == len(COLUMNS):
                rows.append(dict(zip(COLUMNS, values, strict=True)))
    return rows


def schema_text(party: str) -> str:
    spec = DATASET_SPECS["adult"]
    bounds = {b.column: (b.lo, b.hi) for b in spec.columns}
    lines = [f"# {party}'s columns: public bounds and category lists of adult.names"]
    if party == LABEL_HOLDER:
        lines += ['label = "income"', 'positive = ">50K"']
    for name in PARTIES[party]:
        lines.append(f'\n[columns."{name}"]')
        if name in bounds:
            lo, hi = bounds[name]
            lines.append(f"bounds = [{lo!r}, {hi!r}]")
        else:
            listed = ", ".join(f'"{c}"' for c in ADULT_CATEGORIES[name])
            lines += [f"categories = [{listed}]", "other = true"]
    return "\n".join(lines) + "\n"


def write_party(
    folder: Path, name: str, rows: list[dict[str, str]], ids: list[str], rng: np.random.Generator
) -> None:
    order = rng.permutation(len(rows))
    header = ["customer_id", *PARTIES[name]] + (["income"] if name == LABEL_HOLDER else [])
    with open(folder, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(header)
        for i in order:
            out.writerow([ids[i], *(rows[i][c] for c in header[1:])])


def split(
    rows: list[dict[str, str]], folder: Path, file: str, rng: np.random.Generator, first_id: int
) -> dict[str, int]:
    """Every row gets an ID; each party keeps about SHARED of them plus OWN rows of its own
    (drawn from the same rows, under new IDs)."""
    n = len(rows)
    ids = [f"C{first_id + i:07d}" for i in rng.permutation(n)]
    counts = {}
    for k, name in enumerate(PARTIES):
        keep = np.flatnonzero(rng.random(n) < SHARED)
        extra = rng.choice(n, OWN, replace=False)
        mine = [rows[i] for i in keep] + [rows[i] for i in extra]
        # its own customers: IDs no other party has (C8..., C9... for the test rows)
        own = first_id + 7_000_000 + 100_000 * k
        mine_ids = [ids[i] for i in keep] + [f"C{own + j:07d}" for j in range(OWN)]
        write_party(folder / name / file, name, mine, mine_ids, rng)
        counts[name] = len(mine)
    return counts


def write_new(rows: list[dict[str, str]], out: Path, rng: np.random.Generator) -> None:
    """Every party's ``new.csv`` (IDs ``C3...``, no income) and ``answers.csv``."""
    ids = [f"C{3_000_000 + i:07d}" for i in rng.permutation(len(rows))]
    for name in PARTIES:
        held = np.flatnonzero(rng.random(len(rows)) < NEW_HELD)
        order = rng.permutation(held)
        with open(out / name / "new.csv", "w", newline="") as handle:
            table = csv.writer(handle)
            table.writerow(["customer_id", *PARTIES[name]])
            for i in order:
                table.writerow([ids[i], *(rows[i][c] for c in PARTIES[name])])
    with open(out / "answers.csv", "w", newline="") as handle:
        table = csv.writer(handle)
        table.writerow(["customer_id", "income"])
        for i, row in enumerate(rows):
            table.writerow([ids[i], row["income"]])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tables", help="folder of the parties' folders")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = Path(os.environ.get("DPFED_DATA", "../shared/data")) / "adult"
    rng = np.random.default_rng(args.seed)
    out = Path(args.out)
    for name in PARTIES:
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "schema.toml").write_text(schema_text(name))
    train = split(read_adult(data / "adult.data"), out, "train.csv", rng, 1_000_000)
    test_rows = read_adult(data / "adult.test")
    carved = rng.permutation(len(test_rows))
    write_new([test_rows[i] for i in carved[:NEW]], out, rng)
    test = split([test_rows[i] for i in sorted(carved[NEW:])], out, "test.csv", rng, 5_000_000)
    for name in PARTIES:
        table = read_table(
            out / name / "train.csv",
            id_column="customer_id",
            schema=load_schema(out / name / "schema.toml"),
        )
        print(
            f"{name}: {train[name]} training rows, {test[name]} test rows, new customers "
            f"in new.csv; encoded "
            f"{table.X.shape[1]} columns ({', '.join(PARTIES[name])})"
        )


if __name__ == "__main__":
    main()
