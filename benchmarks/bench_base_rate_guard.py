r"""What a guard against the base rate would cost the secure mode with everything protected.

Run ``python benchmarks/bench_base_rate_guard.py --help``; see ``benchmarks/README.md``.

The guard weighed for ``protect="all"`` (docs/design.md, "Secure vertical learning"): the
label holder releases a DP base rate :math:`t` (the logit of its noisy label mean), and the
released model predicts

.. math::

    P_\beta = t + \beta\,(\operatorname{clip}(a - t, \pm V) + \operatorname{clip}(b, \pm V)),

:math:`a` the label holder's federated scores (intercept included), :math:`b` the passive
party's, :math:`\beta \in [0, 1]` chosen by the Taylor bound of
:mod:`dpfed.protocols.vertical.weighting` around the constant :math:`t` from each party's noisy
statistics of its clipped part. :math:`\beta = 0` is the base-rate model, so the guarded
model's training loss is not above the constant's whenever the bounds hold: never worse than
the base rate, by construction.

This measures it before building it, optimistically: the secure rounds are trained as today
(:func:`dpfed.protocols.vertical_secure.train_secure_vertical`, plaintext backend, the same
noise as the protocol), and the guard's three further releases (the base rate, the label
holder's statistics, the passive statistics as a release of the labels) are drawn at the
rounds' multiplier without raising it, as the guard would have to. For each data set of
``bench_secure_vertical.py``, each epsilon, each clip :math:`V` and each seed: the test log loss
of the federated model as released today and of the guarded one, and the weight.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_secure_vertical import DEFAULT_DATA, SPLITS  # noqa: E402  (the same column splits)


def _shares(result, blocks) -> tuple[np.ndarray, np.ndarray]:
    """The label holder's scores (intercept included) and the passive party's."""
    from dpfed.protocols.vertical_secure.party import bounded_rows

    scaling = result.setup.row_scaling
    a = result.intercept + np.asarray(bounded_rows(blocks[0], scaling) @ result.blocks[0]).ravel()
    b = np.asarray(bounded_rows(blocks[1], scaling) @ result.blocks[1]).ravel()
    return a, b


def guarded_run(blocks, y, test_blocks, y_test, epsilon, delta, bounds, seed) -> dict:
    """One seed: the federated model's test log loss and, per clip, the guarded model's."""
    from dpfed.core.losses import get_loss, score_metrics
    from dpfed.protocols.vertical.weighting import choose_passive_weight, third_derivative_bound
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
    from dpfed.protocols.vertical_secure.weighting import (
        LIPSCHITZ,
        SMOOTHNESS,
        ScoreStatisticsRelease,
        weighting_request,
    )

    n = blocks[0].shape[0]
    setup = SecureSetup(n, tuple(b.shape[1] for b in blocks), epsilon, delta, protect="all")
    result = train_secure_vertical(blocks, y, setup, seed=seed, backend="plain")
    rng = np.random.default_rng(10_000 + seed)  # the guard's draws
    z = setup.noise_multiplier
    y01 = (np.asarray(y) > 0).astype(float)
    mean = (y01.sum() + rng.normal(0.0, z)) / n  # the label count's sensitivity is 1
    mean = min(max(mean, 1.0 / n), 1.0 - 1.0 / n)
    base = math.log(mean / (1.0 - mean))
    request = weighting_request(np.full(n, base), y01)
    a, b = _shares(result, blocks)
    a_test, b_test = _shares(result, test_blocks)
    c3 = third_derivative_bound(get_loss("logistic"))
    out = {
        "federated_log_loss": score_metrics(result.decision_function(test_blocks), y_test)[
            "test_log_loss"
        ],
        "base_rate": base,
        "guarded": {},
    }
    for bound in bounds:
        upper = []
        for scores in (a - base, b):
            release = ScoreStatisticsRelease(n, bound, LIPSCHITZ, SMOOTHNESS, z)
            exact = release.normalised(np.clip(scores, -bound, bound), request)
            upper.append(release.upper(exact + rng.normal(0.0, z, 3)))
        weight = choose_passive_weight(
            own_change=np.zeros(n), request=request, upper_bounds=upper, c3=c3
        ).weight
        guarded = base + weight * (
            np.clip(a_test - base, -bound, bound) + np.clip(b_test, -bound, bound)
        )
        out["guarded"][str(bound)] = {
            "weight": weight,
            "log_loss": score_metrics(guarded, y_test)["test_log_loss"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("DPFED_DATA"))
    p.add_argument("--data", nargs="+", default=list(DEFAULT_DATA), choices=sorted(SPLITS))
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 8.0])
    p.add_argument("--bounds", type=float, nargs="+", default=[2.0, 8.0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--out", default=str(HERE / "results" / "base_rate_guard.json"))
    args = p.parse_args(argv)
    from dpfed.core.losses import score_metrics
    from dpfed.data import load_dataset, vertical_split

    rows = []
    for name in args.data:
        ds = load_dataset(name, args.data_dir)
        blocks = vertical_split(ds.X_train, list(SPLITS[name]))
        test_blocks = vertical_split(ds.X_test, list(SPLITS[name]))
        rate = float(np.mean(ds.y_train > 0))
        constant = score_metrics(np.full(len(ds.y_test), math.log(rate / (1.0 - rate))), ds.y_test)[
            "test_log_loss"
        ]
        for epsilon in args.epsilons:
            runs = [
                guarded_run(
                    blocks, ds.y_train, test_blocks, ds.y_test, epsilon, args.delta, args.bounds, s
                )
                for s in range(args.seeds)
            ]
            row = {
                "data": name,
                "epsilon": epsilon,
                "constant_log_loss": constant,
                "federated_log_loss": float(np.mean([r["federated_log_loss"] for r in runs])),
                "guarded": {
                    key: {
                        "log_loss": float(np.mean([r["guarded"][key]["log_loss"] for r in runs])),
                        "weights": [r["guarded"][key]["weight"] for r in runs],
                    }
                    for key in runs[0]["guarded"]
                },
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    payload = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "load_average": os.getloadavg(),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(payload, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
