"""``dpfed privacy epsilon|calibrate|design-alpha``: accounting without a run."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from dpfed._validation import DpfedInputError
from dpfed.parameters import parse_float, parse_int
from dpfed.privacy.accounting import ACCOUNTANTS, calibrate_noise_multiplier, gaussian_epsilon
from dpfed.protocols.decentralized.alpha_design import choose_alpha, fit_accuracy_loss


def configure_privacy(p: argparse.ArgumentParser) -> None:
    """``dpfed privacy``: its ``epsilon``, ``calibrate`` and ``design-alpha`` subcommands."""
    psub = p.add_subparsers(dest="privacy_command", required=True)
    e = psub.add_parser("epsilon", help="epsilon of T Gaussian releases")
    e.add_argument("--noise-multiplier", type=parse_float, required=True)
    e.add_argument("--steps", type=parse_int, required=True)
    e.add_argument("--delta", type=parse_float, required=True)
    e.add_argument(
        "--accountant",
        default="pld",
        choices=ACCOUNTANTS,
        help="advanced and basic refuse noise whose per-step epsilon exceeds 1",
    )
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=run_privacy_epsilon)
    c = psub.add_parser("calibrate", help="noise multiplier for a target (epsilon, delta)")
    c.add_argument("--epsilon", type=parse_float, required=True)
    c.add_argument("--delta", type=parse_float, required=True)
    c.add_argument("--steps", type=parse_int, required=True)
    c.add_argument(
        "--accountant",
        default="pld",
        choices=ACCOUNTANTS,
        help="advanced and basic refuse a target that needs a per-step epsilon above 1",
    )
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run_privacy_calibrate)
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
    a.set_defaults(func=run_privacy_design_alpha)


def run_privacy_epsilon(args: argparse.Namespace) -> int:
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
        return 0
    print(repr(float(eps)))
    return 0


def run_privacy_calibrate(args: argparse.Namespace) -> int:
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
        return 0
    print(repr(float(z)))
    return 0


def numbers(name: str, text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise DpfedInputError(f"{name} must be comma-separated numbers. Found {text!r}.") from None


def run_privacy_design_alpha(args: argparse.Namespace) -> int:
    alphas, losses = numbers("--alphas", args.alphas), numbers("--losses", args.losses)
    if len(alphas) != len(losses):
        raise DpfedInputError(
            f"--alphas and --losses must have the same length. Found {len(alphas)} and "
            f"{len(losses)}."
        )
    weights = numbers("--weights", args.weights)
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
