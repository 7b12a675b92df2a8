"""Three organisations' own tables: aligned by ID, trained over the network, scored by ID.

Each organisation holds a CSV of its own customers, keyed by its own string IDs, in its own
order, with only some customers in common, and a schema (TOML) of public bounds and category
lists. This script writes such tables (or takes the ones ``tools/make_party_tables.py`` makes
from UCI Adult), creates certificates, writes a job file with ``[job].align = "psi"``, starts
one ``dpfed party`` process per organisation and leads the job with ``dpfed run``: the
alignment job (private set intersection with the label holder) runs first, then training on
the shared customers. It then scores every organisation's ``new.csv`` by ID with ``dpfed
predict``: the label holder's file lists the IDs scored with their probabilities, and the IDs
not every party holds, which are not scored. Every process it started is stopped, whatever
happens. Needs the ``net`` extra and the ``psi`` extra (``dpfed[net,psi]``)::

    python examples/own_tables_by_id.py                   # tables made from breast cancer
    python examples/own_tables_by_id.py --epsilon 1       # the sound mechanism at epsilon 1
    DPFED_DATA=data python tools/make_party_tables.py --out tables
    python examples/own_tables_by_id.py --tables tables   # the three Adult tables
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer

from dpfed.data.specs import DATASET_SPECS
from dpfed.data.tables import load_schema

DPFED = [sys.executable, "-m", "dpfed.cli"]  # the `dpfed` command of this Python
sys.path.insert(0, str(Path(__file__).resolve().parent))
from networked_job import free_ports, with_parties  # noqa: E402  (kept together)

#: The breast cancer tables: which organisation holds which columns (the ten nuclear
#: measures' means, standard errors and worst values).
ORGANISATIONS = {"clinic": range(0, 10), "imaging": range(10, 20), "lab": range(20, 30)}


def breast_cancer_tables(out: Path, seed: int = 0) -> None:
    """``out/<organisation>/{train,test,new}.csv`` and ``schema.toml`` from breast cancer:
    IDs ``P`` and seven digits, each table shuffled, each organisation missing about 10 % of
    the patients and holding 30 of its own; the clinic holds the diagnosis and a raw string
    column (``size``); ``out/answers.csv`` holds the new patients' diagnoses."""
    data = load_breast_cancer()
    rng = np.random.default_rng(seed)
    n = data.data.shape[0]
    ids = np.array([f"P{v:07d}" for v in rng.choice(10**7, size=n, replace=False)])
    part = rng.choice(["train", "test", "new"], size=n, p=[0.7, 0.2, 0.1])
    bounds = {b.column: (b.lo, b.hi) for b in DATASET_SPECS["breast_cancer"].columns}
    diagnosis = np.where(data.target == 1, "benign", "malignant")
    size = np.where(
        data.data[:, 0] < 12, "small", np.where(data.data[:, 0] < 16, "medium", "large")
    )
    for k, (name, at) in enumerate(ORGANISATIONS.items()):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        columns = [str(data.feature_names[j]) for j in at]
        schema = ['label = "diagnosis"\npositive = "benign"' if k == 0 else ""]
        schema += [
            f'[columns."{c}"]\nbounds = [{bounds[c][0]!r}, {bounds[c][1]!r}]' for c in columns
        ]
        if k == 0:
            schema.append('[columns.size]\ncategories = ["small", "medium", "large"]')
        (folder / "schema.toml").write_text("\n\n".join(schema) + "\n")
        for file in ("train", "test", "new"):
            held = rng.random(n) < 0.9 if file != "test" else np.ones(n, dtype=bool)
            rows = rng.permutation(np.flatnonzero((part == file) & held))
            header = ["patient", *columns] + (["size"] if k == 0 else [])
            lines = [
                [ids[r], *(f"{data.data[r, j]:.6g}" for j in at)] + ([size[r]] if k == 0 else [])
                for r in rows
            ]
            if file == "train":  # patients of its own: rows of others under new IDs
                lines += [[f"Q{k}{j:06d}", *line[1:]] for j, line in enumerate(lines[:30])]
            if k == 0 and file != "new":
                header.append("diagnosis")
                for line, r in zip(lines, [*rows, *rows[:30]], strict=False):
                    line.append(diagnosis[r])
            with open(folder / f"{file}.csv", "w", newline="") as handle:
                csv.writer(handle).writerows([header, *lines])
    with open(out / "answers.csv", "w", newline="") as handle:
        csv.writer(handle).writerows(
            [
                ["patient", "diagnosis"],
                *([ids[r], diagnosis[r]] for r in np.flatnonzero(part == "new")),
            ]
        )


