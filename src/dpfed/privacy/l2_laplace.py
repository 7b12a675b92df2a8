r"""The l2-Laplace ("multivariate Laplace by norm") noise of objective and output perturbation.

Noise with density

.. math::

    K(e) = \frac{\zeta^d}{\Gamma(d)\, s_{d-1}}\, e^{-\zeta \|e\|}, \qquad e \in \mathbb{R}^d,

where :math:`s_{d-1} = 2\pi^{d/2}/\Gamma(d/2)` is the area of the unit sphere. The density
depends on :math:`e` only through :math:`r = \|e\|`, so the direction :math:`e/\|e\|` is uniform
on the sphere and independent of :math:`r`, and in polar coordinates the density of :math:`r`
is :math:`K\, s_{d-1} r^{d-1} \propto r^{d-1} e^{-\zeta r}`: :math:`r \sim
\mathrm{Gamma}(\text{shape } d, \text{scale } 1/\zeta)`. :func:`sample_l2_laplace` draws it
exactly that way (direction = normalised standard normal vector). It is the noise of paper 001
(Zhang & Zhu, DVP and PVP) and of Chaudhuri et al.'s objective / output perturbation; its
privacy rests on :math:`K(e)/K(e') \le e^{\zeta \|e - e'\|}`.

Note :math:`E\|e\| = d/\zeta`: in high dimension this noise is much larger per coordinate than
its one-dimensional Laplace counterpart.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from dpfed._validation import DpfedInputError, check_int, check_positive

__all__ = ["as_generator", "l2_laplace_norm_cdf", "sample_l2_laplace"]


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Return ``rng`` as a ``numpy.random.Generator`` (a seed or ``None`` via ``default_rng``).

    Raises
    ------
    DpfedInputError
        If ``rng`` is neither a Generator, a non-negative integer seed nor ``None``.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, bool) or not isinstance(rng, int | np.integer) or int(rng) < 0:
        raise DpfedInputError(
            "rng must be a numpy.random.Generator, a non-negative integer seed or None. "
            f"Found {rng!r}."
        )
    return np.random.default_rng(int(rng))


def sample_l2_laplace(
    zeta: float,
    dim: int,
    rng: np.random.Generator | int | None,
    size: int | None = None,
) -> np.ndarray:
    r"""Draw noise with density proportional to :math:`\exp(-\zeta \|e\|)` on :math:`R^{dim}`.

    Direction uniform on the unit sphere (a standard normal vector, normalised), norm
    :math:`\sim \mathrm{Gamma}(\text{shape}=d, \text{scale}=1/\zeta)`, independent.

    Parameters
    ----------
    zeta : float
        Rate :math:`\zeta > 0` (finite).
    dim : int
        Dimension :math:`d \ge 1`.
    rng : numpy.random.Generator, int or None
        Source of randomness; an integer seeds ``numpy.random.default_rng``, ``None`` draws
        fresh OS entropy.
    size : int or None, default None
        Number of independent vectors; ``None`` for one.

    Returns
    -------
    numpy.ndarray
        Shape ``(dim,)`` for ``size=None``, else ``(size, dim)``.

    Raises
    ------
    DpfedInputError
        On a non-positive or non-finite ``zeta``, ``dim < 1``, ``size < 1`` or a bad ``rng``.
    """
    z = check_positive("zeta", zeta)
    d = check_int("dim", dim, minimum=1)
    n = 1 if size is None else check_int("size", size, minimum=1)
    gen = as_generator(rng)
    directions = gen.standard_normal((n, d))
    norms = np.linalg.norm(directions, axis=1)
    # A zero vector has probability 0; redraw it rather than divide by zero.
    while np.any(norms == 0.0):  # pragma: no cover - probability zero
        bad = norms == 0.0
        directions[bad] = gen.standard_normal((int(bad.sum()), d))
        norms = np.linalg.norm(directions, axis=1)
    radii = gen.gamma(shape=float(d), scale=1.0 / z, size=n)
    out: np.ndarray = directions * (radii / norms)[:, None]
    return out[0] if size is None else out


def l2_laplace_norm_cdf(r: float | np.ndarray, zeta: float, dim: int) -> float | np.ndarray:
    r"""CDF of :math:`\|e\|` for l2-Laplace noise: the :math:`\mathrm{Gamma}(d, 1/\zeta)` CDF.

    .. math::

        P(\|e\| \le r) = \frac{\gamma(d, \zeta r)}{\Gamma(d)}
        = 1 - e^{-\zeta r} \sum_{k=0}^{d-1} \frac{(\zeta r)^k}{k!} .

    Parameters
    ----------
    r : float or numpy.ndarray
        Radius (negative radii give 0).
    zeta : float
        Rate :math:`\zeta > 0`.
    dim : int
        Dimension :math:`d \ge 1`.

    Returns
    -------
    float or numpy.ndarray
        The CDF, with the shape of ``r``.
    """
    z = check_positive("zeta", zeta)
    d = check_int("dim", dim, minimum=1)
    values = stats.gamma.cdf(np.asarray(r, dtype=float), a=d, scale=1.0 / z)
    return float(values) if np.ndim(values) == 0 else values
