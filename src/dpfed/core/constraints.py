r"""Feasible sets :math:`X_m` of the local models, with Euclidean projection.

For the separable or radial regularisers of :mod:`dpfed.core.regularizers`, the prox of
:math:`tR + \iota_X` is the projection of the prox of :math:`tR`:

* a box is separable and a 1-D convex prox followed by clipping is the constrained prox;
* for a ball, the KKT conditions give :math:`x = \operatorname{prox}_{tR}(v)/(1+\mu)` for the
  soft-thresholding and scaling proxes here, which is the radial projection.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import cast

import numpy as np

from dpfed._validation import DpfedInputError


class FeasibleSet(ABC):
    """A closed convex set with a projection."""

    @abstractmethod
    def project(self, x: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool: ...

    radius: float = np.inf


class Unconstrained(FeasibleSet):
    """All of :math:`\\mathbb{R}^d`."""

    def project(self, x: np.ndarray) -> np.ndarray:
        return x

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        return True

    def __repr__(self) -> str:
        return "Unconstrained()"


class Ball(FeasibleSet):
    r"""The l2 ball :math:`\{x : \|x\|_2 \le r\}`; projection :math:`x \min(1, r/\|x\|)`."""

    def __init__(self, radius: float) -> None:
        if not (np.isfinite(radius) and radius > 0):
            raise DpfedInputError(f"ball radius must be a finite number > 0. Found {radius}.")
        self.radius = float(radius)

    def project(self, x: np.ndarray) -> np.ndarray:
        norm = float(np.linalg.norm(x))
        return x if norm <= self.radius else x * (self.radius / norm)

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        return float(np.linalg.norm(x)) <= self.radius * (1 + tol)

    def __repr__(self) -> str:
        return f"Ball(radius={self.radius})"


class Box(FeasibleSet):
    r"""The box :math:`\{x : l \le x \le u\}` (scalars or per-coordinate arrays)."""

    def __init__(self, lower: float | np.ndarray, upper: float | np.ndarray) -> None:
        lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
        if np.any(lo > hi):
            raise DpfedInputError(
                f"box lower bound must not exceed upper. Found {lower} > {upper}."
            )
        self.lower, self.upper = lo, hi
        self.radius = (
            float(np.sqrt(np.sum(np.maximum(np.abs(lo), np.abs(hi)) ** 2)))
            if (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and lo.ndim)
            else np.inf
        )

    def project(self, x: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, np.clip(x, self.lower, self.upper))

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        return bool(np.all(x >= self.lower - tol) and np.all(x <= self.upper + tol))

    def __repr__(self) -> str:
        return f"Box(lower={self.lower.tolist()}, upper={self.upper.tolist()})"