def job_file(
    folder: Path,
    tables: Path,
    parties: list[str],
    id_column: str,
    *,
    epsilon: float | None,
    iterations: int,
    port: int,
) -> Path:
    """The aligned job's file on free loopback ports (the label holder first)."""
    leader, *ports = free_ports(1 + len(parties), port)
    params = (
        'mechanism = "none"'
        if epsilon is None
        else f'mechanism = "sound"\nepsilon = {epsilon}\ndelta = 1e-5'
    )
    lines = [
        "[job]",
        'id = "own-tables"',
        'protocol = "vertical"',
        'align = "psi"',
        'evaluate = "test"',
        "round_timeout = 120.0",
        "",
        "[params]",
        params,
        f"iterations = {iterations}" if epsilon is None else "",
        "",
        "[tls]",
        'ca = "certs/ca.pem"',
        "",
        "[leader]",
        f'address = "127.0.0.1:{leader}"',
        'certificate = "certs/leader.pem"',
        'key = "certs/leader.key"',
    ]
    for name, p in zip(parties, ports, strict=True):
        lines += [
            "",
            "[[party]]",
            f'name = "{name}"',
            f'address = "127.0.0.1:{p}"',
            f'certificate = "certs/{name}.pem"',
            f'key = "certs/{name}.key"',
            f'data_dir = "{tables / name}"',
            'data = "train.csv"',
            'test = "test.csv"',
            f'id_column = "{id_column}"',
            'schema = "schema.toml"',
        ]
        if epsilon is not None and name != parties[0]:  # the rows the sound mechanism protects
            lines.append(f"budget = {{ epsilon = {2 * epsilon}, delta = 1e-5 }}")
    config = folder / "job.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


def check(done: subprocess.CompletedProcess, folder: Path, what: str) -> None:
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        for log in sorted((folder / "logs").glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()}", file=sys.stderr)
        sys.exit(f"error: {what} exited with status {done.returncode}")
    print(done.stdout.rstrip())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--tables",
        type=Path,
        metavar="DIR",
        help="a folder per party (train.csv, test.csv, new.csv, schema.toml) and "
        "answers.csv, as tools/make_party_tables.py writes (default: make "
        "them from breast cancer)",
    )
    p.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="train with the sound mechanism at this epsilon (delta 1e-5), each "
        "party other than the label holder with a budget of twice it; "
        "default: no privacy mechanism",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=20,
        help="ADMM rounds without a mechanism (the sound mechanism's rule picks its own)",
    )
    p.add_argument("--keep", type=Path, metavar="DIR", help="run in DIR and keep it")
    # its own range: examples/networked_job.py starts at 18050, and the test suite runs
    # both at once (a port found free can be taken by the other before its party binds it)
    p.add_argument("--port", type=int, default=18150, help="first port to try")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up when killed too

    with tempfile.TemporaryDirectory(prefix="dpfed-tables-") as tmp:
        folder = (args.keep or Path(tmp)).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        tables = args.tables.resolve() if args.tables else folder / "tables"
        if args.tables is None:
            breast_cancer_tables(tables)
        # the label holder is the party whose schema names the label
        found = sorted(d.name for d in tables.iterdir() if (d / "schema.toml").is_file())
        parties = sorted(found, key=lambda n: load_schema(tables / n / "schema.toml").label is None)
        with open(tables / "answers.csv") as handle:
            answers = dict(csv.reader(handle))
        id_column = next(iter(answers))  # the answers' header names the ID column
        positive = load_schema(tables / parties[0] / "schema.toml").positive
        done = subprocess.run(
            [
                *DPFED,
                "certs",
                "init",
                "--out",
                str(folder / "certs"),
                "--parties",
                ",".join(parties),
            ],
            capture_output=True,
            text=True,
        )
        check(done, folder, "dpfed certs init")
        config = job_file(
            folder,
            tables,
            parties,
            id_column,
            epsilon=args.epsilon,
            iterations=args.iterations,
            port=args.port,
        )
        print(
            f"job file {config}: parties {', '.join(parties)} ({parties[0]} holds the "
            "labels), rows aligned by private set intersection"
        )
        check(
            with_parties(
                config,
                parties,
                ["run", "--config", config.name, "--out", "result.json"],
                timeout=600,
            ),
            folder,
            "dpfed run",
        )
        check(
            with_parties(
                config,
                parties,
                ["predict", "--config", config.name, "--data", "new.csv", "--out", "receipt.json"],
                timeout=600,
            ),
            folder,
            "dpfed predict",
        )
        receipt = json.loads((folder / "receipt.json").read_text())
        scored = json.loads(Path(receipt["path"]).read_text())
        truth = np.array([answers[i] == positive for i in scored["ids"]])
        accuracy = np.mean((np.asarray(scored["probability"]) > 0.5) == truth)
        test = json.loads((folder / "result.json").read_text())["final"]["test_accuracy"]
        missing = scored["not_scored"]
        print(
            f"{parties[0]} scored {len(scored['ids'])} new rows by ID: accuracy "
            f"{accuracy:.4f} against answers.csv (test accuracy after training {test:.4f}); "
            f"{missing['rows']} of its IDs not scored (missing at "
            + ", ".join(f"{k}: {v}" for k, v in missing["missing_at"].items())
            + ")"
        )
        if args.keep:
            print(f"kept {folder}")


if __name__ == "__main__":
    main()
