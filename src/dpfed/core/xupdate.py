r"""Solvers for a party's x-update in ADMM sharing.

Each party solves, for a target vector :math:`c` it can compute from what it received,

.. math::

    x^{+} = \arg\min_{x \in X} \ \lambda_s R(x) + \frac{\rho}{2} \|D x - c\|_2^2
            + \frac{\tau}{2} \|x - x_c\|_2^2 ,

which is the paper's update (6) with :math:`c = z^t - \sum_{k\ne m} D_k x_k^t - y^t/\rho`
(the linear term :math:`\langle y, Dx\rangle` completed into the square). :math:`\lambda_s` is
the regularisation weight of the summed-loss form of the objective (``N`` times the weight of
the averaged form). The optional proximal term (weight :math:`\tau`, centre :math:`x_c`)
makes the update more stable; the sound privacy mechanism uses it.

* :class:`SpectralSolver`: L2 regulariser, unconstrained or an l2 ball. Exact for any
  ``rho``: one eigendecomposition of the Gram matrix (``d x d``, or ``N x N`` when ``d > N``)
  is computed once; the ball constraint is a trust-region problem solved by bisection on the
  Lagrange multiplier.
* :class:`ProximalGradientSolver`: any regulariser with a prox (L1, elastic net) and a box or
  ball, by FISTA warm-started at the previous iterate; ``inner_iterations=1`` is the
  linearised x-update.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from dpfed.core.constraints import Ball, FeasibleSet, Unconstrained
from dpfed.core.regularizers import L2, ElasticNet, Regularizer
from dpfed.core.spectral import GramSpectrum


def _matvec_t(block: np.ndarray | sp.spmatrix, v: np.ndarray) -> np.ndarray:
    return np.asarray(block.T @ v).reshape(-1)


def _matvec(block: np.ndarray | sp.spmatrix, x: np.ndarray) -> np.ndarray:
    return np.asarray(block @ x).reshape(-1)


class LocalSolver(ABC):
    """Solver of one party's x-update; holds the factorisations it computed once."""

    def __init__(
        self,
        block: np.ndarray | sp.spmatrix,
        regularizer: Regularizer,
        reg_weight: float,
        feasible_set: FeasibleSet,
        spectrum: GramSpectrum | None = None,
    ) -> None:
        self.block = block
        self.regularizer = regularizer
        self.reg_weight = float(reg_weight)
        self.feasible_set = feasible_set
        self._spectrum = spectrum

    @property
    def spectrum(self) -> GramSpectrum:
        """The Gram spectrum, computed on first use."""
        if self._spectrum is None:
            self._spectrum = GramSpectrum(self.block)
        return self._spectrum

    @abstractmethod
    def solve(
        self,
        target: np.ndarray,
        rho: float,
        x_init: np.ndarray,
        tau: float = 0.0,
        center: np.ndarray | None = None,
    ) -> np.ndarray:
        """Return the x-update for ``target`` (shape ``(N,)``); result has shape ``(d,)``."""


class SpectralSolver(LocalSolver):
    """Exact x-update for :math:`R = \\tfrac12\\|x\\|^2` over all of R^d or an l2 ball."""

    def solve(
        self,
        target: np.ndarray,
        rho: float,
        x_init: np.ndarray,
        tau: float = 0.0,
        center: np.ndarray | None = None,
    ) -> np.ndarray:
        rhs = rho * _matvec_t(self.block, target)
        if tau > 0.0 and center is not None:
            rhs = rhs + tau * center
        base = self.reg_weight + tau
        x = self._solve_shifted(rhs, base, rho)
        radius = self.feasible_set.radius if isinstance(self.feasible_set, Ball) else np.inf
        if not np.isfinite(radius) or np.linalg.norm(x) <= radius:
            return x
        # Trust region: find mu > 0 with ||x(mu)|| = radius; ||x(mu)|| decreases in mu.
        lo, hi = 0.0, max(float(np.linalg.norm(rhs)) / radius, 1e-300)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if np.linalg.norm(self._solve_shifted(rhs, base + mid, rho)) > radius:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-13 * hi:
                break
        x = self._solve_shifted(rhs, base + hi, rho)
        return self.feasible_set.project(x)

    def _solve_shifted(self, rhs: np.ndarray, shift: float, rho: float) -> np.ndarray:
        r""":math:`(\text{shift}\, I + \rho D^\top D)^{-1} \text{rhs}`, from the spectrum."""
        spec = self.spectrum
        if spec.mode == "primal":
            keep = spec.rank_mask if shift <= 0 else np.ones_like(spec.rank_mask)
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = np.where(keep, 1.0 / (shift + rho * spec.s2), 0.0)
            return cast(np.ndarray, spec.basis @ (scale * (spec.basis.T @ rhs)))
        # Woodbury on the N x N form: (aI + rho D^T D)^{-1} = (I - rho D^T (aI + rho DD^T)^{-1} D)/a
        if shift <= 0:
            # minimum-norm solution in the row space of D: x = D^T U S^-4 U^T D rhs / rho
            keep = spec.rank_mask
            w = spec.basis[:, keep].T @ _matvec(self.block, rhs)
            return _matvec_t(self.block, spec.basis[:, keep] @ (w / (rho * spec.s2[keep] ** 2)))
        w = spec.basis.T @ _matvec(self.block, rhs)
        inner = spec.basis @ (w / (shift + rho * spec.s2))
        return (rhs - rho * _matvec_t(self.block, inner)) / shift


