r"""Secure vertical learning: epsilon against accuracy and log loss, and what the CKKS products
cost.

Run ``python benchmarks/bench_secure_vertical.py --help``; see ``benchmarks/README.md``.

1. **frontier**: for each data set, protection (``all``: labels and every party's rows;
   ``parties``: the same rounds, then the label holder's own model with the passive scores
   weighed, for the label holder alone; ``passive``: the passive rows) and epsilon, the test
   accuracy and log loss of :func:`dpfed.protocols.vertical_secure.train_secure_vertical` over
   seeds, with the plaintext backend (the same noise draws as the protocol; the CKKS run below
   checks they give the same model). References from the same rows, same run: scikit-learn's
   ``LogisticRegression`` (C = 1, with an intercept) on the label holder's block alone and on
   every block (a central curator, non-private), the constant predictor (the training base
   rate), and a central DP model: output perturbation of the l2-regularised logistic
   regression on all blocks (Chaudhuri, Monteleoni and Sarwate 2011, with the analytic
   Gaussian mechanism: sensitivity :math:`2 L / (N \lambda)` for rows of norm at most
   :math:`L`, the intercept a regularised constant column), its :math:`\lambda` tuned on a
   validation fifth of the training rows (the tuning itself is not accounted: a generous
   reference, as a user tuning on public data would get).
2. **protocol**: one run per data set under CKKS at epsilon 1 with everything protected:
   seconds end to end, seconds and bytes per round, bytes of keys and labels, and the largest
   difference from the plaintext backend's model with the same seed.
3. **more parties** (``--parties``): the same columns held by three parties (the passive
   block cut in two, :data:`THREE_PARTY_SPLITS`) against two, plaintext backend, over seeds;
   and one CKKS run of three parties (a9a at epsilon 1, everything protected) with its
   seconds and bytes. ``--parties-only`` runs this section alone and keeps the rest of the
   saved results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPLITS = {
    "a9a": (66, 57),
    "adult": (53, 52),
    "arcene": (5000, 5000),
    "breast_cancer": (15, 15),
    "madelon": (250, 250),
}
#: The data sets run unless ``--data`` says otherwise (arcene, 10,000 columns and 100 rows,
#: takes about 40 s a run in the plaintext backend: ``--data arcene --no-protocol --keep``).
DEFAULT_DATA = ("a9a", "adult", "breast_cancer", "madelon")
#: The same columns with the passive block cut in two.
THREE_PARTY_SPLITS = {"a9a": (66, 29, 28), "adult": (53, 26, 26)}


def _metrics(labels: np.ndarray, scores: np.ndarray) -> dict:
    """Accuracy and log loss of scores against {-1, 1} labels (dpfed's score_metrics)."""
    from dpfed.core.losses import score_metrics

    m = score_metrics(scores, labels)
    return {"accuracy": m["test_accuracy"], "log_loss": m["test_log_loss"]}


def references(blocks, y, test_blocks, y_test) -> dict:
    """The label holder alone, a central curator (both non-private, with an intercept) and
    the constant predictor, on the rows as the secure mode bounds them (each party's rows
    scaled to norm 1)."""
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    from dpfed.protocols.vertical_secure.party import bounded_rows

    train = [sp.csr_matrix(bounded_rows(b, "normalize")) for b in blocks]
    test = [sp.csr_matrix(bounded_rows(b, "normalize")) for b in test_blocks]
    out = {}
    for name, used in (("label_holder_alone", 1), ("central_non_private", len(blocks))):
        model = LogisticRegression(C=1.0, max_iter=3000).fit(sp.hstack(train[:used]).tocsr(), y)
        out[name] = _metrics(y_test, model.decision_function(sp.hstack(test[:used]).tocsr()))
    base = float(np.mean(y > 0))
    out["constant"] = _metrics(y_test, np.full(len(y_test), np.log(base / (1.0 - base))))
    return out


RIDGES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)


