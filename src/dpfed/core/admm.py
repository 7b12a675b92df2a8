r"""The central node's steps of ADMM sharing, vectorised over samples.

With :math:`s = \sum_m D_m x_m` (shape ``(N,)``),

.. math::

    z^{t+1} = \operatorname{prox}_{\ell/\rho}(s + y^t/\rho), \qquad
    y^{t+1} = y^t + \rho (s - z^{t+1}).

Residuals (Boyd et al. 2011, section 3.3): primal :math:`r = \|s - z\|`, dual
:math:`\rho \|z^{t+1} - z^t\|` (the constraint is :math:`\sum_m D_m x_m - z = 0`, so the
z-block's dual residual is computed at the central node without any message).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from dpfed.core.losses import Loss


def z_update(
    loss: Loss, s: np.ndarray, dual: np.ndarray, labels: np.ndarray, rho: float
) -> np.ndarray:
    """Return :math:`z^{t+1}`, shape ``(N,)``."""
    return loss.prox(s + dual / rho, labels, rho)


def dual_update(dual: np.ndarray, s: np.ndarray, z: np.ndarray, rho: float) -> np.ndarray:
    """Return :math:`y^{t+1} = y^t + \\rho (s - z)`, shape ``(N,)``."""
    return cast(np.ndarray, dual + rho * (s - z))


@dataclass(frozen=True)
class Residuals:
    """Primal and dual residual norms and the tolerances they are compared with."""

    primal: float
    dual: float
    eps_primal: float
    eps_dual: float

    @property
    def converged(self) -> bool:
        return self.primal <= self.eps_primal and self.dual <= self.eps_dual


def residuals(
    s: np.ndarray,
    z: np.ndarray,
    z_old: np.ndarray,
    dual: np.ndarray,
    rho: float,
    *,
    abs_tol: float,
    rel_tol: float,
) -> Residuals:
    """Residual norms and the stopping tolerances of Boyd et al. (3.12)."""
    n = s.shape[0]
    primal = float(np.linalg.norm(s - z))
    dual_res = float(rho * np.linalg.norm(z - z_old))
    eps_p = np.sqrt(n) * abs_tol + rel_tol * max(float(np.linalg.norm(s)), float(np.linalg.norm(z)))
    eps_d = np.sqrt(n) * abs_tol + rel_tol * float(np.linalg.norm(dual))
    return Residuals(primal, dual_res, float(eps_p), float(eps_d))


@dataclass(frozen=True)
class ResidualBalancing:
    r"""Adaptive penalty (Boyd et al. 2011, eq. 3.13): scale ``rho`` by ``factor`` when one
    residual exceeds ``ratio`` times the other, within ``[rho_min, rho_max]``."""

    ratio: float = 10.0
    factor: float = 2.0
    rho_min: float = 1e-6
    rho_max: float = 1e6

    def next_rho(self, rho: float, res: Residuals) -> float:
        if res.primal > self.ratio * res.dual:
            rho = rho * self.factor
        elif res.dual > self.ratio * res.primal:
            rho = rho / self.factor
        return float(np.clip(rho, self.rho_min, self.rho_max))
