r"""The distributed Gaussian mechanism of the DCA secure sum (Heikkilä et al., 2017, Thm 1).

Every client :math:`i` of :math:`N` adds :math:`\eta_i \sim \mathcal N(0, \sigma_c^2 I)` to
its vector :math:`z_i` before the secure sum (:func:`dpfed.dca.secure_sum.secure_sum`), which
releases only :math:`\sum_i (z_i + \eta_i)`. If the query :math:`\sum_i z_i` has
:math:`\ell_2` sensitivity :math:`\Delta_2` and the standard (trusted aggregator) Gaussian
mechanism needs noise of standard deviation :math:`\sigma_{std}` for
:math:`(\varepsilon, \delta)`-DP, the clients take

.. math::

    \sigma_c = \frac{\sigma_{std}}{\sqrt{N - T - 1}} ,

so that the noise of any :math:`N - T - 1` clients alone already has variance
:math:`(N - T - 1)\sigma_c^2 = \sigma_{std}^2`. The guarantee holds while at most :math:`T`
clients collude (reveal or omit their noise) or drop out, and against one further client —
the attacker, who knows and can subtract its own :math:`\eta`. The released sum carries
noise of variance :math:`N \sigma_c^2 = \sigma_{std}^2 \, N / (N - T - 1)` when every client
is aggregated: the price of distributing the noise, :math:`N/(N - T - 1) \to 1`.

Two calibrations of :math:`\sigma_{std}`:

``"classic"``
    the paper's Eq. (1), :math:`\sigma_{std} = \sqrt{2 \ln(1.25/\delta)}\, \Delta_2 /
    \varepsilon` (Dwork & Roth 2014, Thm 3.22). **A DP guarantee only for**
    :math:`\varepsilon \le 1`, so a larger :math:`\varepsilon` is refused: there the formula
    is no theorem, and for small noise it is false (at :math:`\delta = 10^{-5}`, the noise it
    gives for :math:`\varepsilon = 20` has exact epsilon 25.4). Use ``"pld"`` there.
``"pld"`` (default), ``"rdp"``
    the smallest :math:`\sigma_{std} = z \Delta_2` whose single Gaussian release is
    :math:`(\varepsilon, \delta)`-DP by the numerical accountant
    (:func:`dpfed.privacy.accounting.calibrate_noise_multiplier` with one step), valid for
    every :math:`\varepsilon > 0`. The privacy of a Gaussian release depends on
    :math:`\Delta_2/\sigma` only, so it holds for whichever neighbouring relation
    :math:`\Delta_2` was computed under (the paper's: one record replaced).

The derivation is in ``docs/privacy.md``, section "Distributed Gaussian mechanism (secure
sum)".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.dca.discrete_noise import ring_sigma2
from dpfed.privacy.accountants import accountant_names, smallest_certifying
from dpfed.privacy.accounting import (
    calibrate_noise_multiplier,
    classic_gaussian_sigma,
    classic_range_message,
    gaussian_epsilon,
    in_classic_range,
)
from dpfed.privacy.discrete_accounting import distributed_discrete_gaussian_epsilon

__all__ = [
    "DCA_METHODS",
    "DcaCalibration",
    "aggregate_noise_variance",
    "calibrate_dca",
    "dca_client_std",
    "dca_epsilon",
    "honest_clients",
]

#: Calibrations of :math:`\sigma_{std}` offered by :func:`calibrate_dca`.
DCA_METHODS = (*accountant_names(numerical=True), "classic")


@dataclass(frozen=True)
class DcaCalibration:
    r"""Noise of the distributed Gaussian mechanism for one release.

    Attributes
    ----------
    epsilon, delta : float
        The target :math:`(\varepsilon, \delta)`.
    l2_sensitivity : float
        :math:`\Delta_2` of the sum query.
    n_clients, tolerated : int
        :math:`N` and :math:`T`.
    method : str
        ``"classic"``, ``"pld"`` or ``"rdp"``.
    noise_multiplier : float
        :math:`z = \sigma_{std} / \Delta_2`.
    sigma_std : float
        :math:`\sigma_{std}`, the trusted-aggregator standard deviation.
    client_std : float
        :math:`\sigma_c = \sigma_{std}/\sqrt{N - T - 1}`, what each client adds (the
        ``noise_std`` of :func:`dpfed.dca.secure_sum.secure_sum`).
    total_std : float
        :math:`\sqrt{N}\,\sigma_c`, the noise in the released sum when all :math:`N` clients
        are aggregated.
    scale_factor : float
        :math:`N / (N - T - 1)`, the variance of the released noise relative to
        :math:`\sigma_{std}^2`.
    classic_valid : bool
        :math:`\varepsilon \le 1`: the classic formula is a theorem there (always true for
        ``"classic"``, which refuses anything else). For ``"pld"`` / ``"rdp"`` it is
        informative only (their guarantee needs no such condition).
    notes : tuple of str
    """

    epsilon: float
    delta: float
    l2_sensitivity: float
    n_clients: int
    tolerated: int
    method: str
    noise_multiplier: float
    sigma_std: float
    client_std: float
    total_std: float
    scale_factor: float
    classic_valid: bool
    notes: tuple[str, ...] = ()


def honest_clients(n_clients: int, tolerated: int) -> int:
    r""":math:`N - T - 1`, the clients whose noise must suffice; an error if it is below 1.

    Raises
    ------
    DpfedInputError
        If :math:`N - T - 1 < 1`.
    """
    n = check_int("n_clients", n_clients, minimum=1)
    t = check_int("tolerated", tolerated, minimum=0)
    if n - t - 1 < 1:
        raise DpfedInputError(
            "the distributed Gaussian mechanism needs N - T - 1 >= 1: the noise of the clients "
            "that are neither the attacker nor among the T colluding or dropped ones must "
            f"protect the data. Found N = {n} clients and tolerated T = {t} (N - T - 1 = "
            f"{n - t - 1})."
        )
    return n - t - 1


def dca_client_std(
    sigma_std: float | np.ndarray, n_clients: int, tolerated: int = 0
) -> float | np.ndarray:
    r"""Per-client standard deviation :math:`\sigma_c = \sigma_{std} / \sqrt{N - T - 1}`.

    Parameters
    ----------
    sigma_std : float or numpy.ndarray of shape (D,)
        :math:`\sigma_{std}` (per dimension allowed, as in the paper's
        :math:`\sigma_{j,std}`).
    n_clients : int
        :math:`N`.
    tolerated : int, default 0
        :math:`T`.

    Returns
    -------
    float or numpy.ndarray of shape (D,)

    Raises
    ------
    DpfedInputError
        If :math:`N - T - 1 < 1` or ``sigma_std`` is negative or not finite.
    """
    h = honest_clients(n_clients, tolerated)
    arr = np.asarray(sigma_std, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise DpfedInputError(f"sigma_std must be finite and >= 0. Found {sigma_std!r}.")
    out = arr / math.sqrt(h)
    return float(out) if out.ndim == 0 else out


def aggregate_noise_variance(
    sigma_std: float | np.ndarray, n_clients: int, tolerated: int = 0
) -> float | np.ndarray:
    r"""Variance of the noise in the released sum when all :math:`N` clients are aggregated.

    .. math:: N \sigma_c^2 = \frac{N}{N - T - 1} \sigma_{std}^2

    Returns
    -------
    float or numpy.ndarray of shape (D,)
    """
    c = np.asarray(dca_client_std(sigma_std, n_clients, tolerated))
    out = int(n_clients) * c * c
    return float(out) if out.ndim == 0 else out


def calibrate_dca(
    epsilon: float,
    delta: float,
    l2_sensitivity: float,
    n_clients: int,
    tolerated: int = 0,
    *,
    method: str = "pld",
) -> DcaCalibration:
    r"""Noise for an :math:`(\varepsilon, \delta)`-DP release by the DCA secure sum with
    continuous Gaussian noise (``secure_sum(..., noise="gaussian")``; the default exact ring
    noise is calibrated by :func:`calibrate_dca_discrete`).

    .. math::

        \sigma_{std} = \begin{cases}
            \sqrt{2\ln(1.25/\delta)}\,\Delta_2/\varepsilon & \texttt{"classic"}\\
            z^\star(\varepsilon, \delta)\, \Delta_2 & \texttt{"pld"}, \texttt{"rdp"}
        \end{cases}
        \qquad \sigma_c = \frac{\sigma_{std}}{\sqrt{N - T - 1}} .

    Parameters
    ----------
    epsilon : float
        Target :math:`\varepsilon > 0`.
    delta : float
        Target :math:`\delta \in (0, 1)`.
    l2_sensitivity : float
        :math:`\Delta_2 > 0` of the sum :math:`\sum_i z_i` (one record changed).
    n_clients : int
        :math:`N`.
    tolerated : int, default 0
        :math:`T`, colluding or dropped clients tolerated.
    method : {"pld", "rdp", "classic"}, default "pld"
        Calibration of :math:`\sigma_{std}` (module docstring).

    Returns
    -------
    DcaCalibration

    Raises
    ------
    DpfedInputError
        On bad arguments, :math:`N - T - 1 < 1`, or ``method="classic"`` with
        :math:`\varepsilon > 1` (outside the classic theorem; the message names the range).

    Examples
    --------
    >>> cal = calibrate_dca(0.5, 1e-5, 1.0, n_clients=101, tolerated=0, method="classic")
    >>> round(cal.sigma_std, 4), round(cal.client_std, 4)
    (9.6896, 0.969)
    """
    eps = check_positive("epsilon", epsilon)
    dlt = check_open_unit("delta", delta)
    sens = check_positive("l2_sensitivity", l2_sensitivity)
    h = honest_clients(n_clients, tolerated)
    n, t = int(n_clients), int(tolerated)
    if method not in DCA_METHODS:
        raise DpfedInputError(f"method must be one of {DCA_METHODS}. Found {method!r}.")
    notes: list[str] = []
    if method == "classic":
        if not in_classic_range(eps):
            raise DpfedInputError(
                classic_range_message(
                    "method 'classic' (the paper's Eq. 1) uses",
                    dlt,
                    f"epsilon {eps:g}",
                    unit="release",
                    advice="Use method 'pld' or 'rdp', valid for every epsilon.",
                )
            )
        sigma = classic_gaussian_sigma(eps, dlt, sens)
        z = sigma / sens
    else:
        z = calibrate_noise_multiplier(eps, dlt, 1, accountant=method)
        sigma = z * sens
    client = sigma / math.sqrt(h)
    notes.append(
        f"valid while at most T = {t} of the N = {n} clients collude or drop out: the noise of "
        f"any N - T - 1 = {h} clients has standard deviation sigma_std."
    )
    return DcaCalibration(
        epsilon=eps,
        delta=dlt,
        l2_sensitivity=sens,
        n_clients=n,
        tolerated=t,
        method=method,
        noise_multiplier=z,
        sigma_std=sigma,
        client_std=client,
        total_std=client * math.sqrt(n),
        scale_factor=n / h,
        classic_valid=in_classic_range(eps),
        notes=tuple(notes),
    )


def dca_epsilon(
    client_std: float,
    l2_sensitivity: float,
    n_clients: int,
    tolerated: int,
    delta: float,
    *,
    accountant: str = "pld",
) -> float:
    r"""Epsilon certified when every client adds noise of standard deviation ``client_std``.

    The worst case keeps :math:`N - T - 1` honest clients' noise, of standard deviation
    :math:`\sqrt{N - T - 1}\,\sigma_c`, so the noise multiplier is
    :math:`z = \sqrt{N - T - 1}\,\sigma_c / \Delta_2` and the epsilon that of one Gaussian
    release (:func:`dpfed.privacy.accounting.gaussian_epsilon`).

    Parameters
    ----------
    client_std : float
        :math:`\sigma_c > 0`.
    l2_sensitivity : float
        :math:`\Delta_2 > 0`.
    n_clients, tolerated : int
        :math:`N`, :math:`T`.
    delta : float
        :math:`\delta \in (0, 1)`.
    accountant : str, default "pld"
        Any accountant of :mod:`dpfed.privacy.accounting` (``"basic"`` gives the classic
        formula's epsilon, and refuses noise for which it would exceed 1).

    Returns
    -------
    float
    """
    sc = check_positive("client_std", client_std)
    sens = check_positive("l2_sensitivity", l2_sensitivity)
    h = honest_clients(n_clients, tolerated)
    return gaussian_epsilon(math.sqrt(h) * sc / sens, 1, delta, accountant=accountant)


def dca_discrete_epsilon(
    client_std: float,
    l2_sensitivity: float,
    n_clients: int,
    tolerated: int,
    delta: float,
    dim: int,
    fractional_bits: int,
) -> float:
    r"""Epsilon certified when every client adds the exact discrete noise of the secure sum's
    ``noise="discrete"`` (:mod:`dpfed.dca.discrete_noise`).

    Each client adds :math:`\mathcal N_{\mathbb Z}(0, s^2)^d`,
    :math:`s^2 = \lceil(\sigma_c 2^f)^2\rceil` (:func:`~dpfed.dca.discrete_noise.ring_sigma2`),
    to :math:`\operatorname{rint}(z_i 2^f)`; one record moves the encoded sum by at most
    :math:`\Delta_2 2^f + \sqrt d` in :math:`\ell_2` (rounding moves a coordinate by at most one
    unit more than the value). The :math:`N - T - 1` honest clients' noise is accounted by
    the distributed discrete Gaussian's RDP bound (Kairouz, Liu and Steinke 2021,
    :func:`dpfed.privacy.discrete_accounting.distributed_discrete_gaussian_epsilon`).

    Parameters
    ----------
    client_std : float
        :math:`\sigma_c > 0` (real units).
    l2_sensitivity : float
        :math:`\Delta_2 > 0` (real units).
    n_clients, tolerated : int
        :math:`N`, :math:`T`.
    delta : float
    dim : int
        :math:`d`.
    fractional_bits : int
        :math:`f`.

    Returns
    -------
    float
    """
    sens = check_positive("l2_sensitivity", l2_sensitivity)
    d = check_int("dim", dim, minimum=1)
    s2 = ring_sigma2(client_std, fractional_bits)
    h = honest_clients(n_clients, tolerated)
    grid_sensitivity = math.ldexp(sens, fractional_bits) + math.sqrt(d)
    return distributed_discrete_gaussian_epsilon(s2, h, grid_sensitivity, d, delta)


def calibrate_dca_discrete(
    epsilon: float,
    delta: float,
    l2_sensitivity: float,
    n_clients: int,
    tolerated: int,
    dim: int,
    fractional_bits: int,
) -> float:
    r"""The smallest client noise :math:`\sigma_c` whose :func:`dca_discrete_epsilon` is at
    most ``epsilon``, by bisection (relative precision :math:`10^{-9}`,
    :func:`dpfed.privacy.accountants.smallest_certifying`), starting from the
    continuous calibration's :math:`\sigma_c` (which the discrete RDP bound exceeds by a few
    per cent: RDP against PLD, docs/privacy.md).

    Returns
    -------
    float
        :math:`\sigma_c` in real units.
    """
    eps = check_positive("epsilon", epsilon)
    start = calibrate_dca(eps, delta, l2_sensitivity, n_clients, tolerated).client_std

    def spent(std: float) -> float:
        return dca_discrete_epsilon(
            std, l2_sensitivity, n_clients, tolerated, delta, dim, fractional_bits
        )

    return smallest_certifying(spent, eps, bracket=(start * 0.5, start), rtol=1e-9)