class ProximalGradientSolver(LocalSolver):
    """FISTA on the x-update with the prox of :math:`\\lambda_s R + \\iota_X`."""

    def __init__(
        self, *args: Any, inner_iterations: int = 100, tol: float = 1e-10, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.inner_iterations = int(inner_iterations)
        self.tol = float(tol)
        self._lipschitz_gram: float | None = None

    @property
    def gram_norm(self) -> float:
        """:math:`\\|D\\|_2^2` by power iteration (cached)."""
        if self._lipschitz_gram is None:
            if self._spectrum is not None:
                self._lipschitz_gram = self._spectrum.max_eigenvalue
            else:
                from scipy.sparse.linalg import svds

                n, d = self.block.shape
                if min(n, d) <= 2:
                    dense = (
                        cast(sp.spmatrix, self.block).toarray()
                        if sp.issparse(self.block)
                        else self.block
                    )
                    self._lipschitz_gram = float(np.linalg.norm(dense, 2) ** 2)
                else:
                    s = svds(
                        sp.csr_matrix(self.block)
                        if not sp.issparse(self.block)
                        else self.block.astype(float),
                        k=1,
                        return_singular_vectors=False,
                        random_state=0,
                    )
                    self._lipschitz_gram = float(s[0] ** 2)
        return self._lipschitz_gram

    def solve(
        self,
        target: np.ndarray,
        rho: float,
        x_init: np.ndarray,
        tau: float = 0.0,
        center: np.ndarray | None = None,
    ) -> np.ndarray:
        lipschitz = rho * self.gram_norm + tau
        if lipschitz <= 0:
            return self.feasible_set.project(self.regularizer.prox(x_init, 0.0))
        step = 1.0 / lipschitz
        x_prev = x = np.asarray(x_init, dtype=float).copy()
        w = x
        momentum = 1.0
        for _ in range(self.inner_iterations):
            grad = rho * _matvec_t(self.block, _matvec(self.block, w) - target)
            if tau > 0.0 and center is not None:
                grad = grad + tau * (w - center)
            x = self.feasible_set.project(
                self.regularizer.prox(w - step * grad, step * self.reg_weight)
            )
            next_momentum = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * momentum**2))
            w = x + ((momentum - 1.0) / next_momentum) * (x - x_prev)
            momentum = next_momentum
            change = float(np.linalg.norm(x - x_prev))
            x_prev = x
            if change <= self.tol * (1.0 + float(np.linalg.norm(x))):
                break
        return x


def make_local_solver(
    block: np.ndarray | sp.spmatrix,
    regularizer: Regularizer,
    reg_weight: float,
    feasible_set: FeasibleSet | None = None,
    *,
    inner_iterations: int = 100,
    spectrum: GramSpectrum | None = None,
) -> LocalSolver:
    """Pick the exact spectral solver where it applies, FISTA otherwise."""
    feasible_set = feasible_set or Unconstrained()
    is_l2 = isinstance(regularizer, L2) or (
        isinstance(regularizer, ElasticNet) and regularizer.l1_ratio == 0.0
    )
    if is_l2 and isinstance(feasible_set, Unconstrained | Ball):
        return SpectralSolver(block, L2(), reg_weight, feasible_set, spectrum)
    return ProximalGradientSolver(
        block,
        regularizer,
        reg_weight,
        feasible_set,
        spectrum=spectrum,
        inner_iterations=inner_iterations,
    )
