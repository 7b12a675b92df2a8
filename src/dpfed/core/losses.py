r"""Per-sample losses with value, derivative and a vectorised scalar proximal operator.

The ADMM sharing z-update is :math:`N` independent scalar problems

.. math::

    z_i = \operatorname{prox}_{\ell_i/\rho}(v_i)
        = \arg\min_{z\in\mathbb{R}} \ \ell(z; y_i) + \frac{\rho}{2}(z - v_i)^2 ,

solved here for all samples at once. Margin losses (logistic, smoothed hinge, sigmoid) are
written as :math:`\ell(z; y) = h(y z)` with labels :math:`y \in \{-1, 1\}`; since
:math:`y^2 = 1`, :math:`\operatorname{prox}_{\ell/\rho}(v) = y \operatorname{prox}_{h/\rho}(y v)`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import cast

import numpy as np
from scipy.special import expit, log_expit

from dpfed._validation import DpfedInputError

_NEWTON_ITERATIONS = 100


class Loss(ABC):
    """A per-sample loss :math:`\\ell(z; y)` of the score :math:`z`.

    Attributes
    ----------
    name : str
        Registry name.
    lipschitz : float or None
        Bound on :math:`|\\ell'(z)|` (``None``: unbounded).
    smoothness : float
        Bound on :math:`|\\ell''(z)|`, the ``L`` of the convergence theory.
    weak_convexity : float
        :math:`\\max(0, -\\inf \\ell'')`; the z-update is strongly convex iff ``rho`` exceeds it.
    binary : bool
        Whether labels must be in {-1, 1}.
    """

    name: str = ""
    lipschitz: float | None = None
    smoothness: float = np.inf
    weak_convexity: float = 0.0
    binary: bool = True

    @abstractmethod
    def value(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Loss per sample, shape ``(N,)``."""

    @abstractmethod
    def derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """:math:`\\partial \\ell / \\partial z` per sample, shape ``(N,)``."""

    def second_derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """:math:`\\partial^2 \\ell / \\partial z^2` (for Newton's method on local problems)."""
        raise NotImplementedError(f"{self.name} has no second derivative")

    @abstractmethod
    def prox(self, v: np.ndarray, y: np.ndarray, rho: float) -> np.ndarray:
        """:math:`\\arg\\min_z \\ell(z; y) + \\rho/2 (z - v)^2` per sample, shape ``(N,)``."""

    def check_rho(self, rho: float) -> None:
        """Refuse a penalty for which the z-update is not strongly convex."""
        if rho <= self.weak_convexity:
            raise DpfedInputError(
                f"rho must exceed the weak-convexity modulus {self.weak_convexity:.4g} of the "
                f"{self.name} loss so that the z-update has a unique solution. Found {rho}."
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _MarginLoss(Loss):
    """:math:`\\ell(z; y) = h(yz)`; subclasses give ``h``, ``h'``, ``h''`` and a prox bracket."""

    @abstractmethod
    def _h(self, m: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _dh(self, m: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _d2h(self, m: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _bracket(self, w: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
        """Interval holding :math:`\\operatorname{prox}_{h/\\rho}(w)`."""

    def value(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self._h(y * z)

    def derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, y * self._dh(y * z))

    def second_derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, y * y * self._d2h(y * z))

    def prox(self, v: np.ndarray, y: np.ndarray, rho: float) -> np.ndarray:
        return cast(np.ndarray, y * self._prox_margin(y * np.asarray(v, dtype=float), float(rho)))

    def _prox_margin(self, w: np.ndarray, rho: float) -> np.ndarray:
        """Safeguarded Newton (``rtsafe``) on :math:`g(m) = h'(m) + \\rho (m - w)`.

        ``g`` is increasing; a Newton step is taken when it stays inside the bracket and
        shrinks the step fast enough, a bisection step otherwise.
        """
        lo, hi = self._bracket(w, rho)
        lo = np.array(lo, dtype=float).reshape(-1)
        hi = np.array(hi, dtype=float).reshape(-1)
        w = np.asarray(w, dtype=float).reshape(-1)
        m: np.ndarray = 0.5 * (lo + hi)
        dx_old = hi - lo
        active = np.arange(m.size)
        for _ in range(_NEWTON_ITERATIONS):
            if active.size == 0:
                break
            ma, la, ha, wa = m[active], lo[active], hi[active], w[active]
            g = self._dh(ma) + rho * (ma - wa)
            slope = self._d2h(ma) + rho
            la = np.where(g > 0, la, ma)
            ha = np.where(g > 0, ma, ha)
            newton = ma - g / slope
            bisect = (
                (newton < la) | (newton > ha) | (np.abs(2.0 * g) > np.abs(dx_old[active] * slope))
            )
            m_new = np.where(bisect, 0.5 * (la + ha), newton)
            dx = m_new - ma
            m[active], lo[active], hi[active], dx_old[active] = m_new, la, ha, dx
            done = (np.abs(dx) <= 1e-14 * (1.0 + np.abs(m_new))) | (g == 0)
            active = active[~done]
        return m


class LogisticLoss(_MarginLoss):
    r""":math:`\ell(z; y) = \log(1 + e^{-yz})`; convex, 1-Lipschitz, 1/4-smooth."""

    name = "logistic"
    lipschitz = 1.0
    smoothness = 0.25

    def _h(self, m: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, -log_expit(m))

    def _dh(self, m: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, -expit(-m))

    def _d2h(self, m: np.ndarray) -> np.ndarray:
        s = expit(m)
        return cast(np.ndarray, s * (1.0 - s))

    def _bracket(self, w: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
        # h' in (-1, 0): the root m = w - h'(m)/rho lies in (w, w + 1/rho).
        return w, w + 1.0 / rho


class SmoothedHingeLoss(_MarginLoss):
    r"""Quadratically smoothed hinge with width ``gamma``:

    .. math::

        h(m) = \begin{cases} 0 & m \ge 1 \\ (1-m)^2 / (2\gamma) & 1-\gamma < m < 1 \\
        1 - m - \gamma/2 & m \le 1 - \gamma \end{cases}

    Convex, 1-Lipschitz, :math:`1/\gamma`-smooth; its prox has a closed form.
    """

    name = "smoothed_hinge"
    lipschitz = 1.0

    def __init__(self, gamma: float = 1.0) -> None:
        if not gamma > 0:
            raise DpfedInputError(f"gamma must be > 0. Found {gamma}.")
        self.gamma = float(gamma)
        self.smoothness = 1.0 / self.gamma

    def _h(self, m: np.ndarray) -> np.ndarray:
        g = self.gamma
        return np.where(m >= 1, 0.0, np.where(m > 1 - g, (1 - m) ** 2 / (2 * g), 1 - m - g / 2))

    def _dh(self, m: np.ndarray) -> np.ndarray:
        g = self.gamma
        return np.where(m >= 1, 0.0, np.where(m > 1 - g, -(1 - m) / g, -1.0))

    def _d2h(self, m: np.ndarray) -> np.ndarray:
        g = self.gamma
        return np.where((m < 1) & (m > 1 - g), 1.0 / g, 0.0)

    def _bracket(self, w: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
        return w, w + 1.0 / rho

    def _prox_margin(self, w: np.ndarray, rho: float) -> np.ndarray:
        g = self.gamma
        quad = (1.0 + rho * g * w) / (1.0 + rho * g)
        return np.where(w >= 1, w, np.where(w + 1.0 / rho <= 1 - g, w + 1.0 / rho, quad))

    def __repr__(self) -> str:
        return f"SmoothedHingeLoss(gamma={self.gamma})"


class SigmoidLoss(_MarginLoss):
    r"""Non-convex sigmoid loss :math:`h(m) = 1 / (1 + e^{m})`.

    Smooth with :math:`|h''| \le 1/(6\sqrt3)` and bounded below by 0, so it meets the
    assumptions of the non-convex convergence theory of ADMM sharing (Lipschitz gradient,
    lower-bounded objective); the z-update is strongly convex once
    :math:`\rho > 1/(6\sqrt3)`, which :meth:`check_rho` enforces.
    """

    name = "sigmoid"
    lipschitz = 0.25
    smoothness = 1.0 / (6.0 * np.sqrt(3.0))
    weak_convexity = 1.0 / (6.0 * np.sqrt(3.0))

    def _h(self, m: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, expit(-m))

    def _dh(self, m: np.ndarray) -> np.ndarray:
        s = expit(m)
        return cast(np.ndarray, -s * (1.0 - s))

    def _d2h(self, m: np.ndarray) -> np.ndarray:
        s = expit(m)
        return cast(np.ndarray, s * (1.0 - s) * (2.0 * s - 1.0))

    def _bracket(self, w: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
        # h' in [-1/4, 0): the root lies in [w, w + 1/(4 rho)].
        return w, w + 0.25 / rho

    def prox(self, v: np.ndarray, y: np.ndarray, rho: float) -> np.ndarray:
        self.check_rho(rho)
        return super().prox(v, y, rho)


class SquaredLoss(Loss):
    r""":math:`\ell(z; y) = (z - y)^2 / 2`; labels are real numbers. Closed-form prox."""

    name = "squared"
    lipschitz = None
    smoothness = 1.0
    binary = False

    def value(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, 0.5 * (z - y) ** 2)

    def derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, z - y)

    def second_derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.ones_like(np.asarray(z, dtype=float))

    def prox(self, v: np.ndarray, y: np.ndarray, rho: float) -> np.ndarray:
        return (y + rho * np.asarray(v, dtype=float)) / (1.0 + rho)


LOSSES: dict[str, type[Loss]] = {
    "logistic": LogisticLoss,
    "squared": SquaredLoss,
    "smoothed_hinge": SmoothedHingeLoss,
    "sigmoid": SigmoidLoss,
}


def get_loss(name: str | Loss) -> Loss:
    """Return a loss instance from its registry name (or pass an instance through)."""
    if isinstance(name, Loss):
        return name
    key = str(name).replace("-", "_")
    if key not in LOSSES:
        raise DpfedInputError(f"loss must be one of {sorted(LOSSES)}. Found {name!r}.")
    return LOSSES[key]()


def score_metrics(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    r"""Test log loss and accuracy of a linear model's scores, as every result reports them.

    .. math::

        \text{log loss} = \frac1n \sum_i \log(1 + e^{-y_i s_i}), \qquad
        \text{accuracy} = \frac1n \#\{i : \operatorname{sign}(s_i) = y_i\}
        \quad (\operatorname{sign}(0) = -1).

    Parameters
    ----------
    scores : numpy.ndarray, shape (n,)
    labels : numpy.ndarray, shape (n,)
        In {-1, 1}.

    Returns
    -------
    dict
        ``test_log_loss`` and ``test_accuracy``.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    return {
        "test_log_loss": float(np.mean(np.logaddexp(0.0, -y * s))),
        "test_accuracy": float(np.mean(np.where(s > 0, 1.0, -1.0) == y)),
    }
