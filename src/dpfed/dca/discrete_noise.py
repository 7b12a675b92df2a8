r"""Each client's discrete Gaussian noise in the secure sum's ring (the distributed discrete
Gaussian), reproducible per client from the run's seed.

The secure sum encodes :math:`z_i + \eta_i` as :math:`\operatorname{rint}((z_i + \eta_i)
2^f)` with continuous :math:`\eta_i` (:mod:`dpfed.dca.noise`). The exact alternative adds the
noise after the encoding, in the integers:

.. math::

    e_i = \operatorname{rint}(z_i 2^f) + K_i, \qquad
    K_{ij} \sim \mathcal N_{\mathbb Z}(0, s^2), \qquad s^2 = \lceil (\sigma_c 2^f)^2 \rceil,

so every share, node sum and the released sum are integers whose law is exactly the one the
accounting is about (Kairouz, Liu and Steinke 2021; the sum of the honest clients' :math:`K_i`
is accounted by
:func:`dpfed.privacy.discrete_accounting.distributed_discrete_gaussian_epsilon`, with the
sensitivity of the encoded sum in grid units, :math:`\Delta_2 2^f + \sqrt d`, as in
:mod:`dpfed.privacy.grid_release`). :math:`K_i` comes from the same per-client generator
:math:`G_i` as the continuous noise (:func:`dpfed.dca.noise.client_noise_generator`), so a
client that runs alone draws the same :math:`K_i` as the in-process simulation.

**Why not Skellam noise** (Agarwal, Kairouz and Liu 2021): the sum of independent Skellam
variables is Skellam, which makes the accounting of the sum exact, but a Skellam draw is the
difference of two Poisson draws, and numpy's Poisson sampler computes in floating point
(transformed rejection with logarithms and a log-gamma approximation for large means). Its
output is an integer, so the floating-point holes that Mironov exploited do not appear, but its
law is only approximately Poisson (the acceptance test is evaluated in floating point), and
numpy documents no bound on the deviation. The discrete Gaussian has an exact
integer-only sampler (:mod:`dpfed.privacy.discrete`); Skellam would need an exact Poisson
sampler too.

Used by :func:`dpfed.dca.secure_sum.secure_sum` with ``noise="discrete"`` (an option: about
12 times slower than the float noise; ``docs/privacy.md``, section "Samplers", has the
measured cost and the plan to make it the default).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpfed._validation import check_int, check_positive
from dpfed.dca.fixedpoint import check_fractional_bits
from dpfed.dca.noise import client_noise_generator
from dpfed.privacy.discrete import discrete_gaussian

__all__ = ["client_discrete_noise", "ring_sigma2"]


def ring_sigma2(client_std: float, fractional_bits: int) -> int:
    r""":math:`s^2 = \lceil (\sigma_c 2^f)^2 \rceil`: a client's noise parameter in units of
    :math:`2^{-f}`, exactly (so :math:`s \ge \sigma_c 2^f`).

    Parameters
    ----------
    client_std : float
        :math:`\sigma_c > 0` (real units).
    fractional_bits : int
        :math:`f` of the fixed-point encoding.

    Returns
    -------
    int
    """
    sc = check_positive("client_std", client_std)
    f = check_fractional_bits(fractional_bits)
    scaled = Fraction(math.ldexp(sc, f))
    s2 = scaled * scaled
    return -((-s2.numerator) // s2.denominator)


def client_discrete_noise(seed: int, client: int, dim: int, sigma2: int) -> np.ndarray:
    r"""Client ``client``'s noise :math:`K_i \sim \mathcal N_{\mathbb Z}(0, s^2)^{D}`, drawn
    exactly from its generator :math:`G_i`.

    Parameters
    ----------
    seed : int
        The run's noise seed :math:`s` (:func:`dpfed.dca.noise.noise_seed`).
    client : int
        Client index :math:`i \ge 0`.
    dim : int
        :math:`D \ge 1`.
    sigma2 : int
        :math:`s^2` (:func:`ring_sigma2`).

    Returns
    -------
    numpy.ndarray of int64, shape (D,)
    """
    i = check_int("client", client, minimum=0)
    d = check_int("dim", dim, minimum=1)
    return discrete_gaussian(sigma2, d, client_noise_generator(seed, i))
