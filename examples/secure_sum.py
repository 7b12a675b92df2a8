"""A differentially private secure sum (DCA) in one process, and a DP Bayesian regression on it.

``N`` clients each hold a vector of norm at most ``C``; they want the sum, with Gaussian noise,
without trusting anyone to see a single vector. Every client encodes its vector in fixed
point, adds its share of the noise there, drawn exactly as a discrete Gaussian in the ring
(``noise="discrete"``; its standard deviation from ``dpfed.dca.calibration.
calibrate_dca_discrete``, so that the noise of any ``N - T - 1`` honest clients suffices for
the epsilon by the distributed discrete Gaussian's bound), and secret-shares it between ``M``
compute nodes (``dpfed.dca.secure_sum``, every party simulated
here). Some clients drop out; the nodes agree on the others and release only their noisy sum.
The script prints it against the plain sum of the same clients, the noise level, what one
compute node publishes, and the refusal when more than ``T`` clients drop out. Then it fits
DP Bayesian linear regression (``dpfed.protocols.bayes_linreg.fit_dp_linreg``, sufficient
statistics through
the same secure sum; with and without the paper's projection) on synthetic rows, one per
client, against the non-private fit.

Run it as::

    python examples/secure_sum.py
    python examples/secure_sum.py --clients 10000 --dim 100 --dropped 50 --tolerated 100
    python examples/secure_sum.py --regression-rows 0        # the secure sum only
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from dpfed import DpfedInputError
from dpfed.dca import DEFAULT_FRACTIONAL_BITS, secure_sum
from dpfed.dca.calibration import calibrate_dca, calibrate_dca_discrete
from dpfed.protocols.bayes_linreg import fit_dp_linreg, mean_absolute_error


def clipped_vectors(rng: np.random.Generator, n: int, dim: int, bound: float) -> np.ndarray:
    """``n`` random vectors of length ``dim``, each scaled to l2 norm at most ``bound``."""
    z = rng.normal(0.3, 1.0, size=(n, dim))
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    return z * np.minimum(1.0, bound / norms)


def regression(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """DP Bayesian linear regression through the secure sum against the non-private fit."""
    n, d = args.regression_rows, 5
    X = rng.uniform(-5.0, 5.0, size=(2 * n, d))  # features scaled to [-5, 5] by public bounds
    y = np.clip(X @ rng.normal(0.0, 0.3, size=d) + 1.0 + rng.normal(0.0, 0.5, 2 * n), -5, 5)
    (X_train, X_test), (y_train, y_test) = np.split(X, 2), np.split(y, 2)
    fits = {
        f"DP, {label}": fit_dp_linreg(
            X_train,
            y_train,
            epsilon=args.epsilon,
            delta=args.delta,
            mode="distributed",
            projection=projection,
            compute_nodes=args.compute_nodes,
            tolerated=args.tolerated,
            rng=args.seed,
        )
        for label, projection in (("with projection", True), ("no projection", False))
    }
    fits["non-private"] = fit_dp_linreg(X_train, y_train, mode="nonprivate")
    print(
        f"\nDP Bayesian linear regression: {n} clients with one row each ({d} features), "
        f"epsilon {args.epsilon:g}, delta {args.delta:g}, statistics by the secure sum"
    )
    for label, fit in fits.items():
        mae = mean_absolute_error(y_test, fit.predict(X_test))
        print(
            f"  {label:<20} test mean absolute error {mae:.4f}  "
            f"coef {np.array2string(fit.coef, precision=2)}"
        )
        if fit.calibration is not None:
            print(
                f"  {'':<20} epsilon accounted for its noise: "
                f"{fit.calibration.epsilon_accounted:.4g}"
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=1000, help="N")
    p.add_argument("--dim", type=int, default=10, help="D, the length of every vector")
    p.add_argument("--compute-nodes", type=int, default=5, help="M")
    p.add_argument("--tolerated", type=int, default=20, help="T, dropped or colluding clients")
    p.add_argument("--dropped", type=int, default=10, help="clients that drop out (<= T)")
    p.add_argument("--bound", type=float, default=1.0, help="C, each vector's largest norm")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--regression-rows", type=int, default=2000, help="0: no regression")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)

    values = clipped_vectors(rng, args.clients, args.dim, args.bound)
    # replacing one client's vector moves the sum by at most 2 C in l2 norm
    cal = calibrate_dca(args.epsilon, args.delta, 2 * args.bound, args.clients, args.tolerated)
    # exact ring noise: the distributed discrete Gaussian's bound asks a few per cent more
    client_std = calibrate_dca_discrete(
        args.epsilon,
        args.delta,
        2 * args.bound,
        args.clients,
        args.tolerated,
        args.dim,
        DEFAULT_FRACTIONAL_BITS,
    )
    dropped = rng.choice(args.clients, size=args.dropped, replace=False)
    result = secure_sum(
        values,
        noise_std=client_std,
        rng=args.seed,
        compute_nodes=args.compute_nodes,
        tolerated=args.tolerated,
        dropped=dropped.tolist(),
        noise="discrete",
    )
    plain = values[result.included].sum(axis=0)
    error = result.total - plain
    expected = client_std * np.sqrt(result.included.size)
    print(
        f"{args.clients} clients x {args.dim} dimensions, {args.compute_nodes} compute nodes, "
        f"T = {args.tolerated}; {result.dropped.size} clients dropped out, "
        f"{result.included.size} summed"
    )
    print(
        f"calibration (distributed discrete Gaussian, exact in the ring): epsilon "
        f"{args.epsilon:g}, delta {args.delta:g}, sensitivity {cal.l2_sensitivity:g}: each "
        f"client adds std {client_std:.4f} ({client_std / cal.client_std - 1:.1%} more than "
        f"continuous noise drawn in floating point, {cal.method}, would need)"
    )
    print(f"{'coordinate':>10} {'secure sum':>12} {'plain sum':>12} {'difference':>11}")
    for j in range(min(args.dim, 5)):
        print(f"{j:>10} {result.total[j]:>12.3f} {plain[j]:>12.3f} {error[j]:>11.3f}")
    rms = np.sqrt(np.mean(error**2))
    print(
        f"noise in the released sum: {rms:.3f} (root mean square over {args.dim} coordinates),"
        f" {expected:.3f} expected (sqrt({result.included.size}) x client std)"
    )
    print(
        f"compute node 0 published {result.node_sums[0][0]:#018x}, ... (uniformly random "
        "on its own)"
    )
    try:
        secure_sum(
            values,
            noise_std=client_std,
            rng=args.seed,
            compute_nodes=args.compute_nodes,
            tolerated=args.tolerated,
            dropped=range(args.tolerated + 1),
            noise="discrete",
        )
    except DpfedInputError as refused:
        print(f"with {args.tolerated + 1} clients dropped: refused: {refused}")
    else:
        sys.exit("error: more than T dropped clients were not refused")
    if args.regression_rows > 0:
        regression(args, rng)


if __name__ == "__main__":
    main()
