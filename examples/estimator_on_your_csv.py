"""Train a differentially private vertical logistic regression on your own CSV file.

The columns of the CSV are split between parties (the first party also holds the labels), as
if each party held its own columns of the same rows, and
:class:`dpfed.estimators.VerticalLogisticRegression` runs the ADMM sharing protocol between
them in this process with the ``sound`` mechanism at the given epsilon and delta. It prints
the test accuracy and ``privacy_spent_``, beside non-private models: the same protocol without
noise, and scikit-learn's LogisticRegression on all columns and on the label holder's alone.

Run it as::

    python examples/estimator_on_your_csv.py                      # a breast cancer CSV it writes
    python examples/estimator_on_your_csv.py data.csv --label y --bounds bounds.csv \\
        --parties 3 --epsilon 1 --delta 1e-5

The CSV has a header row; every column but the label holds numbers, and the label column holds
two distinct values (the larger one, in sorted order, is the positive class). The epsilon is
about one row only if the features were scaled with *public* constants: ``--bounds`` is a CSV
``column,lo,hi`` of declared ranges (documented ranges, physical limits), and every column is
clipped to its range and mapped to [-1, 1]. Without ``--bounds`` the script scales by the
training rows' minimum and maximum and says that the epsilon then assumes those public.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from dpfed.data import DATASET_SPECS, even_split, scale_columns
from dpfed.estimators import VerticalLogisticRegression


def write_breast_cancer_csv(folder: Path) -> tuple[Path, Path]:
    """Write scikit-learn's breast cancer data and its declared public bounds as CSV files.

    Returns
    -------
    tuple of Path
        The data file (label column ``diagnosis``: malignant or benign) and the bounds file.
    """
    bc = load_breast_cancer()
    data, bounds = folder / "breast_cancer.csv", folder / "breast_cancer_bounds.csv"
    with data.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*bc.feature_names, "diagnosis"])
        for row, target in zip(bc.data, bc.target, strict=True):
            w.writerow([*(f"{v:.6g}" for v in row), bc.target_names[target]])
    with bounds.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["column", "lo", "hi"])
        w.writerows((b.column, b.lo, b.hi) for b in DATASET_SPECS["breast_cancer"].columns)
    return data, bounds


def read_csv(path: Path, label: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Feature names, features ``(n, d)``, labels in {0, 1} and the two label values."""
    with path.open(newline="") as f:
        header, *rows = list(csv.reader(f))
    if label not in header:
        sys.exit(f"error: label column {label!r} is not in {path}'s header {header}")
    k = header.index(label)
    names = [c for i, c in enumerate(header) if i != k]
    X = np.array([[float(v) for i, v in enumerate(r) if i != k] for r in rows])
    classes, y = np.unique([r[k] for r in rows], return_inverse=True)
    if classes.size != 2:
        sys.exit(f"error: column {label!r} must hold two distinct values; found {classes[:5]}")
    return names, X, y, classes


def read_bounds(path: Path, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Declared ``(lo, hi)`` of every feature column, from a CSV ``column,lo,hi``."""
    with path.open(newline="") as f:
        table = {r["column"]: (float(r["lo"]), float(r["hi"])) for r in csv.DictReader(f)}
    missing = [n for n in names if n not in table]
    if missing:
        sys.exit(f"error: {path} gives no bounds for the columns {missing}")
    return np.array([table[n][0] for n in names]), np.array([table[n][1] for n in names])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="?", type=Path, help="data file (default: breast cancer)")
    p.add_argument("--label", default="diagnosis", help="label column (default: diagnosis)")
    p.add_argument("--bounds", type=Path, help="CSV column,lo,hi of declared public ranges")
    p.add_argument("--parties", type=int, default=3, help="parties sharing the columns")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--lam", type=float, default=1e-4, help="L2 weight of the mean objective")
    p.add_argument("--test-size", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path, bounds = args.csv, args.bounds
        if path is None:
            path, bounds = write_breast_cancer_csv(Path(tmp))
            print(
                "no CSV given: scikit-learn's breast cancer data, written with its declared "
                "bounds to a temporary folder"
            )
        names, X, y, classes = read_csv(path, args.label)
        if bounds is not None:
            lo, hi = read_bounds(bounds, names)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=args.test_size, random_state=args.seed, stratify=y
    )
    if bounds is None:
        print(
            "WARNING: no --bounds: columns scaled by the training rows' min and max; the "
            "epsilon below assumes those constants public"
        )
        lo, hi = X_train.min(axis=0), X_train.max(axis=0)
        hi = np.where(hi > lo, hi, lo + 1.0)  # a constant column
    X_train, X_test = (scale_columns(A, lo, hi, (-1.0, 1.0)) for A in (X_train, X_test))
    split = even_split(X.shape[1], args.parties)
    print(
        f"{len(X_train)} training and {len(X_test)} test rows, {X.shape[1]} features split "
        f"{'|'.join(map(str, split))} between {args.parties} parties; label {args.label!r}: "
        f"{classes[0]} = 0, {classes[1]} = 1"
    )

    common = {"split": split, "lam": args.lam, "random_state": args.seed}
    private = VerticalLogisticRegression(
        mechanism="sound", epsilon=args.epsilon, delta=args.delta, **common
    ).fit(X_train, y_train)
    exact = VerticalLogisticRegression(mechanism="none", **common).fit(X_train, y_train)
    # the same objective as dpfed's, (1/N) sum loss + lam/2 ||w||^2, with scikit-learn's
    # (unregularised) intercept
    C = 1.0 / (args.lam * len(X_train))
    pooled = LogisticRegression(C=C, max_iter=5000).fit(X_train, y_train)
    own = split[0]  # the label holder's columns
    alone = LogisticRegression(C=C, max_iter=5000).fit(X_train[:, :own], y_train)
    rows = [
        (f"vertical, sound DP (epsilon={args.epsilon:g})", private.score(X_test, y_test)),
        ("vertical, no noise", exact.score(X_test, y_test)),
        ("scikit-learn, all columns pooled", pooled.score(X_test, y_test)),
        ("scikit-learn, label holder's columns", alone.score(X_test[:, :own], y_test)),
    ]
    print(f"\n{'model':<40} test accuracy")
    print("\n".join(f"{label:<40} {acc:.3f}" for label, acc in rows))

    spent = private.privacy_spent_
    print(
        f"\nprivacy_spent_: epsilon = {spent['epsilon']:.4g} at delta = {spent['delta']:g} "
        f"({spent['mechanism']} mechanism, {spent['accountant']} accountant)"
    )
    for party, figures in spent["per_party"].items():
        print(f"  {party}: epsilon {figures['epsilon']:.4g} over {figures['releases']} releases")
    weight = private.history_[-1].get("passive_weight")
    if weight is not None:
        print(f"  weight of the passive parties' models: {weight:.3g} (0: label holder alone)")
    print("\n".join(f"  note: {note}" for note in spent["notes"]))
    if not all(np.isfinite(acc) and acc > 0 for _, acc in rows):
        sys.exit("error: a model did not train")


if __name__ == "__main__":
    main()
