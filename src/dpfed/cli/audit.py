"""``dpfed audit``: measure a mechanism's privacy from the outside (an epsilon lower bound)."""

from __future__ import annotations

import argparse

from dpfed._io import write_json_atomic
from dpfed.audit.auditors import AUDITORS, BROKEN
from dpfed.audit.run import run_audit
from dpfed.parameters import parse_float, parse_int
from dpfed.runtime.progress import progress_bar


def configure_audit(p: argparse.ArgumentParser) -> None:
    """``dpfed audit``."""
    p.add_argument("--mechanism", required=True, choices=sorted(AUDITORS))
    p.add_argument("--epsilon", type=parse_float, default=1.0,
                   help="the target the mechanism is calibrated to (default 1)")
    p.add_argument("--delta", type=parse_float, default=1e-5, help="(default 1e-5)")
    p.add_argument("--runs", type=parse_int, default=1000,
                   help="runs on each neighbouring data set (default 1000)")
    p.add_argument("--seed", type=parse_int, default=0, help="seed of the runs' noise")
    p.add_argument("--broken", choices=BROKEN, default=None,
                   help="audit a deliberately broken configuration: the attacker knows the "
                        "noise, or the noise is calibrated to a sensitivity --factor times "
                        "too small")
    p.add_argument("--factor", type=parse_float, default=100.0,
                   help="how much --broken sensitivity understates it (default 100)")
    p.add_argument("--out", required=True, help="audit JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_audit_command)


def run_audit_command(args: argparse.Namespace) -> int:
    bar = progress_bar(args.runs, not args.quiet, desc=f"audit {args.mechanism}")
    try:
        result = run_audit(
            args.mechanism, epsilon=args.epsilon, delta=args.delta, runs=args.runs,
            seed=args.seed, broken=args.broken, factor=args.factor,
            progress=None if bar is None else (lambda done: bar.update(1)),
        )
    finally:
        if bar is not None:
            bar.close()
    write_json_atomic(args.out, result)
    realised = result["realised_epsilon"]
    print(f"{result['mechanism']}{' (broken: ' + args.broken + ')' if args.broken else ''}: "
          f"claimed epsilon {result['claimed_epsilon']:.4g} at delta {result['delta']:g}; "
          f"audited lower bound {result['epsilon_lower_bound']:.4g} "
          f"({result['confidence']:.0%} confidence, {result['runs']} runs per neighbour, "
          f"TPR {result['tpr']:.3f} at FPR {result['fpr']:.3f})"
          + (f"; analytic epsilon at the realised sensitivity {realised:.4g}"
             if realised is not None else ""))
    if result["epsilon_lower_bound"] > result["claimed_epsilon"]:
        print("VIOLATION: the audited lower bound exceeds the claimed epsilon")
    print(f"wrote {args.out}")
    return 0