def _output_perturbation(X, y, X_eval, epsilon, delta, lam, rng) -> np.ndarray:
    """Scores on ``X_eval`` of the output-perturbed model fitted on ``X``, ``y`` (in {-1, 1})."""
    from sklearn.linear_model import LogisticRegression

    from dpfed.privacy.accounting import calibrate_noise_multiplier

    n = X.shape[0]
    row_norm = float(np.max(np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())))
    model = LogisticRegression(C=1.0 / (lam * n), fit_intercept=False, tol=1e-8, max_iter=5000).fit(
        X, y
    )
    sigma = calibrate_noise_multiplier(epsilon, delta, 1) * 2.0 * row_norm / (n * lam)
    w = model.coef_[0] + rng.normal(0.0, sigma, X.shape[1])
    return np.asarray(X_eval @ w)


def validation_fifth(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random fifth of ``n`` training rows to tune on, and the other four fifths to fit on
    (the central references' tuning split)."""
    order = rng.permutation(n)
    cut = n // 5
    return order[:cut], order[cut:]


def central_dp(blocks, y, test_blocks, y_test, epsilon, delta, seeds) -> dict:
    """The central DP reference at ``epsilon`` (module docstring), mean over seeds."""
    import scipy.sparse as sp

    from dpfed.protocols.vertical_secure.party import bounded_rows

    def rows(bs):
        parts = [sp.csr_matrix(bounded_rows(b, "normalize")) for b in bs]
        return sp.hstack([*parts, sp.csr_matrix(np.ones((bs[0].shape[0], 1)))]).tocsr()

    X, X_test = rows(blocks), rows(test_blocks)
    runs = []
    for seed in range(seeds):
        rng = np.random.default_rng(1000 + seed)
        val, fit = validation_fifth(X.shape[0], rng)
        losses = [
            _metrics(
                y[val], _output_perturbation(X[fit], y[fit], X[val], epsilon, delta, lam, rng)
            )["log_loss"]
            for lam in RIDGES
        ]
        lam = RIDGES[int(np.argmin(losses))]
        scores = _output_perturbation(X, y, X_test, epsilon, delta, lam, rng)
        runs.append({**_metrics(y_test, scores), "ridge": lam})
    return {
        "accuracy": float(np.mean([r["accuracy"] for r in runs])),
        "log_loss": float(np.mean([r["log_loss"] for r in runs])),
        "ridges": [r["ridge"] for r in runs],
    }


def frontier(name, blocks, y, test_blocks, y_test, epsilons, seeds, delta) -> list[dict]:
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical

    rows = []
    for protect in ("all", "parties", "passive"):
        for epsilon in epsilons:
            runs = []
            for seed in range(seeds):
                setup = SecureSetup(
                    blocks[0].shape[0], SPLITS[name], epsilon, delta, protect=protect
                )
                result = train_secure_vertical(blocks, y, setup, seed=seed, backend="plain")
                runs.append(_metrics(y_test, result.decision_function(test_blocks)))
                if result.weighting is not None:
                    runs[-1]["weight"] = result.weighting.beta
            acc = [r["accuracy"] for r in runs]
            loss = [r["log_loss"] for r in runs]
            rows.append(
                {
                    "data": name,
                    "protect": protect,
                    "epsilon": epsilon,
                    "accuracy_mean": float(np.mean(acc)),
                    "accuracy_worst": min(acc),
                    "log_loss_mean": float(np.mean(loss)),
                    "log_loss_worst": max(loss),
                    "seeds": seeds,
                }
            )
            if protect != "all":  # the label holder's weight of the passive scores
                rows[-1]["weights"] = [r["weight"] for r in runs]
            if protect == "all":
                rows[-1]["central_dp"] = central_dp(
                    blocks, y, test_blocks, y_test, epsilon, delta, seeds
                )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def protocol_run(name, blocks, y, test_blocks, y_test, delta, split=None) -> dict:
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical

    split = split or SPLITS[name]
    setup = SecureSetup(blocks[0].shape[0], split, 1.0, delta, protect="all")
    start = time.perf_counter()
    secure = train_secure_vertical(blocks, y, setup, seed=0, backend="ckks")
    seconds = time.perf_counter() - start
    plain = train_secure_vertical(blocks, y, setup, seed=0, backend="plain")
    difference = max(
        float(np.max(np.abs(a - b))) for a, b in zip(secure.blocks, plain.blocks, strict=True)
    )
    out = {
        "data": name,
        "split": list(split),
        "epsilon": 1.0,
        "protect": "all",
        "seconds_end_to_end": seconds,
        **secure.cost_summary(),
        "max_weight_difference_from_plain": difference,
        **_metrics(y_test, secure.decision_function(test_blocks)),
    }
    print(json.dumps(out), flush=True)
    return out


def more_parties(names, data_dir, epsilons, seeds, delta, protocol: bool) -> dict:
    """Two parties against three holding the same columns (plaintext backend, over seeds),
    and one CKKS run of three parties on a9a."""
    from dpfed.data import load_dataset, vertical_split
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical

    rows, runs = [], []
    for name in names:
        ds = load_dataset(name, data_dir)
        for split in (SPLITS[name], THREE_PARTY_SPLITS[name]):
            blocks = vertical_split(ds.X_train, list(split))
            test_blocks = vertical_split(ds.X_test, list(split))
            for protect in ("all", "passive"):
                for epsilon in epsilons:
                    metrics = []
                    for seed in range(seeds):
                        setup = SecureSetup(
                            blocks[0].shape[0], split, epsilon, delta, protect=protect
                        )
                        result = train_secure_vertical(
                            blocks, ds.y_train, setup, seed=seed, backend="plain"
                        )
                        metrics.append(_metrics(ds.y_test, result.decision_function(test_blocks)))
                    rows.append(
                        {
                            "data": name,
                            "split": list(split),
                            "protect": protect,
                            "epsilon": epsilon,
                            "seeds": seeds,
                            "accuracy_mean": float(np.mean([m["accuracy"] for m in metrics])),
                            "log_loss_mean": float(np.mean([m["log_loss"] for m in metrics])),
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
            if protocol and name == "a9a" and len(split) == 3:
                runs.append(
                    protocol_run(name, blocks, ds.y_train, test_blocks, ds.y_test, delta, split)
                )
    return {"frontier": rows, "protocol": runs}


def plot(rows: list[dict], refs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["data"] for r in rows})
    # diffprivlib's central DP model, where bench_diffprivlib.py has measured it
    saved = HERE / "results" / "central_dp.json"
    diffprivlib = json.loads(saved.read_text())["rows"] if saved.exists() else []
    columns = min(2, len(names))
    grid = (len(names) + columns - 1) // columns
    fig, axes = plt.subplots(grid, columns, figsize=(6.5 * columns, 4.2 * grid), squeeze=False)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names, strict=False):
        shown = [refs[name]["label_holder_alone"]["log_loss"]]
        below: list[float] = []  # a reference below every curve is shown, one above is cut
        for protect, marker in (("all", "o"), ("parties", "D"), ("passive", "s")):
            sel = [r for r in rows if r["data"] == name and r["protect"] == protect]
            ax.plot(
                [r["epsilon"] for r in sel],
                [r["log_loss_mean"] for r in sel],
                marker=marker,
                label=f"secure, protect={protect}",
            )
            shown += [r["log_loss_mean"] for r in sel]
            if protect == "all" and all("central_dp" in r for r in sel):
                ax.plot(
                    [r["epsilon"] for r in sel],
                    [r["central_dp"]["log_loss"] for r in sel],
                    marker="^",
                    linestyle="--",
                    label="central DP (output perturbation, tuned)",
                )
                measured = [r for r in diffprivlib if r["data"] == name]
                if measured:
                    ax.plot(
                        [r["epsilon"] for r in measured],
                        [r["diffprivlib"]["log_loss_mean"] for r in measured],
                        marker="v",
                        linestyle="-.",
                        label="central DP (diffprivlib, tuned)",
                    )
                    below += [r["diffprivlib"]["log_loss_mean"] for r in measured]
        for ref, style in (("label_holder_alone", "--"), ("central_non_private", ":")):
            ax.axhline(
                refs[name][ref]["log_loss"],
                linestyle=style,
                color="grey",
                label=ref.replace("_", " "),
            )
        epsilons = sorted({r["epsilon"] for r in rows})
        ax.set_xscale("log")
        ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
        ax.minorticks_off()
        ax.set_xlabel("epsilon (delta 1e-5)")
        ax.set_ylabel("test log loss")
        ax.set_title(f"{name} (constant predictor: {refs[name]['constant']['log_loss']:.3f})")
        low = min([*shown, *below, refs[name]["central_non_private"]["log_loss"]])
        high = max(shown)
        margin = 0.08 * (high - low)
        ax.set_ylim(low - margin, high + margin)  # a central DP loss far above is cut off
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("DPFED_DATA"))
    p.add_argument("--data", nargs="+", default=list(DEFAULT_DATA), choices=sorted(SPLITS))
    p.add_argument(
        "--protocol-data",
        nargs="+",
        default=["a9a", "adult"],
        choices=sorted(SPLITS),
        help="data sets of the CKKS runs",
    )
    p.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 8.0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--no-protocol", action="store_true", help="skip the CKKS runs")
    p.add_argument(
        "--parties", action="store_true", help="also measure three parties against two (section 3)"
    )
    p.add_argument(
        "--parties-only",
        action="store_true",
        help="measure section 3 alone and keep the saved sections 1-2",
    )
    p.add_argument(
        "--replot", action="store_true", help="only redraw --plot from the results in --out"
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the saved frontier and references of the data sets not run",
    )
    p.add_argument("--out", default=str(HERE / "results" / "secure_vertical.json"))
    p.add_argument(
        "--plot",
        default=str(HERE.parent / "docs" / "img" / "secure_frontier.png"),
        help="the figure to draw (empty: none)",
    )
    args = p.parse_args(argv)
    if args.replot:
        saved = json.loads(Path(args.out).read_text())
        plot(saved["frontier"], saved["references"], Path(args.plot))
        return 0
    from dpfed.data import load_dataset, vertical_split

    parties_names = [n for n in args.data if n in THREE_PARTY_SPLITS]
    if args.parties_only:
        saved = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
        kept = saved.get("more_parties", {}).get("protocol", [])
        saved["more_parties"] = more_parties(
            parties_names,
            args.data_dir,
            args.epsilons,
            args.seeds,
            args.delta,
            not args.no_protocol,
        )
        if args.no_protocol:  # keep the saved CKKS run
            saved["more_parties"]["protocol"] = kept
        Path(args.out).write_text(json.dumps(saved, indent=2))
        print(f"wrote {args.out}")
        return 0
    rows, refs, runs = [], {}, []
    for name in args.data:
        ds = load_dataset(name, args.data_dir)
        blocks = vertical_split(ds.X_train, list(SPLITS[name]))
        test_blocks = vertical_split(ds.X_test, list(SPLITS[name]))
        refs[name] = references(blocks, ds.y_train, test_blocks, ds.y_test)
        print(json.dumps({name: refs[name]}), flush=True)
        rows += frontier(
            name, blocks, ds.y_train, test_blocks, ds.y_test, args.epsilons, args.seeds, args.delta
        )
        if not args.no_protocol and name in args.protocol_data:
            runs.append(protocol_run(name, blocks, ds.y_train, test_blocks, ds.y_test, args.delta))
    if args.no_protocol and Path(args.out).exists():  # keep the saved CKKS runs
        runs = json.loads(Path(args.out).read_text()).get("protocol", [])
    saved = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    if args.keep and saved:  # and the other data sets' figures
        rows = [r for r in saved["frontier"] if r["data"] not in args.data] + rows
        refs = {k: v for k, v in saved["references"].items() if k not in args.data} | refs
    payload = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "load_average": os.getloadavg(),
        "references": refs,
        "frontier": rows,
        "protocol": runs,
    }
    if args.parties:
        payload["more_parties"] = more_parties(
            parties_names,
            args.data_dir,
            args.epsilons,
            args.seeds,
            args.delta,
            not args.no_protocol,
        )
        if args.no_protocol and "more_parties" in saved:  # keep the saved CKKS run
            payload["more_parties"]["protocol"] = saved["more_parties"]["protocol"]
    elif args.keep and "more_parties" in saved:
        payload["more_parties"] = saved["more_parties"]
    Path(args.out).write_text(json.dumps(payload, indent=2))
    if args.plot:
        plot(rows, refs, Path(args.plot))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
