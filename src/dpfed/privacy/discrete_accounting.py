r"""Privacy accounting of discrete Gaussian releases (central and distributed).

**What is proven.** Let :math:`q(x) \in \mathbb Z^d` be an integer-valued query with
:math:`\|q(x) - q(x')\|_2 \le \Delta` for neighbouring :math:`x, x'`, released as
:math:`q(x) + Y`, :math:`Y_j \sim \mathcal N_{\mathbb Z}(0, \sigma^2)` independent.

* Its Rényi divergence of every order :math:`\alpha` is at most :math:`\alpha \Delta^2 /
  (2\sigma^2)`, i.e. it is :math:`\Delta^2/(2\sigma^2)`-zCDP (Canonne, Kamath and Steinke 2020,
  "The Discrete Gaussian for Differential Privacy", Section 2: concentrated DP of the discrete
  Gaussian, and of its product over coordinates; in one dimension with an integer shift the
  divergence equals that bound). This
  is the RDP curve of a continuous Gaussian with the same noise multiplier
  :math:`z = \sigma/\Delta`, so dp-accounting's RDP accountant of ``GaussianDpEvent(z)`` is a
  valid bound for any composition: :func:`discrete_gaussian_epsilon`. Here :math:`\sigma^2`
  is the distribution's *parameter* (its variance is slightly smaller) and :math:`\Delta` the
  sensitivity of the *integer* query, rounding slack included
  (:mod:`dpfed.privacy.grid_release`).
* In one dimension, with an integer sensitivity :math:`\Delta`, the exact privacy profile is
  (CKS Theorem 7)

  .. math::

      \delta(\varepsilon) = P\Big[X > \frac{\varepsilon\sigma^2}{\Delta} - \frac{\Delta}{2}\Big]
      - e^{\varepsilon} P\Big[X > \frac{\varepsilon\sigma^2}{\Delta} + \frac{\Delta}{2}\Big],
      \qquad X \sim \mathcal N_{\mathbb Z}(0, \sigma^2),

  computed by summation in :func:`discrete_gaussian_delta` (as a sum of non-negative terms,
  :math:`\sum_{y:\, L(y) > \varepsilon} P(y)(1 - e^{\varepsilon - L(y)})` with the privacy loss
  :math:`L(y) = (\Delta^2 - 2 y \Delta)/(2\sigma^2)`, so it does not cancel); dp-accounting's
  ``from_discrete_gaussian_mechanism`` builds the same PLD (tested to agree).

**What is not.** The continuous Gaussian's PLD (the ``"pld"`` accountant of
:mod:`dpfed.privacy.accounting`) is *not* a valid bound for the discrete Gaussian in general.
The discrete privacy loss lives on a lattice of step :math:`\Delta/\sigma^2`, and its
:math:`\delta(\varepsilon)` oscillates around the continuous one: over a grid of
:math:`\varepsilon`, the largest ratio :math:`\delta_{discrete}/\delta_{continuous}` at
:math:`z = \sigma/\Delta = 1` is 2.48 at :math:`\Delta = 1`, 1.14 at 4, 1.02 at 10,
:math:`1 + 9 \cdot 10^{-4}` at 50, :math:`1 + 6 \cdot 10^{-5}` at 200 and
:math:`1 + 2 \cdot 10^{-6}` at 1000 (5.15 at :math:`\Delta = 1` for :math:`z = 1/2`;
:func:`delta_ratio_to_continuous`): the excess shrinks like :math:`1/\sigma^2`, which
extrapolates to about :math:`10^{-12}` at the grid releases' :math:`\sigma \approx 2^{20}`. For a
vector the worst case is not even a function of :math:`\|\Delta\|_2`: the PLD of a shift
:math:`\Delta \in \mathbb Z^d` is the convolution of the one-dimensional PLDs of its
coordinates, and which integer vector of norm at most :math:`\Delta` is worst is not known
in closed form. Hence the honest figure here is RDP's, which exceeds the continuous PLD figure
by 5-13 % at noise multipliers 0.5-20 and 1-20 releases, :math:`\delta = 10^{-5}`
(:func:`rdp_inflation`).

**Distributed discrete Gaussian** (Kairouz, Liu and Steinke 2021, "The Distributed Discrete
Gaussian Mechanism for Federated Learning with Secure Aggregation", ICML). If each of
:math:`n` honest clients adds independent :math:`\mathcal N_{\mathbb Z}(0, \sigma^2)^d` noise
and only the sum is released, the noise is a sum of discrete Gaussians, which is not itself
a discrete Gaussian. Their Proposition 14 bounds its Rényi divergence, for
:math:`\sigma \ge 1/2` and :math:`\alpha \ge 1`, by

.. math::

    \min\Big\{ \frac{\alpha}{2}\frac{\Delta_2^2}{n\sigma^2} + \tau d,\
    \frac{\alpha}{2}\Big(\frac{\Delta_2^2}{n\sigma^2} + \frac{2\Delta_1\tau}{\sqrt n\,\sigma}
    + \tau^2 d\Big),\ \frac{\alpha}{2}\Big(\frac{\Delta_2}{\sqrt n\,\sigma}
    + \tau\sqrt d\Big)^2 \Big\},
    \qquad \tau = 10 \sum_{k=1}^{n-1} e^{-2\pi^2\sigma^2 k/(k+1)} ,

with :math:`\Delta_1` the :math:`\ell_1` sensitivity (for an integer vector
:math:`\Delta_1 \le \min(\sqrt d\,\Delta_2, \Delta_2^2)`). :math:`\tau` is the price of
the sum not being a discrete Gaussian; it is below :math:`10^{-16} n` once
:math:`\sigma \ge 2`. :func:`distributed_discrete_gaussian_epsilon` converts this curve with
dp-accounting's RDP conversion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.accounting import (
    gaussian_delta,
    gaussian_releases_epsilon,
    rdp_epsilon,
    rdp_orders,
)
from dpfed.privacy.coupling import grid_releases_delta_slack, rounded_gaussian_tv_bound

__all__ = [
    "delta_ratio_to_continuous",
    "discrete_gaussian_delta",
    "discrete_gaussian_epsilon",
    "distributed_discrete_gaussian_epsilon",
    "distributed_discrete_gaussian_rdp",
    "distributed_discrete_releases_epsilon",
    "distributed_tau",
    "grid_releases_delta_slack",
    "rdp_inflation",
    "rounded_gaussian_tv_bound",
]

#: Largest :math:`\sigma` for which :func:`discrete_gaussian_delta` sums term by term.
_MAX_SUMMED_SIGMA = 1.0e5


def discrete_gaussian_delta(sigma2: float, sensitivity: int, epsilon: float) -> float:
    r"""Exact :math:`\delta(\varepsilon)` of the one-dimensional discrete Gaussian mechanism
    (CKS Theorem 7), by summation.

    .. math::

        \delta(\varepsilon) = \sum_{y < \Delta/2 - \varepsilon\sigma^2/\Delta}
        P(y)\,\big(1 - e^{\varepsilon - L(y)}\big), \qquad
        L(y) = \frac{\Delta^2 - 2 y \Delta}{2\sigma^2},

    :math:`P` the pmf of :math:`\mathcal N_{\mathbb Z}(0, \sigma^2)`, summed over the
    :math:`y` within :math:`40\sigma` of the range (the rest is below :math:`e^{-800}`).

    Parameters
    ----------
    sigma2 : float
        :math:`\sigma^2 > 0`, with :math:`\sigma \le 10^5`.
    sensitivity : int
        Integer :math:`\Delta \ge 1`.
    epsilon : float
        :math:`\varepsilon \ge 0`.

    Returns
    -------
    float
        :math:`\delta \in [0, 1]`.

    Raises
    ------
    DpfedInputError
        On a bad argument, or :math:`\sigma > 10^5` (too many terms; the discrete and
        continuous profiles agree to float precision long before).
    """
    s2 = check_positive("sigma2", sigma2)
    d = check_int("sensitivity", sensitivity, minimum=1)
    eps = check_positive("epsilon", epsilon, allow_zero=True)
    sigma = math.sqrt(s2)
    if sigma > _MAX_SUMMED_SIGMA:
        raise DpfedInputError(
            f"discrete_gaussian_delta sums term by term up to sigma = {_MAX_SUMMED_SIGMA:g}. "
            f"Found sigma = {sigma:g}."
        )
    span = math.ceil(40.0 * sigma) + 2
    threshold = d / 2.0 - eps * s2 / d  # L(y) > eps  <=>  y < threshold
    top = math.ceil(threshold) - 1
    if top < -span:
        return 0.0
    ys = np.arange(max(-span, min(top, 0) - span), top + 1, dtype=np.float64)
    loss = (d * d - 2.0 * ys * d) / (2.0 * s2)
    terms = np.exp(-ys * ys / (2.0 * s2)) * -np.expm1(eps - loss)
    support = np.arange(-span, span + 1, dtype=np.float64)
    normaliser = float(np.sum(np.exp(-support * support / (2.0 * s2))))
    return float(np.sum(terms)) / normaliser


def delta_ratio_to_continuous(
    sigma2: float, sensitivity: int, epsilons: Sequence[float], *, floor: float = 1e-12
) -> np.ndarray:
    r""":math:`\delta_{discrete}(\varepsilon) / \delta_{continuous}(\varepsilon)` on a grid.

    The continuous profile is that of a Gaussian of standard deviation :math:`\sigma`
    (:func:`dpfed.privacy.accounting.gaussian_delta` at :math:`z = \sigma/\Delta`). A ratio
    above 1 is an :math:`\varepsilon` at which the continuous PLD would understate the
    discrete mechanism's :math:`\delta`.

    Parameters
    ----------
    sigma2 : float
    sensitivity : int
    epsilons : sequence of float
    floor : float, default 1e-12
        Grid points where the continuous :math:`\delta` is below ``floor`` are skipped (NaN).

    Returns
    -------
    numpy.ndarray of float64, shape (len(epsilons),)
    """
    z = math.sqrt(check_positive("sigma2", sigma2)) / check_int("sensitivity", sensitivity)
    out = np.full(len(epsilons), np.nan)
    for i, eps in enumerate(epsilons):
        cont = gaussian_delta(z, eps)
        if cont >= floor:
            out[i] = discrete_gaussian_delta(sigma2, sensitivity, eps) / cont
    return out


def discrete_gaussian_epsilon(noise_multipliers: Sequence[float], delta: float) -> float:
    r"""An honest :math:`\varepsilon` at ``delta`` for a sequence of discrete Gaussian
    releases.

    Release :math:`t` adds :math:`\mathcal N_{\mathbb Z}(0, \sigma_t^2)` to each coordinate of
    an integer query of :math:`\ell_2` sensitivity :math:`\Delta_t`; its multiplier is
    :math:`z_t = \sigma_t/\Delta_t`. Each is :math:`1/(2 z_t^2)`-zCDP (module docstring),
    the RDP curve of ``GaussianDpEvent(z_t)``, composed and converted by dp-accounting's
    ``RdpAccountant`` (:func:`dpfed.privacy.accounting.gaussian_releases_epsilon` with
    ``"rdp"``).

    Parameters
    ----------
    noise_multipliers : sequence of float
        :math:`z_t > 0`.
    delta : float
        Total :math:`\delta \in (0, 1)`.

    Returns
    -------
    float
        The epsilon; 0.0 for no releases.
    """
    zs = [check_positive(f"noise_multipliers[{i}]", z) for i, z in enumerate(noise_multipliers)]
    d = check_open_unit("delta", delta)
    return gaussian_releases_epsilon(zs, d, "rdp")


def rdp_inflation(noise_multiplier: float, steps: int, delta: float) -> float:
    r"""How much larger the honest (RDP) epsilon of ``steps`` discrete Gaussian releases is
    than the continuous Gaussian's exact (PLD) epsilon of the same multipliers.

    Returns
    -------
    float
        :math:`\varepsilon_{RDP} / \varepsilon_{PLD} \ge 1`.
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    t = check_int("steps", steps, minimum=1)
    d = check_open_unit("delta", delta)
    return discrete_gaussian_epsilon([z] * t, d) / gaussian_releases_epsilon([z] * t, d, "pld")


