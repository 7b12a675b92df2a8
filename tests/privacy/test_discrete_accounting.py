"""Tests for dpfed.privacy.discrete_accounting: honest epsilons of discrete Gaussian releases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant

from dpfed._validation import DpfedInputError
from dpfed.privacy.accounting import gaussian_delta, gaussian_releases_epsilon
from dpfed.privacy.discrete_accounting import (
    delta_ratio_to_continuous,
    discrete_gaussian_delta,
    discrete_gaussian_epsilon,
    distributed_discrete_gaussian_epsilon,
    distributed_discrete_gaussian_rdp,
    distributed_discrete_releases_epsilon,
    distributed_tau,
    grid_releases_delta_slack,
    rdp_inflation,
    rounded_gaussian_tv_bound,
)


@pytest.mark.parametrize(
    ("sigma", "sens", "eps"), [(1.0, 1, 1.0), (3.0, 3, 0.5), (5.0, 2, 2.0), (0.7, 1, 0.0)]
)
def test_delta_is_dp_accountings_discrete_gaussian_pld(sigma, sens, eps):
    exact = discrete_gaussian_delta(sigma * sigma, sens, eps)
    pld = pld_lib.from_discrete_gaussian_mechanism(
        sigma, sensitivity=sens, value_discretization_interval=1e-6
    )
    assert exact == pytest.approx(pld.get_delta_for_epsilon(eps), rel=1e-4, abs=1e-12)


def test_delta_at_zero_epsilon_is_total_variation():
    # delta(0) = TV(N_Z(0), N_Z(1)) = P[X <= 0] - P[X <= -1] summed: P[X = 0] for Delta = 1
    from dpfed.privacy.discrete import discrete_gaussian_pmf

    assert discrete_gaussian_delta(4.0, 1, 0.0) == pytest.approx(
        float(discrete_gaussian_pmf(0, 4)), rel=1e-12
    )


def test_continuous_pld_understates_the_discrete_delta_somewhere():
    eps = np.linspace(0.0, 6.0, 121)
    small = delta_ratio_to_continuous(1.0, 1, eps)
    assert np.nanmax(small) > 2.0  # sigma = Delta = 1: more than twice the continuous delta
    medium = delta_ratio_to_continuous(100.0, 10, eps)
    assert 1.0 < np.nanmax(medium) < 1.05
    large = delta_ratio_to_continuous(2500.0, 50, np.linspace(0.0, 3.0, 61))
    assert np.nanmax(large) < 1.002


def test_honest_epsilon_is_rdp_of_the_gaussian_event():
    zs = [0.8, 2.0, 2.0, 5.0]
    acc = RdpAccountant()
    acc.compose(dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(z) for z in zs]))
    assert discrete_gaussian_epsilon(zs, 1e-5) == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    # and that of the zCDP event rho = sum 1 / (2 z^2)
    zc = RdpAccountant()
    zc.compose(dp_event.ZCDpEvent(sum(1 / (2 * z * z) for z in zs)))
    assert discrete_gaussian_epsilon(zs, 1e-5) == pytest.approx(zc.get_epsilon(1e-5), rel=1e-6)
    assert discrete_gaussian_epsilon([], 1e-5) == 0.0
    with pytest.raises(DpfedInputError, match="noise_multipliers"):
        discrete_gaussian_epsilon([1.0, -1.0], 1e-5)


@pytest.mark.parametrize("z", [0.5, 1.0, 5.0, 20.0])
@pytest.mark.parametrize("steps", [1, 20])
def test_rdp_inflation_over_the_continuous_pld(z, steps):
    ratio = rdp_inflation(z, steps, 1e-5)
    assert 1.0 < ratio < 1.15
    assert ratio == pytest.approx(
        discrete_gaussian_epsilon([z] * steps, 1e-5)
        / gaussian_releases_epsilon([z] * steps, 1e-5, "pld")
    )


def test_gaussian_delta_is_the_analytic_profile():
    from scipy.stats import norm

    z, eps = 1.7, 0.9
    mu = 1 / z
    expected = norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)
    assert gaussian_delta(z, eps) == pytest.approx(expected, rel=1e-10)


def test_distributed_tau_and_rdp():
    assert distributed_tau(1.0, 1) == 0.0
    direct = 10 * sum(math.exp(-2 * math.pi**2 * 0.5 * k / (k + 1)) for k in range(1, 50))
    assert distributed_tau(0.5, 50) == pytest.approx(direct, rel=1e-12)
    assert distributed_tau(4.0, 10**4) < 1e-12
    orders = np.array([1.5, 2.0, 10.0, 64.0])
    # large local sigma: tau vanishes and the bound is the Gaussian's alpha Delta^2 / (2 n s^2)
    rdp = distributed_discrete_gaussian_rdp(orders, 2.0**40, 100, 2.0**20, 1000)
    assert np.allclose(rdp, orders * 2.0**40 / (2 * 100 * 2.0**40), rtol=1e-12)
    # small sigma: tau matters and every order's bound exceeds the Gaussian one
    small = distributed_discrete_gaussian_rdp(orders, 0.3, 20, 1.0, 10)
    assert np.all(small > orders / (2 * 20 * 0.3))
    with pytest.raises(DpfedInputError, match="sigma >= 1/2"):
        distributed_discrete_gaussian_rdp(orders, 0.2, 20, 1.0, 10)


def test_distributed_epsilon_matches_central_rdp_for_large_sigma():
    # n clients with s^2 each, sum of variance n s^2: the central RDP figure at z = sqrt(n) s / D
    n, s2, sens, d = 50, 2.0**36, 2.0**19, 100
    z = math.sqrt(n * s2) / sens
    assert distributed_discrete_gaussian_epsilon(s2, n, sens, d, 1e-5) == pytest.approx(
        discrete_gaussian_epsilon([z], 1e-5), rel=1e-6
    )
    assert distributed_discrete_gaussian_epsilon(s2, n, sens, d, 1e-5, steps=4) == pytest.approx(
        discrete_gaussian_epsilon([z] * 4, 1e-5), rel=1e-6
    )


def _exact_rounded_tv(s: float) -> float:
    """The total variation between N_Z(0, s^2) and rint(N(0, s^2)), summed over +-40 s."""
    from scipy.special import ndtr

    k = np.arange(-int(40 * s) - 5, int(40 * s) + 6, dtype=np.float64)
    p = np.exp(-(k**2) / (2.0 * s * s))
    p /= p.sum()
    r = ndtr((k + 0.5) / s) - ndtr((k - 0.5) / s)
    return 0.5 * float(np.abs(p - r).sum())


@pytest.mark.parametrize("s", [0.5, 1.0, 2.0, 5.0, 20.0, 100.0, 400.0])
def test_the_rounded_gaussian_bound_holds_and_is_tight_for_large_s(s):
    exact, bound = _exact_rounded_tv(s), rounded_gaussian_tv_bound(s)
    assert exact <= bound
    if s >= 20:  # the 1/s^2 term: 4 phi(1) / 48 = 0.0202
        assert bound <= exact * 1.1
        assert exact * s * s == pytest.approx(
            4 * math.exp(-0.5) / math.sqrt(2 * math.pi) / 48, rel=0.01
        )


def test_the_grid_releases_slack_needs_a_finer_grid_than_two_to_the_twenty():
    """a9a's scores: 32,561 coordinates, 16 releases, epsilon 8. At s = 2^20 the slack exceeds
    delta 1e-5; at s = 2^26 (s^2 = 2^52, within the sampler's 64-bit range) it is 1e-3 of it."""
    assert rounded_gaussian_tv_bound(2.0**20) < 2e-14
    coarse = grid_releases_delta_slack([(32561, 2.0**20)] * 16, 8.0)
    assert coarse == pytest.approx(
        (1 + math.exp(8.0)) * 16 * 32561 * rounded_gaussian_tv_bound(2.0**20)
    )
    assert coarse > 1e-5
    assert grid_releases_delta_slack([(32561, 2.0**26)] * 16, 8.0) < 1e-8
    with pytest.raises(DpfedInputError, match="at least 1/2"):
        rounded_gaussian_tv_bound(0.25)


def test_composed_distributed_releases_add_their_renyi_divergences():
    one = (2**48, 9, 2.0**24 * 3 + 2, 4)
    two = (2**50, 9, 2.0**24 * 5 + 3, 9)
    assert distributed_discrete_releases_epsilon([one, one], 1e-5) == pytest.approx(
        distributed_discrete_gaussian_epsilon(*one, 1e-5, steps=2), rel=1e-12
    )
    both = distributed_discrete_releases_epsilon([one, two], 1e-5)
    assert both > max(distributed_discrete_releases_epsilon([r], 1e-5) for r in (one, two))
    # at the ring's scale: the RDP epsilon of one Gaussian with z^-2 = sum of the z_t^-2
    z = [math.sqrt(9 * r[0]) / r[2] for r in (one, two)]
    combined = 1 / math.sqrt(sum(1 / v**2 for v in z))
    assert both == pytest.approx(gaussian_releases_epsilon([combined], 1e-5, "rdp"), rel=1e-9)
    with pytest.raises(DpfedInputError, match="at least one"):
        distributed_discrete_releases_epsilon([], 1e-5)
