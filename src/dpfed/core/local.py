r"""Exact local updates of the sample-partitioned protocols: a regularised, linearly shifted,
proximal empirical risk, minimised by Newton's method.

Consensus ADMM (a client's update) and decentralized ADMM (a node's update, with or without the
objective perturbation of DVP) both solve, for a party holding rows :math:`X` (shape
``(B, d)``) and labels :math:`y`,

.. math::

    \min_f \; F(f) = a \sum_{i=1}^{B} \ell(x_i^\top f; y_i) + \frac{q}{2}\|f\|^2 + b^\top f
    + \frac{s}{2}\|f - c\|^2,

with loss weight :math:`a > 0`, ridge weight :math:`q \ge 0`, linear term :math:`b`, proximal
weight :math:`s \ge 0` and centre :math:`c`, and :math:`q + s > 0` (strongly convex).
Objective perturbation (DVP) needs the *exact* minimiser; Newton's method with a backtracking
line search reaches it to a gradient norm of ``tol`` (default :math:`10^{-10}`, relative to
the problem's scale), which is what the privacy analysis then rests on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from dpfed._validation import DpfedInputError
from dpfed.core.losses import Loss
from dpfed.core.rows import Matrix


class LocalSolveError(RuntimeError):
    """Newton's method did not reach its tolerance: the privacy analyses that assume the exact
    minimiser do not hold for the iterate, so it must not be released."""


@dataclass(frozen=True)
class LocalProblem:
    r"""The terms of :math:`F` besides the data (see the module docstring).

    Attributes
    ----------
    loss_weight : float or ndarray of shape (B,)
        :math:`a > 0`, or one weight per row (the loss term is then
        :math:`\sum_i a_i \ell(x_i^\top f; y_i)`).
    l2 : float
        :math:`q \ge 0`.
    linear : ndarray of shape (d,) or None
        :math:`b` (None: zero).
    prox : float
        :math:`s \ge 0`.
    center : ndarray of shape (d,) or None
        :math:`c` (None: zero).
    """

    loss_weight: float | np.ndarray
    l2: float
    linear: np.ndarray | None = None
    prox: float = 0.0
    center: np.ndarray | None = None

    def __post_init__(self) -> None:
        weight = np.asarray(self.loss_weight, dtype=float)
        if not (np.all(np.isfinite(weight)) and np.all(weight > 0)):
            raise DpfedInputError(f"loss_weight must be finite and > 0. Found {self.loss_weight}.")
        if not (
            np.isfinite(self.l2)
            and self.l2 >= 0
            and np.isfinite(self.prox)
            and self.prox >= 0
            and self.l2 + self.prox > 0
        ):
            raise DpfedInputError(
                "the local problem needs l2 >= 0, prox >= 0 and l2 + prox > 0 (strong "
                f"convexity). Found l2={self.l2}, prox={self.prox}."
            )


@dataclass(frozen=True)
class LocalSolution:
    """The minimiser, Newton iterations used and the final gradient norm."""

    x: np.ndarray
    iterations: int
    gradient_norm: float


def _terms(
    X: Matrix, y: np.ndarray, loss: Loss, problem: LocalProblem, f: np.ndarray
) -> list[float]:
    z = np.asarray(X @ f).reshape(-1)
    terms = [float(np.sum(problem.loss_weight * loss.value(z, y))), 0.5 * problem.l2 * float(f @ f)]
    if problem.linear is not None:
        terms.append(float(problem.linear @ f))
    if problem.prox:
        diff = f if problem.center is None else f - problem.center
        terms.append(0.5 * problem.prox * float(diff @ diff))
    return terms


def local_objective(
    X: Matrix, y: np.ndarray, loss: Loss, problem: LocalProblem, f: np.ndarray
) -> float:
    """:math:`F(f)`."""
    return sum(_terms(X, y, loss, problem, f))


def _gradient(
    X: Matrix, y: np.ndarray, loss: Loss, p: LocalProblem, f: np.ndarray, z: np.ndarray
) -> np.ndarray:
    g = np.asarray(X.T @ (p.loss_weight * loss.derivative(z, y))).reshape(-1) + p.l2 * f
    if p.linear is not None:
        g = g + p.linear
    if p.prox:
        g = g + p.prox * (f if p.center is None else f - p.center)
    return g


def solve_local(
    X: Matrix,
    y: np.ndarray,
    loss: Loss,
    problem: LocalProblem,
    *,
    x0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iterations: int = 100,
) -> LocalSolution:
    r"""Minimise :math:`F` by Newton's method with Armijo backtracking.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (B, d)
    y : ndarray, shape (B,)
    loss : Loss
        Needs ``second_derivative`` (logistic, smoothed hinge, squared, ...).
    problem : LocalProblem
    x0 : ndarray of shape (d,), optional
        Starting point (default zeros); a warm start saves iterations, not accuracy.
    tol : float
        Stop when :math:`\|\nabla F\| \le \mathrm{tol} \cdot \max(1, \sum_i a_i)`.
    max_iterations : int

    Returns
    -------
    LocalSolution

    Raises
    ------
    LocalSolveError
        If the tolerance is not reached within ``max_iterations``.
    """
    d = X.shape[1]
    f = np.zeros(d) if x0 is None else np.array(x0, dtype=float)
    y = np.asarray(y, dtype=float)
    scale = max(1.0, float(np.sum(np.broadcast_to(problem.loss_weight, (X.shape[0],)))))
    ridge = problem.l2 + problem.prox
    z = np.asarray(X @ f).reshape(-1)
    terms = _terms(X, y, loss, problem, f)
    value = sum(terms)
    g = _gradient(X, y, loss, problem, f, z)
    gnorm = float(np.linalg.norm(g))
    iterations = 0
    while gnorm > tol * scale and iterations < max_iterations:
        curvature = problem.loss_weight * loss.second_derivative(z, y)
        if hasattr(X, "multiply"):  # sparse
            H = np.asarray((X.T @ X.multiply(curvature[:, None])).todense())
        else:
            H = X.T @ (X * curvature[:, None])
        H[np.diag_indices_from(H)] += ridge
        step = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), g)
        slope = float(g @ step)
        # rounding slack: F is a sum of terms that may cancel; its value is known only to
        # about eps times the size of those terms
        slack = 16.0 * np.finfo(float).eps * (sum(abs(t) for t in terms) + abs(value))
        t, accepted = 1.0, False
        while t >= 1e-12:
            candidate = f + t * step
            candidate_terms = _terms(X, y, loss, problem, candidate)
            if sum(candidate_terms) <= value + 1e-4 * t * slope + slack:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            # below rounding, F cannot rank the points: take the Newton step if it shrinks
            # the gradient (Newton's local convergence), else stop
            candidate = f + step
            candidate_terms = _terms(X, y, loss, problem, candidate)
            z_c = np.asarray(X @ candidate).reshape(-1)
            g_c = _gradient(X, y, loss, problem, candidate, z_c)
            if float(np.linalg.norm(g_c)) >= gnorm:
                break
        f, terms = candidate, candidate_terms
        value = sum(terms)
        z = np.asarray(X @ f).reshape(-1)
        g = _gradient(X, y, loss, problem, f, z)
        gnorm = float(np.linalg.norm(g))
        iterations += 1
    if gnorm > tol * scale:
        raise LocalSolveError(
            f"Newton's method stopped after {iterations} iterations at gradient norm {gnorm:.3g}"
            f" (tolerance {tol * scale:.3g}); the update is not released."
        )
    return LocalSolution(f, iterations, gnorm)
