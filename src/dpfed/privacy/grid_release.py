r"""A release on a power-of-two grid with exact discrete Gaussian noise.

The continuous release :math:`v + \mathcal N(0, \sigma^2 I)` computed in floating point
(:class:`dpfed.privacy.gaussian.GaussianRelease`) is replaced by

.. math::

    \tilde v = \gamma\,\big(\operatorname{rint}(v / \gamma) + K\big), \qquad
    K_j \sim \mathcal N_{\mathbb Z}(0, s^2) \text{ i.i.d.}, \qquad \gamma = 2^{e},

with :math:`K` drawn exactly (:func:`dpfed.privacy.discrete.discrete_gaussian`). Because
:math:`\gamma` is a power of two, :math:`v/\gamma` and :math:`\gamma (m + K)` are exact in
float64 (for :math:`|m + K| \le 2^{53}`, checked): the output is the integer
:math:`m + K` written on the grid :math:`\gamma\mathbb Z^d`, and nothing of the data leaks
through floating-point rounding.

**Grid step.** :math:`\gamma` is the largest power of two with :math:`\sigma/\gamma \ge 2^{b}`
(default :math:`b = 20`), so :math:`\sigma/\gamma \in [2^{b}, 2^{b+1})`. Why :math:`2^{20}`:

* the rounding moves the value by at most :math:`\gamma/2 \le 2^{-21}\sigma` per coordinate,
  invisible next to noise of standard deviation :math:`\sigma`;
* the sensitivity slack of the rounding (below) is :math:`\sqrt{s}` grid units against
  :math:`\Delta/\gamma \ge 2^{20}/z` for multiplier :math:`z = \sigma/\Delta`: a relative
  increase of :math:`\sqrt{s}\,z\,2^{-20}` in the sensitivity (0.2 % for :math:`s = 10^4`
  coordinates at :math:`z = 20`, 2 % for :math:`10^6`);
* :math:`s^2 = \lceil(\sigma/\gamma)^2\rceil < 2^{42}` leaves the sampler's 64-bit integers
  a margin of :math:`2^{20}` (the acceptance exponent stays in int64 up to
  :math:`|K| \approx 2^{31}`, i.e. :math:`2^{10}` standard deviations);
* at :math:`s \ge 2^{20}` the discrete Gaussian's variance equals :math:`s^2` to float
  precision, and its privacy profile is within about :math:`10^{-12}` (relative, extrapolated
  from smaller :math:`s`; not proven) of the continuous one's
  (:mod:`dpfed.privacy.discrete_accounting`); the accounting uses RDP, which is proven.

**Sensitivity in grid units.** Let :math:`\Delta` bound :math:`\|v(x) - v(x')\|_2` for
neighbours, and let at most :math:`c` coordinates differ between them (:math:`c = d` in
general). Rounding is deterministic, so a coordinate that does not change rounds the same way;
one that changes by :math:`\delta_j` (in grid units) rounds to integers at most
:math:`|\delta_j| + 1` apart. Hence

.. math::

    \|m(x) - m(x')\|_2 \le \Big(\sum_{j:\,\delta_j \ne 0} (|\delta_j| + 1)^2\Big)^{1/2}
    \le \|\delta\|_2 + \sqrt{c} \le \frac{\Delta}{\gamma} + \sqrt{c}
    =: \Delta_{grid}

(triangle inequality in :math:`\ell_2`), and the release's noise multiplier is
:math:`s/\Delta_{grid}` (:attr:`GridGaussianRelease.noise_multiplier`), a little below
:math:`\sigma/\Delta`. Its epsilon is that of :mod:`dpfed.privacy.discrete_accounting`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_positive
from dpfed.privacy.discrete import discrete_gaussian

__all__ = ["DEFAULT_GRID_BITS", "GridGaussianRelease", "grid_exponent"]

#: :math:`b`: the grid step is the largest power of two :math:`\gamma` with
#: :math:`\sigma/\gamma \ge 2^{b}`.
DEFAULT_GRID_BITS = 20

_EXACT_INT = 1 << 53  # every integer of magnitude up to 2^53 is a float64


def grid_exponent(sigma: float, bits: int = DEFAULT_GRID_BITS) -> int:
    r"""The exponent :math:`e` of the grid step :math:`\gamma = 2^{e}`: the largest with
    :math:`\sigma / 2^{e} \ge 2^{b}`, i.e. :math:`e = \lfloor\log_2\sigma\rfloor - b`
    (computed exactly from :func:`math.frexp`).

    Parameters
    ----------
    sigma : float
        :math:`\sigma > 0`.
    bits : int, default :data:`DEFAULT_GRID_BITS`
        :math:`b \ge 0`.

    Returns
    -------
    int
        :math:`e`, with :math:`\sigma / 2^{e} \in [2^{b}, 2^{b+1})`.
    """
    s = check_positive("sigma", sigma)
    b = check_int("bits", bits, minimum=0)
    _, exponent = math.frexp(s)  # s = m 2^exponent, m in [0.5, 1): floor(log2 s) = exponent - 1
    return exponent - 1 - b


@dataclass(frozen=True)
class GridGaussianRelease:
    r"""A release of a vector of ``dim`` coordinates on the grid :math:`2^{e}\mathbb Z` with
    exact discrete Gaussian noise (module docstring).

    Attributes
    ----------
    label : str
    l2_sensitivity : float
        :math:`\Delta` of the real-valued vector.
    sigma : float
        Target noise standard deviation :math:`\sigma` (real units).
    dim : int
        :math:`d`, the vector's length.
    changed_coordinates : int or None
        :math:`c`, how many coordinates can differ between neighbours (``None``: all
        :math:`d`).
    grid_bits : int
        :math:`b` of :func:`grid_exponent`.
    exponent : int
        :math:`e`: the grid step is :math:`\gamma = 2^{e}` (derived).
    sigma2_grid : int
        :math:`s^2 = \lceil(\sigma/\gamma)^2\rceil`, the discrete Gaussian's parameter in grid
        units (derived; :math:`s \ge \sigma/\gamma`).
    sensitivity_grid : float
        :math:`\Delta_{grid} = \Delta/\gamma + \sqrt{c}` (derived).
    """

    label: str
    l2_sensitivity: float
    sigma: float
    dim: int
    changed_coordinates: int | None = None
    grid_bits: int = DEFAULT_GRID_BITS
    exponent: int = field(init=False)
    sigma2_grid: int = field(init=False)
    sensitivity_grid: float = field(init=False)

    def __post_init__(self) -> None:
        sens = check_positive(f"l2_sensitivity of {self.label}", self.l2_sensitivity)
        sigma = check_positive(f"noise sigma of {self.label}", self.sigma)
        d = check_int("dim", self.dim, minimum=1)
        c = d if self.changed_coordinates is None else check_int(
            "changed_coordinates", self.changed_coordinates, minimum=1)
        if c > d:
            raise DpfedInputError(
                f"changed_coordinates of {self.label} must be at most dim = {d}. Found {c}."
            )
        e = grid_exponent(sigma, self.grid_bits)
        s_grid = Fraction(math.ldexp(sigma, -e))  # exact: a power-of-two rescaling
        s2 = s_grid * s_grid
        object.__setattr__(self, "exponent", e)
        object.__setattr__(self, "sigma2_grid", -((-s2.numerator) // s2.denominator))
        object.__setattr__(self, "sensitivity_grid", math.ldexp(sens, -e) + math.sqrt(c))

    @property
    def grid_step(self) -> float:
        r""":math:`\gamma = 2^{e}`."""
        return math.ldexp(1.0, self.exponent)

    @property
    def noise_multiplier(self) -> float:
        r""":math:`s / \Delta_{grid}`: what the accountant consumes (a little below
        :math:`\sigma/\Delta`)."""
        return math.sqrt(self.sigma2_grid) / self.sensitivity_grid

    def noise(self, rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
        r"""Draw :math:`K \sim \mathcal N_{\mathbb Z}(0, s^2)` of ``shape`` (int64, grid
        units) from ``rng``."""
        return discrete_gaussian(self.sigma2_grid, shape, rng)

    def sample(self, rng: np.random.Generator, value: np.ndarray) -> np.ndarray:
        r"""Release ``value`` (shape ``(dim,)`` or ``(n, dim)``):
        :math:`\gamma(\operatorname{rint}(v/\gamma) + K)`.

        Returns
        -------
        numpy.ndarray of float64, the shape of ``value``
            Every entry an exact multiple of :math:`\gamma`.

        Raises
        ------
        DpfedInputError
            If ``value`` is not finite, its last axis is not ``dim`` long, or a coordinate
            (noise included) exceeds :math:`2^{53}` grid units (the float64 integers).
        """
        v = np.asarray(value, dtype=np.float64)
        if v.ndim == 0 or v.shape[-1] != self.dim:
            raise DpfedInputError(
                f"value of {self.label} must have last axis {self.dim}. Found shape {v.shape}."
            )
        if not np.all(np.isfinite(v)):
            raise DpfedInputError(f"value of {self.label} must be finite.")
        m = np.rint(np.ldexp(v, -self.exponent))
        limit = float(_EXACT_INT >> 1)
        if np.any(np.abs(m) > limit):
            raise DpfedInputError(
                f"value of {self.label} is too large for grid step 2^{self.exponent}: "
                f"|value| must stay below 2^{52 + self.exponent}."
            )
        grid = m.astype(np.int64) + self.noise(rng, v.shape)
        if np.any(np.abs(grid) > _EXACT_INT):
            raise DpfedInputError(  # pragma: no cover - needs noise of 2^31 deviations
                f"a noisy coordinate of {self.label} left the float64 integers."
            )
        out: np.ndarray = np.ldexp(grid.astype(np.float64), self.exponent)
        return out
