"""A Gaussian release: its calibration, and its noise drawn exactly on a grid from an injected
generator."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.privacy.grid_release import GridGaussianRelease


@lru_cache(maxsize=256)
def _grid(
    label: str, l2_sensitivity: float, noise_multiplier: float, dim: int
) -> GridGaussianRelease:
    return GridGaussianRelease.for_multiplier(label, l2_sensitivity, noise_multiplier, dim)


@dataclass(frozen=True)
class GaussianRelease:
    """One Gaussian release: noise of standard deviation ``sigma`` for ``l2_sensitivity``.

    ``noise_multiplier = sigma / l2_sensitivity`` is what the accountants consume; a release
    made by :meth:`from_multiplier` keeps the multiplier it was given exactly (``sigma`` is
    computed from it), so every release calibrated to one multiplier reports the same float.
    """

    label: str
    l2_sensitivity: float
    sigma: float
    multiplier: float | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.l2_sensitivity) and self.l2_sensitivity > 0):
            raise DpfedInputError(
                f"l2_sensitivity of {self.label} must be finite and > 0. "
                f"Found {self.l2_sensitivity}."
            )
        if not (np.isfinite(self.sigma) and self.sigma > 0):
            raise DpfedInputError(
                f"noise sigma of {self.label} must be finite and > 0. Found {self.sigma}."
            )

    @property
    def noise_multiplier(self) -> float:
        if self.multiplier is not None:
            return self.multiplier
        return self.sigma / self.l2_sensitivity

    @classmethod
    def from_multiplier(
        cls, label: str, l2_sensitivity: float, noise_multiplier: float
    ) -> GaussianRelease:
        return cls(
            label, l2_sensitivity, noise_multiplier * l2_sensitivity, float(noise_multiplier)
        )

    def grid(self, dim: int) -> GridGaussianRelease:
        """The exact release of ``dim`` coordinates at this release's multiplier (or above):
        :meth:`GridGaussianRelease.for_multiplier`."""
        return _grid(self.label, float(self.l2_sensitivity), float(self.noise_multiplier), int(dim))

    def noisy(self, rng: np.random.Generator, value: np.ndarray) -> np.ndarray:
        r"""Release ``value`` (any shape, :math:`d` entries in all) with exact discrete Gaussian
        noise on a power-of-two grid: :meth:`grid` ``(d)``'s
        :math:`\gamma(\operatorname{rint}(v/\gamma) + K)`, whose noise is at least
        ``sigma`` and whose accounting is that of this release's multiplier plus the
        coupling's delta of :math:`d` coordinates (:mod:`dpfed.privacy.coupling`).

        Returns
        -------
        numpy.ndarray of float64, the shape of ``value``
        """
        v = np.asarray(value, dtype=np.float64)
        flat = v.reshape(-1)
        return self.grid(flat.size).sample(rng, flat).reshape(v.shape)

    def sample(self, rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
        """Draw continuous ``N(0, sigma^2)`` noise of ``shape`` from ``rng`` in floating point
        (for simulations and audits of the continuous mechanism; a release uses
        :meth:`noisy`)."""
        return rng.normal(0.0, self.sigma, size=shape)