def distributed_tau(sigma2: float, clients: int) -> float:
    r""":math:`\tau = 10 \sum_{k=1}^{n-1} e^{-2\pi^2\sigma^2 k/(k+1)}` (KLS Theorem 1).

    Parameters
    ----------
    sigma2 : float
        Each client's :math:`\sigma^2` (grid units).
    clients : int
        :math:`n \ge 1`.
    """
    s2 = check_positive("sigma2", sigma2)
    n = check_int("clients", clients, minimum=1)
    k = np.arange(1, n, dtype=np.float64)
    return 10.0 * float(np.sum(np.exp(-2.0 * math.pi**2 * s2 * k / (k + 1.0))))


def distributed_discrete_gaussian_rdp(
    orders: Sequence[float] | np.ndarray,
    sigma2: float,
    clients: int,
    l2_sensitivity: float,
    dim: int,
    *,
    l1_sensitivity: float | None = None,
) -> np.ndarray:
    r"""Rényi divergence bound of one release of a sum of :math:`n` clients' discrete
    Gaussian noise (KLS Proposition 14, module docstring), at each order.

    Parameters
    ----------
    orders : sequence of float
        :math:`\alpha \ge 1`.
    sigma2 : float
        Each client's :math:`\sigma^2` (grid units), :math:`\sigma \ge 1/2`.
    clients : int
        :math:`n`: the clients whose noise is unknown to the attacker (in dpfed's secure sum,
        :math:`N - T - 1`).
    l2_sensitivity : float
        :math:`\Delta_2` of the integer sum (grid units, rounding slack included).
    dim : int
        :math:`d`.
    l1_sensitivity : float, optional
        :math:`\Delta_1`; default :math:`\min(\sqrt d\,\Delta_2, \Delta_2^2)`.

    Returns
    -------
    numpy.ndarray of float64, shape (len(orders),)
    """
    s2 = check_positive("sigma2", sigma2)
    if s2 < 0.25:
        raise DpfedInputError(
            f"the distributed discrete Gaussian bound needs sigma >= 1/2 per client. "
            f"Found sigma2 = {s2:g}."
        )
    n = check_int("clients", clients, minimum=1)
    l2 = check_positive("l2_sensitivity", l2_sensitivity)
    d = check_int("dim", dim, minimum=1)
    l1 = (
        min(math.sqrt(d) * l2, l2 * l2)
        if l1_sensitivity is None
        else check_positive("l1_sensitivity", l1_sensitivity)
    )
    alpha = np.asarray(orders, dtype=np.float64)
    if np.any(alpha < 1.0):
        raise DpfedInputError("orders must all be >= 1.")
    tau = distributed_tau(s2, n)
    scale2 = l2 / math.sqrt(n * s2)
    scale1 = l1 / math.sqrt(n * s2)
    first = alpha / 2.0 * scale2**2 + tau * d
    second = alpha / 2.0 * (scale2**2 + 2.0 * scale1 * tau + tau * tau * d)
    third = alpha / 2.0 * (scale2 + tau * math.sqrt(d)) ** 2
    out: np.ndarray = np.minimum(np.minimum(first, second), third)
    return out


