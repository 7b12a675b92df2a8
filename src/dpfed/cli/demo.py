"""``dpfed demo``: a two-party vertical job on data scikit-learn ships, where the other
party's columns matter.

scikit-learn's handwritten digits (1,797 images of 8 x 8 pixels): one party holds the top half
of every image and the labels (is the digit odd?), the other the bottom half. The label
holder alone gets about 0.80 test accuracy; with both halves, 0.89.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from typing import Any

import numpy as np

from dpfed._io import write_json_atomic
from dpfed.cli.common import output_path
from dpfed.cli.vertical import intercept_baselines
from dpfed.core.losses import score_metrics
from dpfed.parameters import parse_int
from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical

#: Pixels per party: the top four rows of the image, then the bottom four.
DEMO_SPLIT = (32, 32)
EPSILON = 8.0
DELTA = 1e-5


def configure_demo(p: argparse.ArgumentParser) -> None:
    """``dpfed demo``."""
    p.add_argument("--out", type=output_path("file"), help="also write the results as JSON")
    p.add_argument("--seed", type=parse_int, default=0)
    p.set_defaults(func=run_demo)


def digits_odd() -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray], np.ndarray]:
    """scikit-learn's digits, pixels scaled by their public range [0, 16] to [0, 1], labels
    +1 for an odd digit; a stratified 70/30 split with ``random_state=0``; the columns cut
    into the top and bottom halves of the image."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, digit = load_digits(return_X_y=True)
    y = np.where(digit % 2 == 1, 1.0, -1.0)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16.0, y, test_size=0.3, random_state=0, stratify=y
    )
    cut = DEMO_SPLIT[0]
    return (
        [X_train[:, :cut], X_train[:, cut:]],
        y_train,
        [X_test[:, :cut], X_test[:, cut:]],
        y_test,
    )


def _secure_rows(
    blocks: list[np.ndarray],
    y: np.ndarray,
    test_blocks: list[np.ndarray],
    y_test: np.ndarray,
    seed: int,
) -> tuple[list[tuple], dict[str, Any]]:
    rows, payload = [], {}
    for protect in ("all",):
        setup = SecureSetup(len(y), DEMO_SPLIT, EPSILON, DELTA, protect=protect)
        result = train_secure_vertical(blocks, y, setup, seed=seed)
        metrics = score_metrics(result.decision_function(test_blocks), y_test)
        privacy = result.privacy()
        top = result.decision_function([test_blocks[0], np.zeros_like(test_blocks[1])])
        bottom = result.decision_function([np.zeros_like(test_blocks[0]), test_blocks[1]])
        share = float(np.var(bottom) / (np.var(top) + np.var(bottom)))
        label = f"secure vertical, DP eps={EPSILON:g}"
        rows.append(
            (
                label,
                metrics["test_log_loss"],
                metrics["test_accuracy"],
                f"epsilon={privacy['epsilon']:.3g}, delta={DELTA:g} (pld)",
            )
        )
        payload[label] = {
            "final": metrics,
            "privacy": privacy,
            "costs": result.cost_summary(),
            "bottom_score_share": share,
        }
    return rows, payload


def run_demo(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    blocks, y, test_blocks, y_test = digits_odd()
    print(
        f"dpfed demo: 2 parties hold the top and bottom halves of the same {len(y)} "
        "handwritten digits (scikit-learn's digits)"
    )
    print(
        f"  'top' holds the labels (is the digit odd?) and {DEMO_SPLIT[0]} pixels; 'bottom' "
        f"holds {DEMO_SPLIT[1]}; {len(y_test)} test images"
    )
    rows: list[tuple] = []
    payload: dict[str, Any] = {"runs": {}, "baselines": {}, "data": "sklearn digits, odd"}
    notes: list[str] = []
    if importlib.util.find_spec("tenseal") is not None:
        secure, payload["runs"] = _secure_rows(blocks, y, test_blocks, y_test, args.seed)
        rows += secure
        share = next(iter(payload["runs"].values()))["bottom_score_share"]
        notes.append(
            "secure mode: every product of the two halves was computed under CKKS encryption; "
            "only noisy 32-number gradients were decrypted, and every pixel and label is "
            f"protected. The bottom half carries {share:.0%} of the secure model's score "
            "variance on the test images."
        )
    else:
        notes.append('secure mode skipped: pip install "dpfed[secure]" to run it (TenSEAL).')
    notes.append(
        "here both parties run in one process; over the network each runs its own "
        "`dpfed party` (a vertical job file with [params] secure = true, "
        "docs/networked.md)."
    )
    references = intercept_baselines(blocks, y, test_blocks, y_test, "normalize")
    for name, shown in (
        ("label_holder_alone", "top alone (its pixels, its labels)"),
        ("central_non_private", "both halves pooled, no privacy"),
    ):
        res = references[name]
        payload["baselines"][shown] = res
        rows.append((shown, res["test_log_loss"], res["test_accuracy"], None))
    print()
    print(f"  {'model':<40} {'test log loss':>13} {'accuracy':>9}  privacy spent")
    for shown, loss, acc, spent in rows:
        print(
            f"  {shown:<40} {loss:>13.4f} {acc:>9.3f}  "
            f"{spent if spent is not None else 'no protocol (reference)'}"
        )
    print()
    for note in notes:
        print(f"  note: {note}")
    print(
        "  note: simulation: each party's noise comes from seed "
        f"{args.seed} in this one process; `dpfed run` draws each party's from its own secret."
    )
    print(f"  finished in {time.perf_counter() - started:.1f} s")
    if args.out:
        write_json_atomic(args.out, payload)
        print(f"  wrote {args.out}")
    return 0
