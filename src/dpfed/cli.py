"""The ``dpfed`` command.

Exit status: 0 on success, 2 on bad input (the message names the value), 1 on other errors.
Outputs are written only after a run succeeded, atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from dpfed._cli_common import parse_float, parse_int, print_result
from dpfed._validation import DpfedInputError

DEMO_SPLIT = (10, 10, 10)


# -- train vertical ---------------------------------------------------------------------------
def _add_train_vertical(sub) -> None:
    p = sub.add_parser(
        "vertical",
        help="vertically partitioned learning by (DP) ADMM sharing",
        description="Train a linear model on column blocks held by different parties.",
    )
    p.add_argument("--data", required=True, help="data set name (see --list) or LIBSVM file")
    p.add_argument("--test", help="LIBSVM test file (with a file given to --data)")
    p.add_argument("--data-dir", help="folder of named data sets (default: $DPFED_DATA)")
    p.add_argument(
        "--split", required=True, help="columns per party, label holder first, e.g. 66,57"
    )
    p.add_argument(
        "--loss", default="logistic", choices=["logistic", "squared", "smoothed_hinge", "sigmoid"]
    )
    p.add_argument("--regularizer", default="l2", choices=["l2", "l1", "elasticnet"])
    p.add_argument(
        "--lam",
        type=parse_float,
        default=1e-4,
        help="regularisation weight of the averaged objective",
    )
    p.add_argument("--rho", type=parse_float, help="ADMM penalty (summed-loss form)")
    p.add_argument("--iterations", type=parse_int, required=True)
    p.add_argument(
        "--mechanism", default="none", choices=["none", "paper", "sound"],
        help="paper: the paper's noise, whose epsilon formula is reported but not certified",
    )
    p.add_argument("--epsilon", type=parse_float, help="target total epsilon")
    p.add_argument("--delta", type=parse_float, help="target total delta")
    p.add_argument(
        "--noise-sigma",
        type=parse_float,
        help="paper: noise sigma; sound: per-round noise multiplier",
    )
    p.add_argument("--accountant", default="pld", choices=["pld", "rdp"])
    p.add_argument(
        "--protect-label-holder",
        action="store_true",
        help="sound: also protect the label holder's rows and labels",
    )
    p.add_argument(
        "--adaptive-rho",
        dest="adaptive_rho",
        action="store_true",
        default=None,
        help="residual balancing (default: on without noise)",
    )
    p.add_argument("--no-adaptive-rho", dest="adaptive_rho", action="store_false")
    p.add_argument(
        "--tol",
        type=parse_float,
        nargs=2,
        metavar=("ABS", "REL"),
        help="stop once the residuals fall below these tolerances",
    )
    p.add_argument("--seed", type=parse_int)
    p.add_argument(
        "--baselines",
        action="store_true",
        help="also fit local-only and centralised scikit-learn models",
    )
    p.add_argument("--out", required=True, help="result JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_train_vertical)


def _load_blocks(args):
    from dpfed.data import load_dataset, parse_split, vertical_split

    if args.test and not os.path.isfile(args.data):
        raise DpfedInputError(
            f"--test goes with a LIBSVM file given to --data. Found --data {args.data!r}."
        )
    dataset = load_dataset(args.data, args.data_dir, test=args.test)
    split = parse_split(args.split)
    blocks = vertical_split(dataset.X_train, split)
    test_blocks = vertical_split(dataset.X_test, split) if dataset.X_test is not None else None
    return dataset, split, blocks, test_blocks


def _cmd_train_vertical(args) -> int:
    from dpfed._io import write_json_atomic
    from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

    config = VerticalConfig(
        loss=args.loss,
        regularizer=args.regularizer,
        lam=args.lam,
        rho=args.rho,
        iterations=args.iterations,
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        delta=args.delta,
        noise_sigma=args.noise_sigma,
        accountant=args.accountant,
        seed=args.seed,
        adaptive_rho=args.adaptive_rho,
        tol=tuple(args.tol) if args.tol else None,
        protect_label_holder=args.protect_label_holder,
    ).validated()
    dataset, split, blocks, test_blocks = _load_blocks(args)
    result = train_vertical(
        blocks,
        dataset.y_train,
        config,
        test_blocks=test_blocks,
        test_labels=dataset.y_test,
        progress=not args.quiet,
    )
    payload = result.to_json()
    payload["data"] = {
        "name": dataset.name,
        "source": dataset.source,
        "split": split,
        "n_train": int(blocks[0].shape[0]),
        "n_test": int(test_blocks[0].shape[0]) if test_blocks else 0,
    }
    payload["preprocessing"] = dataset.preprocessing
    if args.baselines:
        payload["baselines"] = _baselines(
            blocks, dataset.y_train, test_blocks, dataset.y_test, args.lam
        )
    write_json_atomic(args.out, payload)
    print_result(payload, args.out)
    return 0


def _baselines(blocks, y, test_blocks, y_test, lam) -> dict:
    from dpfed.estimators.baselines import fit_centralized, fit_local_only

    out = {}
    for name, fit in (("local_only", fit_local_only), ("centralized", fit_centralized)):
        res = fit(blocks, y, lam=lam, test_blocks=test_blocks, test_labels=y_test)
        out[name] = {k: v for k, v in res.items() if k != "coef"}
    return out


# -- privacy ----------------------------------------------------------------------------------
def _add_privacy(sub) -> None:
    p = sub.add_parser("privacy", help="privacy accounting for Gaussian releases")
    psub = p.add_subparsers(dest="privacy_command", required=True)
    e = psub.add_parser("epsilon", help="epsilon of T Gaussian releases")
    e.add_argument("--noise-multiplier", type=parse_float, required=True)
    e.add_argument("--steps", type=parse_int, required=True)
    e.add_argument("--delta", type=parse_float, required=True)
    e.add_argument(
        "--accountant", default="pld", choices=["pld", "rdp", "advanced", "basic", "moments"],
        help="advanced and basic refuse noise whose per-step epsilon exceeds 1",
    )
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=_cmd_privacy_epsilon)
    c = psub.add_parser("calibrate", help="noise multiplier for a target (epsilon, delta)")
    c.add_argument("--epsilon", type=parse_float, required=True)
    c.add_argument("--delta", type=parse_float, required=True)
    c.add_argument("--steps", type=parse_int, required=True)
    c.add_argument(
        "--accountant", default="pld", choices=["pld", "rdp", "advanced", "basic", "moments"],
        help="advanced and basic refuse a target that needs a per-step epsilon above 1",
    )
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_cmd_privacy_calibrate)
    a = psub.add_parser(
        "design-alpha",
        help="fit L_acc(alpha) to measured losses and choose alpha (paper 001, section V)",
    )
    a.add_argument("--alphas", required=True, help="measured alphas, comma-separated")
    a.add_argument("--losses", required=True, help="the losses at those alphas")
    a.add_argument(
        "--weights", default="0.02,6,9,1", help="w1..w4 of U(alpha) = w1 ln(w2/(w3 a + w4 a^2))"
    )
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=_cmd_privacy_design_alpha)


def _cmd_privacy_epsilon(args) -> int:
    from dpfed.privacy.accounting import gaussian_epsilon

    eps = gaussian_epsilon(
        args.noise_multiplier, args.steps, args.delta, accountant=args.accountant
    )
    if args.json:
        print(
            json.dumps(
                {
                    "noise_multiplier": args.noise_multiplier,
                    "steps": args.steps,
                    "delta": args.delta,
                    "accountant": args.accountant,
                    "epsilon": eps,
                }
            )
        )
    print(repr(float(eps)))
    return 0


def _cmd_privacy_calibrate(args) -> int:
    from dpfed.privacy.accounting import calibrate_noise_multiplier, gaussian_epsilon

    z = calibrate_noise_multiplier(args.epsilon, args.delta, args.steps, accountant=args.accountant)
    if args.json:
        spent = gaussian_epsilon(z, args.steps, args.delta, accountant=args.accountant)
        print(
            json.dumps(
                {
                    "epsilon": args.epsilon,
                    "delta": args.delta,
                    "steps": args.steps,
                    "accountant": args.accountant,
                    "noise_multiplier": z,
                    "epsilon_spent": spent,
                }
            )
        )
    print(repr(float(z)))
    return 0


def _numbers(name: str, text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise DpfedInputError(f"{name} must be comma-separated numbers. Found {text!r}.") from None


def _cmd_privacy_design_alpha(args) -> int:
    from dataclasses import asdict

    from dpfed.protocols.decentralized.alpha_design import choose_alpha, fit_accuracy_loss

    alphas, losses = _numbers("--alphas", args.alphas), _numbers("--losses", args.losses)
    if len(alphas) != len(losses):
        raise DpfedInputError(
            f"--alphas and --losses must have the same length. Found {len(alphas)} and "
            f"{len(losses)}."
        )
    weights = _numbers("--weights", args.weights)
    curve = fit_accuracy_loss(alphas, losses)
    choice = choose_alpha(curve, w=weights)
    if args.json:
        print(json.dumps({"curve": asdict(curve), "choice": asdict(choice)}))
        return 0
    print(f"L_acc(alpha) = {curve.c4:.6g} exp(-{curve.c5:.6g} alpha) + {curve.c6:.6g}")
    print(f"alpha* = {choice.alpha:.6g}: loss {choice.loss:.6g}, utility {choice.utility:.6g}")
    if choice.at_boundary:
        print("note: alpha* is an end of the search range, so the range decides it")
    return 0


# -- reproduce --------------------------------------------------------------------------------
def _add_reproduce(sub) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's experiments")
    psub = p.add_subparsers(dest="reproduce_command", required=True)
    v = psub.add_parser("vertical", help="figures 1-3 of DP ADMM sharing, and the DP frontier")
    v.add_argument("--out", required=True, help="output folder")
    v.add_argument("--data-dir", help="folder of named data sets (default: $DPFED_DATA)")
    v.add_argument("--quick", action="store_true", help="a small, fast configuration")
    v.add_argument("--quiet", action="store_true")
    v.set_defaults(func=_cmd_reproduce_vertical)
    d = psub.add_parser(
        "decentralized",
        help="paper 001 (DVP/PVP decentralized ADMM on Adult): figures 3-5 and more",
    )
    c = psub.add_parser(
        "consensus", help="DP consensus ADMM (paper 002) on Adult: accuracy vs epsilon"
    )
    for q, func in ((d, _cmd_reproduce_decentralized), (c, _cmd_reproduce_consensus)):
        q.add_argument("--out", required=True, help="output folder")
        q.add_argument("--data-dir", help="folder holding adult/ (default: $DPFED_DATA)")
        q.add_argument("--quick", action="store_true", help="a small, fast configuration")
        q.add_argument("--quiet", action="store_true")
        q.set_defaults(func=func)
    from dpfed import _cli_bayes, _cli_dca

    _cli_bayes.add_reproduce_bayes_linreg(psub)
    _cli_dca.add_reproduce_dca_scaling(psub)


def _cmd_reproduce_decentralized(args) -> int:
    from dpfed.experiments.decentralized import run_decentralized_reproduction

    summary = run_decentralized_reproduction(
        args.out, data_dir=args.data_dir, quick=args.quick, progress=not args.quiet
    )
    print(json.dumps(summary, indent=2, default=str))
    return 0


def _cmd_reproduce_consensus(args) -> int:
    from dpfed.experiments.consensus import run_consensus_reproduction

    summary = run_consensus_reproduction(
        args.out, data_dir=args.data_dir, quick=args.quick, progress=not args.quiet
    )
    print(json.dumps(summary, indent=2, default=str))
    return 0


def _cmd_reproduce_vertical(args) -> int:
    from dpfed.experiments.vertical import run_vertical_reproduction

    summary = run_vertical_reproduction(
        args.out, data_dir=args.data_dir, quick=args.quick, progress=not args.quiet
    )
    print(json.dumps(summary, indent=2, default=str))
    return 0


# -- demo -------------------------------------------------------------------------------------
def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="a 3-party vertical job on scikit-learn's breast cancer data")
    p.add_argument("--out", help="also write the results as JSON")
    p.add_argument("--seed", type=parse_int, default=0)
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args) -> int:
    from dpfed._io import write_json_atomic
    from dpfed.data import load_dataset, vertical_split
    from dpfed.estimators.baselines import fit_centralized, fit_local_only
    from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

    started = time.perf_counter()
    data = load_dataset("breast_cancer")
    blocks = vertical_split(data.X_train, DEMO_SPLIT)
    test_blocks = vertical_split(data.X_test, DEMO_SPLIT)
    # The features are scaled by generous declared bounds, so each spans only part of
    # [-1, 1]: the best 5-fold cross-validated log loss of the centralised model on the
    # training rows over lam in {1e-2, ..., 1e-6} is at 1e-5.
    lam = 1e-5
    names = ["clinic", "lab", "imaging"]
    print(
        "dpfed demo: 3 parties hold different columns of the same "
        f"{blocks[0].shape[0]} patients (scikit-learn's breast cancer data)"
    )
    print(
        f"  {names[0]} holds the diagnosis and {DEMO_SPLIT[0]} features; {names[1]} and "
        f"{names[2]} hold {DEMO_SPLIT[1]} and {DEMO_SPLIT[2]}; {test_blocks[0].shape[0]} "
        "test rows"
    )
    runs = {
        "ADMM sharing, no noise": VerticalConfig(lam=lam, iterations=20, seed=args.seed),
        "ADMM sharing, sound DP (eps=8)": VerticalConfig(
            lam=lam, mechanism="sound", epsilon=8.0, delta=1e-5, seed=args.seed
        ),
    }
    rows, payload = [], {"runs": {}, "baselines": {}, "preprocessing": data.preprocessing}
    for label, cfg in runs.items():
        res = train_vertical(
            blocks, data.y_train, cfg, names=names, test_blocks=test_blocks, test_labels=data.y_test
        )
        payload["runs"][label] = res.to_json()
        rows.append((label, res.final["test_log_loss"], res.final["test_accuracy"], res.privacy))
    for label, fit in (
        ("local only (clinic's features)", fit_local_only),
        ("centralised (all features pooled)", fit_centralized),
    ):
        res = fit(blocks, data.y_train, lam=lam, test_blocks=test_blocks, test_labels=data.y_test)
        payload["baselines"][label] = {k: v for k, v in res.items() if k != "coef"}
        rows.append((label, res["test_log_loss"], res["test_accuracy"], None))
    print()
    print(f"  {'model':<36} {'test log loss':>13} {'accuracy':>9}  privacy spent")
    for label, loss, acc, privacy in rows:
        if privacy is None:
            spent = "no protocol (reference)"
        elif privacy["mechanism"] == "none":
            spent = "none protected (exact messages)"
        elif privacy.get("epsilon") is None:
            spent = "epsilon not certified"
        else:
            spent = (
                f"epsilon={privacy['epsilon']:.3g}, delta={privacy['delta']:g} "
                f"({privacy['accountant']})"
            )
        print(f"  {label:<36} {loss:>13.4f} {acc:>9.3f}  {spent}")
    print()
    for note in rows[1][3]["notes"]:
        print(f"  note: {note}")
    print(f"  finished in {time.perf_counter() - started:.1f} s")
    if args.out:
        write_json_atomic(args.out, payload)
        print(f"  wrote {args.out}")
    return 0


# -- entry point ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpfed", description="Differentially private learning across parties."
    )
    from dpfed import __version__

    parser.add_argument("--version", action="version", version=f"dpfed {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    train = sub.add_parser("train", help="train a model by a protocol")
    tsub = train.add_subparsers(dest="protocol", required=True)
    _add_train_vertical(tsub)
    from dpfed import _cli_horizontal

    _cli_horizontal.add_train_consensus(tsub)
    _cli_horizontal.add_train_decentralized(tsub)
    from dpfed import _cli_bayes

    _cli_bayes.add_train_bayes_linreg(tsub)
    _add_privacy(sub)
    _add_reproduce(sub)
    from dpfed import _cli_net

    _cli_net.add_certs(sub)
    _cli_net.add_party(sub)
    _cli_net.add_run(sub)
    _cli_net.add_budget(sub)
    from dpfed import _cli_dca

    _cli_dca.add_dca(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DpfedInputError as exc:
        print(f"dpfed: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpfed: interrupted; no output was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
