"""Gaussian noise drawn from an injected generator, with its calibration recorded."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpfed._validation import DpfedInputError


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

    def sample(self, rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
        """Draw ``N(0, sigma^2)`` noise of ``shape`` from ``rng``."""
        return rng.normal(0.0, self.sigma, size=shape)
