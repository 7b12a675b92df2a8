"""The distributed Gaussian mechanism: calibration and the variance of the released noise."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.dca import secure_sum
from dpfed.dca.calibration import (
    aggregate_noise_variance,
    calibrate_dca,
    dca_client_std,
    dca_epsilon,
    honest_clients,
)
from dpfed.privacy.accounting import gaussian_epsilon


def test_classic_calibration_is_the_papers_formula():
    cal = calibrate_dca(0.5, 1e-5, 2.0, n_clients=101, tolerated=0, method="classic")
    sigma = math.sqrt(2 * math.log(1.25 / 1e-5)) * 2.0 / 0.5
    assert cal.sigma_std == pytest.approx(sigma, rel=1e-12)
    assert cal.client_std == pytest.approx(sigma / 10.0, rel=1e-12)
    assert cal.total_std == pytest.approx(sigma / 10.0 * math.sqrt(101), rel=1e-12)
    assert cal.scale_factor == pytest.approx(101 / 100)
    assert cal.classic_valid and cal.noise_multiplier == pytest.approx(sigma / 2.0)


@pytest.mark.parametrize("epsilon", [1.0001, 2.0, 20.0])
def test_classic_above_epsilon_one_is_refused(epsilon):
    # the paper's Eq. 1 is a theorem only for epsilon <= 1; at epsilon 20 its noise has exact
    # epsilon 25.4, so it must not be offered as a calibration
    with pytest.raises(
        DpfedInputError,
        match=r"method 'classic'.*proven only for a per-release epsilon <= 1, i\.e\. noise "
        r"multiplier >= 4\.84 at per-release delta 1e-05; found epsilon "
        + f"{epsilon:g}"
        + r"\. Use method 'pld' or 'rdp'",
    ):
        calibrate_dca(epsilon, 1e-5, 1.0, n_clients=50, method="classic")
    if epsilon < 10:  # (PLD calibration at tiny noise takes seconds)
        # pld calibrates the same target, and reports the classic formula as outside its range
        cal = calibrate_dca(epsilon, 1e-5, 1.0, n_clients=50, method="pld")
        assert not cal.classic_valid


def test_classic_at_epsilon_one_is_inside_the_range():
    cal = calibrate_dca(1.0, 1e-5, 1.0, n_clients=50, method="classic")
    assert cal.classic_valid
    assert cal.noise_multiplier == pytest.approx(math.sqrt(2 * math.log(1.25e5)), rel=1e-12)
    assert not any("epsilon" in note for note in cal.notes)


CLASSIC_GRID = [(eps, delta) for eps in (0.01, 0.1, 0.5, 0.9, 1.0) for delta in (1e-2, 1e-5, 1e-9)]


@pytest.mark.parametrize(("epsilon", "delta"), CLASSIC_GRID)
def test_classic_calibration_is_a_guarantee_and_round_trips(epsilon, delta):
    cal = calibrate_dca(epsilon, delta, 2.0, n_clients=20, tolerated=3, method="classic")
    # the honest clients' noise is one Gaussian release with multiplier z: its exact epsilon
    # (analytic Gaussian mechanism) must not exceed the target
    z = math.sqrt(20 - 3 - 1) * cal.client_std / 2.0
    assert z == pytest.approx(cal.noise_multiplier, rel=1e-12)
    assert dp_accounting.get_epsilon_gaussian(z, delta) <= epsilon
    # and reading the noise back through the classic formula gives the target
    assert dca_epsilon(cal.client_std, 2.0, 20, 3, delta, accountant="basic") == pytest.approx(
        epsilon, rel=1e-12
    )


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.0])
def test_pld_calibration_is_tight_for_any_epsilon(epsilon):
    cal = calibrate_dca(epsilon, 1e-6, 3.0, n_clients=40, tolerated=4, method="pld")
    # the honest clients' noise alone is a Gaussian mechanism at exactly the target epsilon
    spent = dca_epsilon(cal.client_std, 3.0, 40, 4, 1e-6)
    assert spent <= epsilon * (1 + 1e-6) and spent == pytest.approx(epsilon, rel=2e-3)
    z = math.sqrt(40 - 4 - 1) * cal.client_std / 3.0
    assert gaussian_epsilon(z, 1, 1e-6) == pytest.approx(spent)
    if epsilon < 1:  # the classic formula is valid there, and looser
        assert cal.sigma_std < calibrate_dca(epsilon, 1e-6, 3.0, 40, 4, method="classic").sigma_std


def test_fewer_than_one_honest_client_is_refused():
    assert honest_clients(5, 3) == 1
    with pytest.raises(DpfedInputError, match=r"N - T - 1 >= 1.*N = 5.*T = 4"):
        calibrate_dca(1.0, 1e-5, 1.0, n_clients=5, tolerated=4)
    with pytest.raises(DpfedInputError, match="N - T - 1"):
        dca_client_std(1.0, 1, 0)


def test_per_dimension_sigma():
    sigma = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(dca_client_std(sigma, 10, 1), sigma / math.sqrt(8))
    np.testing.assert_allclose(aggregate_noise_variance(sigma, 10, 1), 10 * sigma**2 / 8)


def test_empirical_variance_of_the_aggregated_noise():
    """Var(sum_i eta_i) = N sigma_std^2 / (N - T - 1), measured through the secure sum.

    With N = 10, T = 3 the factor is 10/6; D = 20000 coordinates give the variance to about 1%
    (standard error sqrt(2/D)), so per-client noise of sigma_std / sqrt(N) (factor 1) or of
    sigma_std / sqrt(N - 1) (factor 10/9) would fail the 5% tolerance.
    """
    n, t, d = 10, 3, 20000
    cal = calibrate_dca(0.8, 1e-5, 1.0, n_clients=n, tolerated=t, method="classic")
    res = secure_sum(
        np.zeros((n, d)), noise_std=cal.client_std, rng=2024, compute_nodes=3, tolerated=t
    )
    expected = n * cal.sigma_std**2 / (n - t - 1)
    assert aggregate_noise_variance(cal.sigma_std, n, t) == pytest.approx(expected)
    assert res.total.var() == pytest.approx(expected, rel=0.05)
    assert abs(res.total.mean()) < 5 * math.sqrt(expected / d)
    # after T dropouts, the N - T remaining clients' noise still exceeds sigma_std^2
    dropped = secure_sum(
        np.zeros((n, d)),
        noise_std=cal.client_std,
        rng=2024,
        compute_nodes=3,
        tolerated=t,
        dropped=[0, 1, 2],
    )
    assert dropped.total.var() == pytest.approx((n - t) / (n - t - 1) * cal.sigma_std**2, rel=0.05)
    assert dropped.total.var() > 0.95 * cal.sigma_std**2


def test_the_discrete_calibration_meets_its_target_and_costs_a_few_per_cent():
    from dpfed.dca.calibration import (
        calibrate_dca,
        calibrate_dca_discrete,
        dca_discrete_epsilon,
    )

    std = calibrate_dca_discrete(1.0, 1e-5, 1.0, 100, 2, dim=10, fractional_bits=24)
    assert dca_discrete_epsilon(std, 1.0, 100, 2, 1e-5, 10, 24) <= 1.0
    assert dca_discrete_epsilon(std * 0.999, 1.0, 100, 2, 1e-5, 10, 24) > 1.0
    continuous = calibrate_dca(1.0, 1e-5, 1.0, 100, 2).client_std
    assert continuous < std < 1.15 * continuous  # RDP against the continuous PLD
