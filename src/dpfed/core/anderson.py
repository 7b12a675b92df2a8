r"""Anderson acceleration of a fixed-point iteration :math:`w \leftarrow G(w)`, safeguarded.

Type-II Anderson acceleration (Walker and Ni 2011; for ADMM, Zhang, O'Donoghue and Boyd 2020):
from the last :math:`m + 1` evaluations :math:`g_i = G(w_i)` with residuals
:math:`f_i = g_i - w_i`, the next point is

.. math::

    w^{+} = g_k - \Delta G\, \gamma, \qquad
    \gamma = \arg\min_\gamma \|f_k - \Delta F \gamma\|_2^2 + \eta \|\Delta F\|_F^2 \|\gamma\|_2^2,

with :math:`\Delta F, \Delta G` the successive differences of the stored residuals and values.
The safeguard: an evaluation whose residual norm exceeds the one before it by more than a
factor ``growth`` after an extrapolated step rejects the extrapolation: the memory is cleared
and the next point is the plain step :math:`G(w)` of the point just evaluated.

Pure arithmetic on vectors; the caller decides what :math:`w` is.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np


class AndersonAcceleration:
    """Memory and step of safeguarded type-II Anderson acceleration.

    Parameters
    ----------
    memory : int
        Number of differences kept (``m``); at least 1.
    regularization : float
        Tikhonov weight :math:`\\eta` of the least-squares problem, relative to
        :math:`\\|\\Delta F\\|_F^2`.
    growth : float
        Reject an extrapolated step whose evaluation's residual norm exceeds the previous
        evaluation's by more than this factor.
    """

    def __init__(self, memory: int, *, regularization: float = 1e-8, growth: float = 1.0) -> None:
        if memory < 1:
            raise ValueError(f"memory must be at least 1. Found {memory}.")
        self.memory = int(memory)
        self.regularization = float(regularization)
        self.growth = float(growth)
        self.points: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.last_norm: float | None = None
        self.extrapolated = False
        self.rejections = 0

    def reset(self) -> None:
        """Forget every stored evaluation (e.g. after the map itself changed)."""
        self.points, self.values = [], []
        self.last_norm = None
        self.extrapolated = False

    def step(self, point: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Record the evaluation ``value = G(point)`` and return the next point to evaluate.

        Parameters
        ----------
        point, value : ndarray, shape (n,)

        Returns
        -------
        ndarray, shape (n,)
            The extrapolated point, or ``value`` itself (plain step) while fewer than two
            evaluations are stored or after a rejected extrapolation.
        """
        point = np.asarray(point, dtype=float)
        value = np.asarray(value, dtype=float)
        norm = float(np.linalg.norm(value - point))
        rejected = (
            self.extrapolated and self.last_norm is not None and norm > self.growth * self.last_norm
        )
        if rejected:
            self.rejections += 1
            self.points, self.values = [], []
        self.points.append(point.copy())
        self.values.append(value.copy())
        if len(self.points) > self.memory + 1:
            self.points.pop(0)
            self.values.pop(0)
        self.last_norm = norm
        self.extrapolated = False
        if rejected or len(self.points) < 2:
            return value.copy()
        values = np.stack(self.values)
        residuals = values - np.stack(self.points)
        d_f = np.diff(residuals, axis=0).T  # (n, k)
        d_g = np.diff(values, axis=0).T
        gram = d_f.T @ d_f
        ridge = self.regularization * float(np.trace(gram)) + 1e-300
        gamma = np.linalg.solve(gram + ridge * np.eye(gram.shape[0]), d_f.T @ residuals[-1])
        if not np.all(np.isfinite(gamma)):
            return value.copy()
        self.extrapolated = True
        return cast(np.ndarray, values[-1] - d_g @ gamma)

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays (the stored points and values, shape ``(k, n)``) and JSON-able values."""
        arrays: dict[str, np.ndarray] = {}
        if self.points:
            arrays = {"points": np.stack(self.points), "values": np.stack(self.values)}
        meta = {
            "last_norm": self.last_norm,
            "extrapolated": self.extrapolated,
            "rejections": self.rejections,
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        points = arrays.get("points")
        values = arrays.get("values")
        if (points is None) != (values is None):
            raise ValueError("an Anderson checkpoint holds both points and values, or neither.")
        if points is not None and values is not None:
            points, values = np.asarray(points, float), np.asarray(values, float)
            if points.ndim != 2 or points.shape != values.shape:
                raise ValueError(
                    f"Anderson points and values must be two arrays of one shape (k, n). Found "
                    f"{points.shape} and {values.shape}."
                )
            self.points, self.values = list(points), list(values)
        else:
            self.points, self.values = [], []
        self.last_norm = None if meta["last_norm"] is None else float(meta["last_norm"])
        self.extrapolated = bool(meta["extrapolated"])
        self.rejections = int(meta["rejections"])
