r"""A release on a power-of-two grid with exact discrete Gaussian noise.

The continuous release :math:`v + \mathcal N(0, \sigma^2 I)` computed in floating point
(:class:`dpfed.privacy.gaussian.GaussianRelease`) is replaced by

.. math::

    \tilde v = \gamma\,\big(\operatorname{rint}(v / \gamma) + K\big), \qquad
    K_j \sim \mathcal N_{\mathbb Z}(0, s^2) \text{ i.i.d.}, \qquad \gamma = 2^{e},

with :math:`K` drawn exactly (:func:`dpfed.privacy.discrete.discrete_gaussian`). Because
:math:`\gamma` is a power of two, :math:`v/\gamma` is exact in float64, its rounding
:math:`m` an exact integer (an int64: :math:`|m| \le 2^{62}`, checked), and :math:`m + K` is
added in integers: the release is the integer :math:`m + K`. Writing it as the float
:math:`\gamma (m + K)` is exact up to :math:`|m + K| \le 2^{53}` and otherwise rounds to the
nearest float: a deterministic function of the released integer, i.e. post-processing, so
nothing of the data leaks through floating-point rounding either way.

**Grid step.** :math:`\gamma` is the largest power of two with :math:`\sigma/\gamma \ge 2^{b}`
(default :math:`b = 26`, :data:`dpfed.privacy.coupling.RELEASE_GRID_BITS`), so
:math:`\sigma/\gamma \in [2^{b}, 2^{b+1})`. Why :math:`2^{26}`:

* the accounting (:mod:`dpfed.privacy.coupling`) keeps the continuous Gaussian's privacy
  profile and adds :math:`(1 + e^{\varepsilon})\,\mathrm{TV}(s)` to delta per released
  coordinate, with :math:`\mathrm{TV}(s) \approx 0.0202/s^2`: at :math:`s = 2^{26}` that is
  :math:`4.5 \cdot 10^{-18}`, so half a million coordinates at epsilon 8 add :math:`7 \cdot
  10^{-9}` (at :math:`2^{20}` they would add :math:`2.8 \cdot 10^{-5}`, more than a usual
  delta);
* the rounding moves the value by at most :math:`\gamma/2 \le 2^{-27}\sigma` per
  coordinate, invisible next to noise of standard deviation :math:`\sigma`;
* the sensitivity slack of the rounding (below) is :math:`\sqrt{c}` grid units against
  :math:`\Delta/\gamma \ge 2^{26}/z` for multiplier :math:`z = \sigma/\Delta`: a relative
  :math:`\sqrt{c}\,z\,2^{-26}` (:math:`5 \cdot 10^{-5}` for a9a's 32,561 scores at
  :math:`z = 20`), which :meth:`GridGaussianRelease.for_multiplier` pays with that much more
  noise, so the accounted multiplier is unchanged;
* :math:`s^2 = \lceil(\sigma/\gamma)^2\rceil < 2^{54}` is exact in the sampler's 64-bit
  integers; a proposal beyond about :math:`2^{5}` standard deviations (probability below
  :math:`e^{-500}`) is decided with Python's unbounded integers, so the law stays exact;
* the discrete Gaussian's variance equals :math:`s^2` to float precision.

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
:math:`\sigma/\Delta` (:meth:`GridGaussianRelease.for_multiplier` raises :math:`\sigma` to
keep it at a given :math:`z`). Its epsilon is that of the continuous Gaussian at that
multiplier plus the coupling's delta (:mod:`dpfed.privacy.coupling`), or RDP's directly
(:mod:`dpfed.privacy.discrete_accounting`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_positive
from dpfed.privacy.coupling import RELEASE_GRID_BITS
from dpfed.privacy.discrete import discrete_gaussian

__all__ = ["DEFAULT_GRID_BITS", "GridGaussianRelease", "grid_exponent"]

#: :math:`b`: the grid step is the largest power of two :math:`\gamma` with
#: :math:`\sigma/\gamma \ge 2^{b}` (:data:`dpfed.privacy.coupling.RELEASE_GRID_BITS`).
DEFAULT_GRID_BITS = RELEASE_GRID_BITS

_MAX_UNITS = float(1 << 62)  # the largest rounded value, in grid units, kept in int64


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
        c = (
            d
            if self.changed_coordinates is None
            else check_int("changed_coordinates", self.changed_coordinates, minimum=1)
        )
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

    @classmethod
    def for_multiplier(
        cls,
        label: str,
        l2_sensitivity: float,
        noise_multiplier: float,
        dim: int,
        *,
        grid_bits: int = DEFAULT_GRID_BITS,
    ) -> GridGaussianRelease:
        r"""The release of ``dim`` coordinates whose grid multiplier
        :math:`s/\Delta_{grid}` is at least ``noise_multiplier`` :math:`z`.

        The rounding adds :math:`\sqrt d` grid units to the sensitivity, so the noise is
        raised to :math:`\sigma = z(\Delta + \gamma\sqrt d)`; then
        :math:`s \ge \sigma/\gamma = z(\Delta/\gamma + \sqrt d) = z\Delta_{grid}`. The grid
        step :math:`\gamma` is that of :math:`\sigma` itself (recomputed if raising
        :math:`\sigma` crossed a power of two, which can only coarsen the grid once more).
        The noise exceeds :math:`z\Delta` by the factor :math:`1 + \gamma\sqrt d/\Delta
        \le 1 + z\sqrt d\,2^{-b}` (times :math:`1 + 2^{-40}`, a margin for the float rounding
        of the grid sensitivity).

        Parameters
        ----------
        label : str
        l2_sensitivity : float
            :math:`\Delta > 0`.
        noise_multiplier : float
            :math:`z > 0`, the multiplier the accountant is told.
        dim : int
            :math:`d \ge 1`.
        grid_bits : int, default :data:`DEFAULT_GRID_BITS`

        Returns
        -------
        GridGaussianRelease
            With :attr:`noise_multiplier` :math:`\ge z`.

        Raises
        ------
        DpfedInputError
            For bad parameters, or when :math:`z\sqrt d` is so close to :math:`2^{b}` that no
            grid keeps the multiplier.
        """
        sens = check_positive(f"l2_sensitivity of {label}", l2_sensitivity)
        z = check_positive(f"noise_multiplier of {label}", noise_multiplier)
        d = check_int("dim", dim, minimum=1)
        exponent = grid_exponent(z * sens, grid_bits)
        for _ in range(4):
            # 2^-40 of margin covers the float rounding of Delta/gamma + sqrt(d) and its ratio
            sigma = z * (sens + math.ldexp(math.sqrt(d), exponent)) * (1.0 + 2.0**-40)
            coarser = grid_exponent(sigma, grid_bits)
            if coarser == exponent:
                break
            exponent = coarser
        out = cls(label, sens, sigma, d, grid_bits=grid_bits)
        if out.noise_multiplier < z:  # the raise kept crossing powers of two: z sqrt(d) ~ 2^b
            raise DpfedInputError(
                f"the grid release of {label} cannot keep noise multiplier {z:g} over {d} "
                f"coordinates on a grid of 2^{grid_bits} units per deviation (it needs z "
                f"sqrt(d) well below 2^{grid_bits})."
            )
        return out

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
            Every entry a multiple of :math:`\gamma` (the nearest float to
            :math:`\gamma(m + K)` beyond :math:`2^{53}` grid units).

        Raises
        ------
        DpfedInputError
            If ``value`` is not finite, its last axis is not ``dim`` long, or a coordinate
            exceeds :math:`2^{62}` grid units (the int64 range, with room for the noise).
        """
        v = np.asarray(value, dtype=np.float64)
        if v.ndim == 0 or v.shape[-1] != self.dim:
            raise DpfedInputError(
                f"value of {self.label} must have last axis {self.dim}. Found shape {v.shape}."
            )
        return self.sample_part(rng, v)

    def sample_part(self, rng: np.random.Generator, value: np.ndarray) -> np.ndarray:
        r"""Release part of the ``dim`` coordinates (last axis at most ``dim`` long), as
        :meth:`sample`: for a release made in pieces, such as one party's block of a vector
        whose sensitivity covers all blocks (the grid's :math:`\sqrt d` then counts every
        coordinate of the whole vector).

        Raises
        ------
        DpfedInputError
            As :meth:`sample`, or if the last axis is longer than ``dim``.
        """
        v = np.asarray(value, dtype=np.float64)
        if v.ndim == 0 or v.shape[-1] > self.dim:
            raise DpfedInputError(
                f"part of {self.label} must have last axis at most {self.dim}. Found shape "
                f"{v.shape}."
            )
        if not np.all(np.isfinite(v)):
            raise DpfedInputError(f"value of {self.label} must be finite.")
        m = np.rint(np.ldexp(v, -self.exponent))
        if np.any(np.abs(m) > _MAX_UNITS):
            raise DpfedInputError(
                f"value of {self.label} is too large for grid step 2^{self.exponent}: "
                f"|value| must stay below 2^{62 + self.exponent}."
            )
        # |K| < 2^61 always (the sampler's int64 output is far inside it): no overflow
        grid = m.astype(np.int64) + self.noise(rng, v.shape)
        out: np.ndarray = np.ldexp(grid.astype(np.float64), self.exponent)
        return out
