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

**The sampler.** :math:`s^2 \ge 2^{16}` (every practical ring: :math:`\sigma_c 2^f \ge 256`)
is drawn by the block-envelope sampler (:mod:`dpfed.privacy.block_gaussian`, two random words
per sample), a block of clients at a time (:func:`clients_discrete_noise`: client :math:`i`'s
row still comes from :math:`G_i` alone); smaller :math:`s^2` by CKS's sampler
(:func:`dpfed.privacy.discrete.discrete_gaussian`). Both are exact; the law is the same.

Used by :func:`dpfed.dca.secure_sum.secure_sum` with ``noise="discrete"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dpfed._validation import check_int, check_positive
from dpfed.dca.fixedpoint import check_fractional_bits
from dpfed.dca.noise import client_noise_generator
from dpfed.privacy.block_gaussian import MIN_SIGMA2, block_gaussian_rows
from dpfed.privacy.discrete import discrete_gaussian

__all__ = [
    "client_discrete_noise",
    "clients_discrete_noise",
    "generators_discrete_noise",
    "ring_noise",
    "ring_sigma2",
]


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


def ring_noise(sigma2: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    r""":math:`\mathcal N_{\mathbb Z}(0, s^2)^D` from ``rng`` (a deployed client's secret
    generator): the block-envelope sampler from :math:`s^2 = 2^{16}`, CKS's below.

    Returns
    -------
    numpy.ndarray of int64, shape (D,)
    """
    d = check_int("dim", dim, minimum=1)
    if sigma2 >= MIN_SIGMA2:
        out: np.ndarray = block_gaussian_rows(sigma2, [rng], d)[0]
        return out
    return discrete_gaussian(sigma2, d, rng)


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
    return clients_discrete_noise(seed, [client], dim, sigma2)[0]


def clients_discrete_noise(seed: int, clients: Sequence[int], dim: int, sigma2: int) -> np.ndarray:
    r"""The noise of several clients at once: row ``j`` is client ``clients[j]``'s
    :func:`client_discrete_noise`, drawn from its own generator :math:`G_i` alone.

    Parameters
    ----------
    seed : int
    clients : sequence of int
        Client indices, each ``>= 0``.
    dim : int
        :math:`D \ge 1`.
    sigma2 : int
        :math:`s^2` (:func:`ring_sigma2`).

    Returns
    -------
    numpy.ndarray of int64, shape (len(clients), D)
    """
    ids = [check_int("client", c, minimum=0) for c in clients]
    return generators_discrete_noise([client_noise_generator(seed, i) for i in ids], dim, sigma2)


def generators_discrete_noise(
    generators: Sequence[np.random.Generator], dim: int, sigma2: int
) -> np.ndarray:
    r"""Row ``j``: :math:`D` draws of :math:`\mathcal N_{\mathbb Z}(0, s^2)` from
    ``generators[j]`` alone (:func:`clients_discrete_noise` once the generators are built).

    Returns
    -------
    numpy.ndarray of int64, shape (len(generators), D)
    """
    d = check_int("dim", dim, minimum=1)
    if sigma2 >= MIN_SIGMA2:
        return block_gaussian_rows(sigma2, list(generators), d)
    return np.stack([discrete_gaussian(sigma2, d, g) for g in generators]).reshape(
        len(generators), d
    )
