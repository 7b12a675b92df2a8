r"""Exact grid releases accounted like continuous Gaussians: the coupling's delta.

Every Gaussian release of dpfed draws its noise exactly, on a power-of-two grid
(:class:`dpfed.privacy.grid_release.GridGaussianRelease`): it outputs the integer
:math:`m + K`, with :math:`m` the query rounded to the grid and
:math:`K \sim \mathcal N_{\mathbb Z}(0, s^2)^d`, :math:`s \ge 2^{b}`
(:data:`RELEASE_GRID_BITS`). With :math:`K` replaced by a *rounded* continuous Gaussian,
:math:`m + \operatorname{rint}(G) = \operatorname{rint}(m + G)` is post-processing of the
continuous Gaussian mechanism on :math:`m`, whose privacy profile the accountants of
:mod:`dpfed.privacy.accounting` compute (at the release's noise multiplier, which the grid
release keeps at or above the one accounted). The two noises are within
:math:`d\,\mathrm{TV}(s)` in total variation (:func:`rounded_gaussian_tv_bound`), and a
hybrid argument over an adaptive sequence of releases adds these up to
:math:`H = \sum_t d_t \mathrm{TV}(s_t)` (:func:`grid_releases_delta_slack`). So a party
whose continuous accounting gives :math:`(\varepsilon, \delta_C)` is
:math:`(\varepsilon, \delta_C + (1 + e^{\varepsilon})H)`-DP: :func:`coupling_delta` is that
excess for :math:`C` coordinates released in all, and :func:`epsilon_with_coupling` the
epsilon at a total delta with it included. At :math:`s = 2^{26}`,
:math:`\mathrm{TV} \le 4.5 \cdot 10^{-18}` per coordinate: a9a's passive party at
epsilon 8 (16 score releases of 32,561 coordinates) adds :math:`7 \cdot 10^{-9}`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from dpfed._validation import DpfedInputError, check_int, check_positive

__all__ = [
    "COORDINATE_TV",
    "RELEASE_GRID_BITS",
    "SAMPLER",
    "calibration_delta",
    "coupling_delta",
    "epsilon_with_coupling",
    "grid_releases_delta_slack",
    "rounded_gaussian_tv_bound",
]

#: :math:`b`: every release's grid has :math:`\sigma/\gamma \in [2^{b}, 2^{b+1})`, so its
#: discrete Gaussian has :math:`s \ge 2^{b}` grid units (:math:`s^2 \approx 2^{52}`, inside
#: the sampler's 64-bit integers).
RELEASE_GRID_BITS = 26


def rounded_gaussian_tv_bound(s: float) -> float:
    r"""An upper bound on the total variation distance between :math:`\mathcal N_{\mathbb
    Z}(0, s^2)` and the continuous :math:`\mathcal N(0, s^2)` rounded to the nearest integer.

    With :math:`\varphi_s` the normal density, the rounded Gaussian's pmf is
    :math:`r(k) = \int_{k-1/2}^{k+1/2}\varphi_s`, and the discrete Gaussian's is
    :math:`p(k) = \varphi_s(k) / (1 + \varepsilon_P)` with :math:`1 + \varepsilon_P =
    \sum_k \varphi_s(k) = 1 + 2\sum_{j \ge 1} e^{-2\pi^2 s^2 j^2}` (Poisson summation).
    Then :math:`\sum_k |p(k) - \varphi_s(k)| = \varepsilon_P`, and the midpoint rule gives
    :math:`r(k) - \varphi_s(k) = \varphi_s^{(2)}(\xi_k)/24` for some :math:`\xi_k` within
    1/2 of :math:`k`; a function's supremum on an interval of length 1 is at most its integral
    there plus the integral of its derivative's absolute value, so

    .. math::

        \mathrm{TV} \le \frac{\varepsilon_P}{2} + \frac{1}{48}\Big(\int|\varphi_s^{(2)}|
        + \int|\varphi_s^{(3)}|\Big) = \frac{\varepsilon_P}{2}
        + \frac{1}{48}\Big(\frac{4\varphi(1)}{s^2}
        + \frac{2\varphi(0) + 8\varphi(\sqrt3)}{s^3}\Big)

    (:math:`\int|\varphi_s^{(2)}| = E|X^2 - 1|/s^2` and :math:`\int|\varphi_s^{(3)}| =
    E|X^3 - 3X|/s^3` for a standard normal :math:`X`, in closed form), about
    :math:`0.0202/s^2`: below :math:`2 \cdot 10^{-14}` from :math:`s = 2^{20}`. Tested
    against the exact distance, summed, at small :math:`s`.

    Parameters
    ----------
    s : float
        :math:`s \ge 1/2`.

    Returns
    -------
    float
    """
    scale = check_positive("s", s)
    if scale < 0.5:
        raise DpfedInputError(f"s must be at least 1/2. Found {scale}.")

    def phi(x: float) -> float:
        return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)

    q = math.exp(-2.0 * math.pi**2 * scale**2)
    poisson = 2.0 * q / (1.0 - q)  # 2 sum_{j >= 1} q^(j^2) <= 2 q / (1 - q)
    second = 4.0 * phi(1.0) / scale**2
    third = (2.0 * phi(0.0) + 8.0 * phi(math.sqrt(3.0))) / scale**3
    return 0.5 * poisson + (second + third) / 48.0


def grid_releases_delta_slack(releases: Sequence[tuple[int, float]], epsilon: float) -> float:
    r"""What grid releases add to the :math:`\delta` of the continuous Gaussian's accounting.

    A grid release outputs :math:`m + K` with :math:`m` the rounded integer query and
    :math:`K \sim \mathcal N_{\mathbb Z}(0, s^2)^d`. Replacing :math:`K` by a rounded
    continuous Gaussian gives :math:`m + \operatorname{rint}(G) = \operatorname{rint}(m + G)`:
    post-processing of the continuous Gaussian mechanism on :math:`m`, whose privacy profile
    :math:`\delta_C(\varepsilon)` the PLD accountant computes exactly (multiplier
    :math:`s/\Delta_{grid}`). The two noises are within :math:`\eta = d\,\mathrm{TV}_1(s)` in
    total variation (:func:`rounded_gaussian_tv_bound`, a union over the coordinates),
    whatever the input; over an adaptive sequence of releases the joint laws are within
    :math:`H = \sum_t \eta_t` (a hybrid argument). For every event :math:`S`,

    .. math::

        P[D(x) \in S] \le P[C(x) \in S] + H \le e^{\varepsilon}P[C(x') \in S]
        + \delta_C(\varepsilon) + H \le e^{\varepsilon}P[D(x') \in S]
        + \delta_C(\varepsilon) + (1 + e^{\varepsilon})H,

    so the grid releases are :math:`(\varepsilon, \delta_C(\varepsilon) + (1 +
    e^{\varepsilon})H)`-DP: the continuous PLD stays valid with this slack added to its
    :math:`\delta`.

    Parameters
    ----------
    releases : sequence of (int, float)
        ``(d, s)`` of every release: its coordinates and its discrete Gaussian's :math:`s`.
    epsilon : float
        The :math:`\varepsilon \ge 0` at which the slack is charged.

    Returns
    -------
    float
        :math:`(1 + e^{\varepsilon}) \sum_t d_t\, \mathrm{TV}_1(s_t)`.
    """
    eps = check_positive("epsilon", epsilon, allow_zero=True)
    total = math.fsum(
        check_int("d", d, minimum=1) * rounded_gaussian_tv_bound(s) for d, s in releases
    )
    return (1.0 + math.exp(eps)) * total


#: :func:`rounded_gaussian_tv_bound` at :math:`s = 2^{b}`, :data:`RELEASE_GRID_BITS`: the
#: total variation charged per released coordinate (every release's :math:`s` is at least
#: that, and the bound decreases in :math:`s`).
COORDINATE_TV = rounded_gaussian_tv_bound(2.0**RELEASE_GRID_BITS)

#: What a result's ``privacy.sampler`` says of a release drawn here.
SAMPLER = (
    f"exact discrete Gaussian on a power-of-two grid (at least 2^{RELEASE_GRID_BITS} units "
    "per noise deviation); accounted as the continuous Gaussian plus the coupling's delta "
    "(RDP and the moments accountant need none)"
)

# Above this epsilon e^epsilon overflows; the coupling's delta is then infinite.
_MAX_EXP = 700.0


def coupling_delta(coordinates: int, epsilon: float) -> float:
    r"""What ``coordinates`` exactly sampled coordinates add to a party's delta at
    ``epsilon``: :math:`(1 + e^{\varepsilon})\,C\,\mathrm{TV}(2^{b})`.

    Parameters
    ----------
    coordinates : int
        :math:`C \ge 0`, the coordinates of all the party's grid releases together.
    epsilon : float
        :math:`\varepsilon \ge 0`.

    Returns
    -------
    float
        The excess delta (``inf`` when :math:`e^{\varepsilon}` overflows).
    """
    c = check_int("coordinates", coordinates, minimum=0)
    eps = check_positive("epsilon", epsilon, allow_zero=True)
    if c == 0:
        return 0.0
    if eps > _MAX_EXP:
        return math.inf
    return (1.0 + math.exp(eps)) * c * COORDINATE_TV


def _upper(epsilon: float) -> float:
    """A little above ``epsilon``: the point at which the coupling's delta is charged."""
    return epsilon * (1.0 + 2.0**-7) + 1e-9


def epsilon_with_coupling(
    epsilon_at: Callable[[float], float],
    delta: float,
    coordinates: int,
    fallback: Callable[[], float] | None = None,
) -> float:
    r"""Epsilon of a party's grid releases at total ``delta``, the coupling included.

    With :math:`\varepsilon_C(\delta')` the continuous accounting (``epsilon_at``), for a
    candidate :math:`u`: :math:`\eta = ` :func:`coupling_delta` :math:`(C, u)` and
    :math:`\varepsilon^* = \varepsilon_C(\delta - \eta)`. If :math:`\varepsilon^* \le u`,
    the coupling's delta at :math:`\varepsilon^*` is at most :math:`\eta` (it increases with
    epsilon), so the total is at most :math:`(\delta - \eta) + \eta = \delta`: the answer.
    The candidates are :math:`u = \varepsilon_C(\delta)(1 + 2^{-7})` (enough whenever the
    coupling is a small part of delta) and then :math:`u = \varepsilon_C(\delta/2)`, which
    always works when :math:`\eta \le \delta/2`.

    Parameters
    ----------
    epsilon_at : callable
        :math:`\delta' \mapsto \varepsilon_C(\delta')`, the continuous accounting.
    delta : float
        Total :math:`\delta \in (0, 1)`.
    coordinates : int
        :math:`C \ge 0`; with 0 this is ``epsilon_at(delta)``.
    fallback : callable or None
        An accounting that holds for the exact sampler as it is (RDP: the discrete Gaussian
        has the continuous one's Rényi divergences), used when the coupling would take more
        than half of ``delta`` (large epsilons: it grows like :math:`e^{\varepsilon}`).

    Returns
    -------
    float

    Raises
    ------
    DpfedInputError
        If the coupling would take more than half of ``delta`` and there is no fallback.
    """
    c = check_int("coordinates", coordinates, minimum=0)
    if c == 0:
        return float(epsilon_at(delta))
    candidates = (_upper(float(epsilon_at(delta))), float(epsilon_at(delta / 2.0)))
    eta = math.inf
    for upper in candidates:
        eta = coupling_delta(c, upper)
        if eta <= delta / 2.0:
            eps = float(epsilon_at(delta - eta))
            if eps <= upper:
                return eps
    if fallback is not None:
        return float(fallback())
    raise DpfedInputError(
        f"the exact sampler's coupling over {c} released coordinates would take {eta:.3g} of "
        f"delta {delta:g}: more than half. Release fewer coordinates or raise delta."
    )


def calibration_delta(delta: float, coordinates: int, epsilon: float) -> float:
    r"""The delta to calibrate the continuous accounting to, so that
    :func:`epsilon_with_coupling` at ``delta`` reports at most ``epsilon``.

    :math:`\delta - ` :func:`coupling_delta` :math:`(C, \varepsilon(1 + 2^{-7}))`: a
    multiplier with :math:`\varepsilon_C(\delta_{cal}) \le \varepsilon` has
    :math:`\varepsilon_C(\delta) \le \varepsilon`, so the first candidate of
    :func:`epsilon_with_coupling` charges at most this coupling and reports at most
    :math:`\varepsilon_C(\delta_{cal}) \le \varepsilon`. When the coupling would take more
    than half of delta this returns ``delta`` itself: the report then comes from the fallback
    (RDP), and the calibrator must check it (every calibrator here checks the reported
    epsilon against the target).
    """
    eta = coupling_delta(coordinates, _upper(epsilon))
    if not eta <= delta / 2.0:
        return delta
    return delta - eta