def distributed_discrete_gaussian_epsilon(
    sigma2: float,
    clients: int,
    l2_sensitivity: float,
    dim: int,
    delta: float,
    *,
    steps: int = 1,
    l1_sensitivity: float | None = None,
) -> float:
    r"""Epsilon at ``delta`` of ``steps`` releases of the distributed discrete Gaussian.

    The per-order bound of :func:`distributed_discrete_gaussian_rdp`, times ``steps``,
    converted by dp-accounting's ``compute_epsilon`` over its default orders.

    Returns
    -------
    float
    """
    d = check_open_unit("delta", delta)
    t = check_int("steps", steps, minimum=1)
    orders = rdp_orders()
    rdp = t * distributed_discrete_gaussian_rdp(
        orders, sigma2, clients, l2_sensitivity, dim, l1_sensitivity=l1_sensitivity
    )
    return rdp_epsilon(orders, rdp, d)


def distributed_discrete_releases_epsilon(
    releases: Sequence[tuple[float, int, float, int]], delta: float
) -> float:
    r"""Epsilon at ``delta`` of several releases of the distributed discrete Gaussian, composed.

    Each release is ``(sigma2, clients, l2_sensitivity, dim)`` as in
    :func:`distributed_discrete_gaussian_rdp` (grid units); Rényi divergences add under
    adaptive composition, so the per-order bounds are summed and converted once by
    dp-accounting's ``compute_epsilon`` over its default orders.

    Parameters
    ----------
    releases : sequence of (float, int, float, int)
        At least one.
    delta : float

    Returns
    -------
    float
    """
    d = check_open_unit("delta", delta)
    if not releases:
        raise DpfedInputError("releases must hold at least one release.")
    orders = rdp_orders()
    rdp = np.zeros_like(orders)
    for sigma2, clients, l2, dim in releases:
        rdp += distributed_discrete_gaussian_rdp(orders, sigma2, clients, l2, dim)
    return rdp_epsilon(orders, rdp, d)
