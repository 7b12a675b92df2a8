r"""A re-implementation of the Python prototype of ADMM sharing of Hu et al. (AAAI 2020).

The paper (section "Experiments") says: "A prototype system is implemented in Python ...
we use optimization library from scipy to handle the optimization subproblems. We apply
L-BFGS-B algorithm to do the x update in (6) and entry-wise optimization for z in (7)."
This module does exactly that, so that :mod:`bench_vertical` can compare dpfed's
factorised / vectorised updates with the speed of the original approach:

* x-update (eq. 6), for each party ``m`` in turn (the parties run in parallel in the
  paper; the prototype is timed serially, as dpfed's in-process runtime is),
  ``scipy.optimize.minimize(method="L-BFGS-B")`` with the analytic gradient on

  .. math::

      f_m(x) = \frac{\lambda_s}{2}\|x\|^2 + \langle y^t, D_m x\rangle
               + \frac{\rho}{2}\|v_m + D_m x - z^t\|^2,
      \qquad v_m = \sum_{k \ne m} D_k x_k^t,

  warm-started at :math:`x_m^t` (scipy's default tolerances unless ``lbfgs_options``).
* z-update (eq. 7), one ``scipy.optimize.minimize_scalar`` (Brent) per sample, in a Python
  loop over the ``N`` samples:
  :math:`z_i = \arg\min_z \log(1 + e^{-l_i z}) - y_i z + \frac{\rho}{2}(s_i - z)^2`,
  :math:`s = \sum_m D_m x_m^{t+1}`, :math:`l_i` the label.
* dual update :math:`y^{t+1} = y^t + \rho (s - z^{t+1})`.

Everything starts at 0, as in the paper. The scaling is dpfed's summed-loss form: the loss
is summed over samples and :math:`\lambda_s = N \lambda` for the averaged objective
:math:`\frac1N\sum_i \log(1 + e^{-l_i s_i}) + \lambda \sum_m \tfrac12\|x_m\|^2`, so the
iterates are those of ``train_vertical`` with the same fixed ``rho`` (``adaptive_rho=False``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize, minimize_scalar


def _matvec(block, x: np.ndarray) -> np.ndarray:
    return np.asarray(block @ x).reshape(-1)


def _rmatvec(block, v: np.ndarray) -> np.ndarray:
    return np.asarray(block.T @ v).reshape(-1)


def x_update_lbfgs(
    block,
    others: np.ndarray,
    z: np.ndarray,
    dual: np.ndarray,
    *,
    reg_weight: float,
    rho: float,
    x0: np.ndarray,
    options: dict | None = None,
) -> np.ndarray:
    """One party's x-update (eq. 6) by L-BFGS-B.

    Parameters
    ----------
    block : ndarray or sparse matrix, shape (N, d)
    others : ndarray, shape (N,)
        :math:`v = \\sum_{k\\ne m} D_k x_k^t`.
    z, dual : ndarray, shape (N,)
    reg_weight : float
        :math:`\\lambda_s` (summed-loss form).
    rho : float
    x0 : ndarray, shape (d,)
        Starting point (the previous iterate).
    options : dict or None
        Passed to ``scipy.optimize.minimize`` (e.g. ``ftol``, ``gtol``).

    Returns
    -------
    ndarray, shape (d,)
    """
    shift = others - z

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        dx = _matvec(block, x)
        r = shift + dx
        value = 0.5 * reg_weight * float(x @ x) + float(dual @ dx) + 0.5 * rho * float(r @ r)
        grad = reg_weight * x + _rmatvec(block, dual + rho * r)
        return value, grad

    res = minimize(fun, x0, jac=True, method="L-BFGS-B", options=options or None)
    return np.asarray(res.x, dtype=float)


def _logistic(m: float) -> float:
    """:math:`\\log(1 + e^{-m})` without overflow."""
    return max(0.0, -m) + math.log1p(math.exp(-abs(m)))


def z_update_entrywise(
    s: np.ndarray, dual: np.ndarray, labels: np.ndarray, rho: float
) -> np.ndarray:
    """The z-update (eq. 7), one ``minimize_scalar`` per sample (a Python loop).

    Parameters
    ----------
    s, dual, labels : ndarray, shape (N,)
    rho : float

    Returns
    -------
    ndarray, shape (N,)
    """
    z = np.empty_like(s)
    for i in range(s.shape[0]):
        si, yi, li = float(s[i]), float(dual[i]), float(labels[i])

        def f(zi: float, si=si, yi=yi, li=li) -> float:
            return _logistic(li * zi) - yi * zi + 0.5 * rho * (si - zi) ** 2

        z[i] = minimize_scalar(f).x
    return z


def _objective(s: np.ndarray, labels: np.ndarray, models, lam: float) -> float:
    return float(np.mean(np.logaddexp(0.0, -labels * s))) + lam * sum(
        0.5 * float(x @ x) for x in models
    )


def prototype_admm(
    blocks: Sequence,
    labels: np.ndarray,
    *,
    lam: float = 1e-4,
    rho: float = 0.25,
    iterations: int = 3,
    test_blocks: Sequence | None = None,
    test_labels: np.ndarray | None = None,
    target: float | None = None,
    max_seconds: float | None = None,
    min_iterations: int = 1,
    lbfgs_options: dict | None = None,
    callback: Callable[[dict], None] | None = None,
) -> dict:
    """Run the prototype's ADMM sharing for logistic loss and L2 regulariser.

    Parameters
    ----------
    blocks : sequence of ndarray or sparse matrix, shapes ``(N, d_m)``
        Column blocks, the label holder's first.
    labels : ndarray, shape (N,)
        In {-1, 1}.
    lam : float
        Regularisation weight of the averaged objective (``lambda_s = N * lam``).
    rho : float
        ADMM penalty of the summed form.
    iterations : int
        Maximum number of iterations.
    test_blocks, test_labels : optional
        Held-out rows, evaluated after every iteration (not timed).
    target : float or None
        Stop once the test log loss is ``<= target``.
    max_seconds : float or None
        Stop once the timed training time exceeds this (checked after each iteration).
    min_iterations : int
        Run at least this many iterations before ``target`` or ``max_seconds`` can stop.
    lbfgs_options : dict or None
        Options of the L-BFGS-B solves (default: scipy's).
    callback : callable or None
        Called with each history entry.

    Returns
    -------
    dict
        ``models`` (list of ndarrays, shapes ``(d_m,)``), ``z`` and ``dual`` (shape ``(N,)``),
        ``history``: one dict per iteration with ``iteration``, ``seconds`` (cumulative
        training time), ``x_seconds`` and ``z_seconds`` (this iteration's x- and z-update
        times), ``train_objective``, ``test_log_loss``, ``test_accuracy``.
    """
    blocks = [b.tocsr() if sp.issparse(b) else np.asarray(b, dtype=float) for b in blocks]
    labels = np.asarray(labels, dtype=float).reshape(-1)
    n = labels.shape[0]
    reg_weight = n * lam
    models = [np.zeros(b.shape[1]) for b in blocks]
    scores = [np.zeros(n) for _ in blocks]
    z = np.zeros(n)
    dual = np.zeros(n)
    history: list[dict] = []
    elapsed = 0.0
    for t in range(1, iterations + 1):
        start = time.perf_counter()
        s_old = sum(scores)
        new_models = []
        for m, block in enumerate(blocks):
            others = s_old - scores[m]
            new_models.append(
                x_update_lbfgs(
                    block,
                    others,
                    z,
                    dual,
                    reg_weight=reg_weight,
                    rho=rho,
                    x0=models[m],
                    options=lbfgs_options,
                )
            )
        models = new_models
        scores = [_matvec(b, x) for b, x in zip(blocks, models, strict=True)]
        s = sum(scores)
        mid = time.perf_counter()
        z = z_update_entrywise(s, dual, labels, rho)
        dual = dual + rho * (s - z)
        end = time.perf_counter()
        elapsed += end - start
        entry = {
            "iteration": t,
            "seconds": elapsed,
            "x_seconds": mid - start,
            "z_seconds": end - mid,
            "train_objective": _objective(s, labels, models, lam),
            "test_log_loss": None,
            "test_accuracy": None,
        }
        if test_blocks is not None and test_labels is not None:
            yt = np.asarray(test_labels, dtype=float).reshape(-1)
            st = sum(_matvec(b, x) for b, x in zip(test_blocks, models, strict=True))
            entry["test_log_loss"] = float(np.mean(np.logaddexp(0.0, -yt * st)))
            entry["test_accuracy"] = float(np.mean(np.where(st > 0, 1.0, -1.0) == yt))
        history.append(entry)
        if callback is not None:
            callback(entry)
        if t < min_iterations:
            continue
        loss = entry["test_log_loss"]
        if target is not None and loss is not None and loss <= target:
            break
        if max_seconds is not None and elapsed >= max_seconds:
            break
    return {"models": models, "z": z, "dual": dual, "history": history}
