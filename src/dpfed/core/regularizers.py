r"""Regularisers :math:`R(x)` with value and proximal operator.

``prox(v, t)`` returns :math:`\arg\min_x t R(x) + \tfrac12 \|x - v\|^2`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import cast

import numpy as np

from dpfed._validation import DpfedInputError


class Regularizer(ABC):
    """A separable convex regulariser.

    Attributes
    ----------
    curvature_bound : float or None
        :math:`c_1` with :math:`|R''| \\le c_1`, or ``None`` where ``R`` is not twice
        differentiable (the ``paper`` privacy mechanism needs it).
    strong_convexity : float
        Modulus :math:`\\mu` with :math:`R - \\mu/2 \\|\\cdot\\|^2` convex.
    """

    name: str = ""
    curvature_bound: float | None = None
    strong_convexity: float = 0.0

    @abstractmethod
    def value(self, x: np.ndarray) -> float: ...

    @abstractmethod
    def prox(self, v: np.ndarray, t: float) -> np.ndarray: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class L2(Regularizer):
    r""":math:`R(x) = \tfrac12 \|x\|_2^2`; prox :math:`v / (1 + t)`."""

    name = "l2"
    curvature_bound = 1.0
    strong_convexity = 1.0

    def value(self, x: np.ndarray) -> float:
        return 0.5 * float(np.dot(x, x))

    def prox(self, v: np.ndarray, t: float) -> np.ndarray:
        return v / (1.0 + t)


class L1(Regularizer):
    r""":math:`R(x) = \|x\|_1`; prox is soft thresholding at ``t``."""

    name = "l1"

    def value(self, x: np.ndarray) -> float:
        return float(np.abs(x).sum())

    def prox(self, v: np.ndarray, t: float) -> np.ndarray:
        return cast(np.ndarray, np.sign(v) * np.maximum(np.abs(v) - t, 0.0))


class ElasticNet(Regularizer):
    r""":math:`R(x) = \alpha \|x\|_1 + \tfrac{1-\alpha}{2} \|x\|_2^2` with ``l1_ratio`` α in [0, 1].

    Prox: soft thresholding at :math:`t\alpha`, then scaling by :math:`1/(1 + t(1-\alpha))`.
    """

    name = "elasticnet"

    def __init__(self, l1_ratio: float = 0.5) -> None:
        if not 0.0 <= l1_ratio <= 1.0:
            raise DpfedInputError(f"l1_ratio must be in [0, 1]. Found {l1_ratio}.")
        self.l1_ratio = float(l1_ratio)
        self.strong_convexity = 1.0 - self.l1_ratio
        self.curvature_bound = 1.0 if self.l1_ratio == 0.0 else None

    def value(self, x: np.ndarray) -> float:
        a = self.l1_ratio
        return a * float(np.abs(x).sum()) + 0.5 * (1 - a) * float(np.dot(x, x))

    def prox(self, v: np.ndarray, t: float) -> np.ndarray:
        a = self.l1_ratio
        soft = np.sign(v) * np.maximum(np.abs(v) - t * a, 0.0)
        return cast(np.ndarray, soft / (1.0 + t * (1.0 - a)))

    def __repr__(self) -> str:
        return f"ElasticNet(l1_ratio={self.l1_ratio})"


REGULARIZERS: dict[str, type[Regularizer]] = {"l2": L2, "l1": L1, "elasticnet": ElasticNet}


def get_regularizer(name: str | Regularizer) -> Regularizer:
    """Return a regulariser from its registry name (or pass an instance through)."""
    if isinstance(name, Regularizer):
        return name
    key = str(name).lower().replace("-", "").replace("_", "")
    if key not in REGULARIZERS:
        raise DpfedInputError(f"regularizer must be one of {sorted(REGULARIZERS)}. Found {name!r}.")
    return REGULARIZERS[key]()
