"""Tests for dpfed.protocols.consensus.calibration: paper 002's sensitivity, sigma and moments
accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.privacy.accounting import (
    calibrate_noise_multiplier,
    gaussian_epsilon,
    moments_accountant_epsilon,
)
from dpfed.protocols.consensus.calibration import (
    ConsensusCalibration,
    calibrate_consensus,
    consensus_epsilon,
    consensus_moments_epsilon,
    consensus_moments_minimiser,
    consensus_noise_multiplier,
    consensus_sensitivity,
    consensus_sigma,
)

# --------------------------------------------------------------------------------------------
# sensitivity and sigma against hand-computed numbers
# --------------------------------------------------------------------------------------------


def test_sensitivity_hand_computed() -> None:
    # 2 c1 / ((lam/n + rho) m) = 2 * 1 / ((0.5/5 + 0.9) * 100) = 2 / 100 = 0.02
    assert consensus_sensitivity(c1=1.0, lam=0.5, n_clients=5, rho=0.9, m_i=100) == (
        pytest.approx(0.02, rel=1e-12)
    )
    # 2 * 0.25 / ((2/4 + 0.5) * 50) = 0.5 / 50 = 0.01
    assert consensus_sensitivity(c1=0.25, lam=2.0, n_clients=4, rho=0.5, m_i=50) == (
        pytest.approx(0.01, rel=1e-12)
    )
    # mu = 0.5: 2 * 0.25 / ((2 * 0.5 / 4 + 0.5) * 50) = 0.5 / 37.5 = 0.013333...
    assert consensus_sensitivity(c1=0.25, lam=2.0, n_clients=4, rho=0.5, m_i=50, mu=0.5) == (
        pytest.approx(0.5 / 37.5, rel=1e-12)
    )


def test_sigma_hand_computed() -> None:
    # ln(1.25 / 1e-5) = ln(125000) = 11.7360690...; sqrt(2 * 11.7360690) = 4.8448052...
    # sigma = 2 * 1 * 4.8448052 / ((0.5/5 + 0.9) * 100 * 0.5) = 9.6896105 / 50 = 0.1937922
    sigma = consensus_sigma(c1=1.0, lam=0.5, n_clients=5, rho=0.9, m_i=100, epsilon=0.5, delta=1e-5)
    assert sigma == pytest.approx(0.1937922, rel=1e-6)
    assert sigma == pytest.approx(
        2 * 1.0 * math.sqrt(2 * math.log(1.25 / 1e-5)) / ((0.5 / 5 + 0.9) * 100 * 0.5), rel=1e-12
    )


def test_sigma_is_multiplier_times_sensitivity() -> None:
    sens = consensus_sensitivity(c1=0.25, lam=2.0, n_clients=4, rho=0.5, m_i=50)
    sigma = consensus_sigma(c1=0.25, lam=2.0, n_clients=4, rho=0.5, m_i=50, epsilon=0.8, delta=1e-4)
    assert sigma == pytest.approx(consensus_noise_multiplier(0.8, 1e-4) * sens, rel=1e-12)


# --------------------------------------------------------------------------------------------
# moments accountant: closed form, hand-computed, equivalence with accounting.py
# --------------------------------------------------------------------------------------------

# (eps_step, delta_step, T, delta, expected total); A = T eps^2 / (4 ln(1.25/delta_step)),
# L = ln(1/delta); total = A + 2 sqrt(A L) if L >= A else 2A + L.
MOMENTS_CASES = [
    # A = 10 * 0.25 / (4 * 11.7360690) = 0.0532546; L = 11.5129255;
    # A + 2 sqrt(0.0532546 * 11.5129255) = 0.0532546 + 2 * 0.7830176 = 1.6192898
    (0.5, 1e-5, 10, 1e-5, 1.6192898),
    # A = 1000 * 1 / (4 * ln 1250 = 7.1308988) = 35.0586940 > L = ln 100 = 4.6051702:
    # tau* = 1, total = 2 * 35.0586940 + 4.6051702 = 74.7225582
    (1.0, 1e-3, 1000, 1e-2, 74.7225582),
    # A = 100 * 0.01 / (4 * ln(1.25e6) = 14.0387..) = 0.0178080; L = 13.8155106;
    # 0.0178080 + 2 sqrt(0.0178080 * 13.8155106) = 0.0178080 + 2 * 0.4960103 = 1.0098287
    (0.1, 1e-6, 100, 1e-6, 1.0098287),
]


@pytest.mark.parametrize(("eps_s", "delta_s", "steps", "delta", "expected"), MOMENTS_CASES)
def test_moments_closed_form_hand_computed(
    eps_s: float, delta_s: float, steps: int, delta: float, expected: float
) -> None:
    _, closed = consensus_moments_minimiser(eps_s, delta_s, steps, delta)
    assert closed == pytest.approx(expected, rel=1e-6)
    assert consensus_moments_epsilon(eps_s, delta_s, steps, delta) == pytest.approx(
        expected, rel=1e-6
    )


@pytest.mark.parametrize(("eps_s", "delta_s", "steps", "delta", "expected"), MOMENTS_CASES)
def test_moments_equals_paper_log_moment_and_accounting(
    eps_s: float, delta_s: float, steps: int, delta: float, expected: float
) -> None:
    # The paper's eq. 7 minimised directly over a fine grid of orders tau >= 1.
    taus = np.linspace(1.0, 200.0, 400001)
    log_moment = steps * taus * (taus + 1) * eps_s**2 / (4 * math.log(1.25 / delta_s))
    brute = float(np.min((log_moment + math.log(1 / delta)) / taus))
    tau_star, closed = consensus_moments_minimiser(eps_s, delta_s, steps, delta)
    assert closed <= brute + 1e-12
    assert closed == pytest.approx(brute, rel=1e-6)
    # The analytic minimiser attains it.
    a = steps * eps_s**2 / (4 * math.log(1.25 / delta_s))
    assert (a * tau_star * (tau_star + 1) + math.log(1 / delta)) / tau_star == pytest.approx(
        closed, rel=1e-12
    )
    # Same function as accounting.moments_accountant_epsilon at z = sqrt(2 ln(1.25/ds))/eps.
    z = math.sqrt(2 * math.log(1.25 / delta_s)) / eps_s
    assert moments_accountant_epsilon(z, steps, delta) == pytest.approx(closed, rel=1e-12)
    assert consensus_epsilon(eps_s, delta_s, steps, delta, "moments") == pytest.approx(
        closed, rel=1e-12
    )


def test_basic_is_t_times_eps_step_at_t_delta_step() -> None:
    # delta = T * delta_step: basic composition is T * eps_step exactly.
    assert consensus_epsilon(0.3, 1e-6, 20, 20e-6, "basic") == pytest.approx(6.0, rel=1e-12)


def test_pld_and_rdp_are_the_accounting_module_on_the_multiplier() -> None:
    z = consensus_noise_multiplier(0.5, 1e-5)
    assert consensus_epsilon(0.5, 1e-5, 10, 1e-5, "pld") == pytest.approx(
        gaussian_epsilon(z, 10, 1e-5, accountant="pld"), abs=1e-12
    )
    assert consensus_epsilon(0.5, 1e-5, 10, 1e-5, "rdp") == pytest.approx(
        gaussian_epsilon(z, 10, 1e-5, accountant="rdp"), abs=1e-12
    )
    # PLD is tighter than the paper's moments accountant.
    assert consensus_epsilon(0.5, 1e-5, 10, 1e-5, "pld") < consensus_epsilon(
        0.5, 1e-5, 10, 1e-5, "moments"
    )


@pytest.mark.parametrize("accountant", ["moments", "rdp", "basic", "advanced"])
def test_epsilon_monotone_in_steps_and_noise(accountant: str) -> None:
    by_steps = [consensus_epsilon(0.5, 1e-5, t, 1e-4, accountant) for t in (1, 5, 20, 100)]
    assert np.all(np.diff(by_steps) > 0)
    # smaller per-step epsilon = more noise = smaller total
    # per-round epsilon 1 at delta_step 1e-5 is outside the classical range at advanced's
    # per-step delta 5e-6 (it refuses there, see below), so the largest here is 0.9
    by_noise = [consensus_epsilon(e, 1e-5, 10, 1e-4, accountant) for e in (0.9, 0.5, 0.2, 0.05)]
    assert np.all(np.diff(by_noise) < 0)


def test_pld_monotone_in_steps_and_noise() -> None:
    a = consensus_epsilon(0.5, 1e-5, 5, 1e-5, "pld")
    b = consensus_epsilon(0.5, 1e-5, 20, 1e-5, "pld")
    c = consensus_epsilon(0.25, 1e-5, 20, 1e-5, "pld")
    assert a < b
    assert c < b


# --------------------------------------------------------------------------------------------
# calibration
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epsilon", "delta", "steps"),
    [(1.0, 1e-5, 10), (50.0, 1e-5, 10), (3.0, 1e-6, 200)],  # 50 > 3 ln(1e5): tau* = 1 branch
)
def test_moments_calibration_inverts_closed_form(epsilon: float, delta: float, steps: int) -> None:
    cal = calibrate_consensus(epsilon, delta, steps, accountant="moments")
    assert cal.epsilon <= epsilon
    assert cal.epsilon >= epsilon * (1 - 1e-9)
    assert moments_accountant_epsilon(cal.noise_multiplier, steps, delta) == cal.epsilon
    bisected = calibrate_noise_multiplier(epsilon, delta, steps, accountant="moments")
    assert cal.noise_multiplier == pytest.approx(bisected, rel=1e-9)


def test_moments_calibration_hand_computed() -> None:
    # eps = 1, delta = 1e-5, T = 10: L = ln(1e5) = 11.5129255, eps = 1 <= 3L, so
    # z = sqrt(10) / (sqrt(2 * 12.5129255) - sqrt(2 * 11.5129255))
    #   = 3.1622777 / (5.0025844 - 4.7985260) = 3.1622777 / 0.2040584 = 15.4969...
    cal = calibrate_consensus(1.0, 1e-5, 10, accountant="moments")
    expected = math.sqrt(10) / (math.sqrt(2 * (math.log(1e5) + 1.0)) - math.sqrt(2 * math.log(1e5)))
    assert cal.noise_multiplier == pytest.approx(expected, rel=1e-9)
    assert cal.noise_multiplier == pytest.approx(15.4969, rel=1e-4)


def test_pld_calibration_round_trip() -> None:
    cal = calibrate_consensus(1.0, 1e-5, 10, accountant="pld")
    assert isinstance(cal, ConsensusCalibration)
    certified = gaussian_epsilon(cal.noise_multiplier, 10, 1e-5, accountant="pld")
    assert certified == pytest.approx(cal.epsilon, abs=1e-12)
    assert certified <= 1.0
    assert certified >= 1.0 * (1 - 1e-3)
    # per-round reading at delta / T, and the moments accountant needs more noise than PLD
    assert cal.delta_step == pytest.approx(1e-6)
    assert cal.epsilon_step == pytest.approx(
        math.sqrt(2 * math.log(1.25 / 1e-6)) / cal.noise_multiplier, rel=1e-12
    )
    assert cal.classic_valid
    moments = calibrate_consensus(1.0, 1e-5, 10, accountant="moments")
    assert moments.noise_multiplier > cal.noise_multiplier


def test_calibration_feeds_the_paper_sigma() -> None:
    cal = calibrate_consensus(2.0, 1e-5, 30, accountant="moments", delta_step=1e-7)
    kwargs = {"c1": 1.0, "lam": 0.1, "n_clients": 10, "rho": 1.0, "m_i": 500}
    sens = consensus_sensitivity(**kwargs)
    sigma = consensus_sigma(**kwargs, epsilon=cal.epsilon_step, delta=cal.delta_step)
    assert sigma == pytest.approx(cal.sigma(sens), rel=1e-12)
    # and reading the paper's per-round figures back through its accountant gives the total
    assert consensus_moments_epsilon(cal.epsilon_step, cal.delta_step, 30, 1e-5) == (
        pytest.approx(cal.epsilon, rel=1e-9)
    )


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"c1": 0.0},
        {"c1": -1.0},
        {"lam": -0.1},
        {"n_clients": 0},
        {"rho": 0.0},
        {"m_i": 0},
        {"m_i": 2.5},
        {"rho": float("nan")},
    ],
)
def test_sensitivity_rejects_bad_inputs(kwargs: dict) -> None:
    base = {"c1": 1.0, "lam": 0.5, "n_clients": 5, "rho": 0.9, "m_i": 100}
    with pytest.raises(DpfedInputError):
        consensus_sensitivity(**{**base, **kwargs})


def test_other_errors() -> None:
    with pytest.raises(DpfedInputError, match="accountant"):
        consensus_epsilon(0.5, 1e-5, 10, 1e-5, "exact")
    with pytest.raises(DpfedInputError, match="delta_step"):
        consensus_moments_epsilon(0.5, 1.0, 10, 1e-5)
    with pytest.raises(DpfedInputError, match="steps"):
        consensus_moments_minimiser(0.5, 1e-5, 0, 1e-5)
    with pytest.raises(DpfedInputError, match="epsilon"):
        calibrate_consensus(0.0, 1e-5, 10)
    with pytest.raises(DpfedInputError, match="delta"):
        consensus_sigma(c1=1, lam=1, n_clients=1, rho=1, m_i=1, epsilon=1, delta=0)


# --------------------------------------------------------------------------------------------
# the classic Gaussian theorem's proven range (per-round epsilon <= 1)
# --------------------------------------------------------------------------------------------


def test_paper_sigma_refuses_a_per_round_epsilon_above_one() -> None:
    kwargs = {"c1": 1.0, "lam": 0.5, "n_clients": 5, "rho": 0.9, "m_i": 100, "delta": 1e-5}
    # at the edge of the range: sigma = Delta_2 sqrt(2 ln(1.25e5)) = 0.02 * 4.8448052
    assert consensus_sigma(**kwargs, epsilon=1.0) == pytest.approx(
        0.02 * math.sqrt(2 * math.log(1.25e5)), rel=1e-12
    )
    with pytest.raises(
        DpfedInputError,
        match=r"per-round epsilon <= 1, i\.e\. noise multiplier >= 4\.84 .*found epsilon 2\. "
        r"Use calibrate_consensus with accountant 'pld' or 'rdp'",
    ):
        consensus_sigma(**kwargs, epsilon=2.0)


def test_classic_accountants_refuse_outside_their_range() -> None:
    # eps_s = 1 at delta_s = 1e-5 is z = 4.845; advanced reads it at delta / (2T) = 5e-6, where
    # the per-step epsilon is sqrt(2 ln(2.5e5)) / 4.845 = 1.03 > 1
    with pytest.raises(DpfedInputError, match=r"accountant 'advanced'.*per-step epsilon 1\.03"):
        consensus_epsilon(1.0, 1e-5, 10, 1e-4, "advanced")
    # the same noise has a valid total by the accountants that read z directly
    assert consensus_epsilon(1.0, 1e-5, 10, 1e-4, "moments") > 0
    # basic certifies at most T per-step epsilons of 1
    with pytest.raises(DpfedInputError, match=r"accountant 'basic'.*found target epsilon 30"):
        calibrate_consensus(30.0, 1e-5, 20, accountant="basic")


def test_calibration_at_the_edge_of_the_classic_range_feeds_the_paper_sigma() -> None:
    # basic's split is delta_step = delta / T, the calibration's default per-round reading, so a
    # target of T (per-step epsilon 1) reads back as epsilon_step = 1 and is accepted
    cal = calibrate_consensus(20.0, 1e-5, 20, accountant="basic")
    assert cal.epsilon <= 20.0 and cal.classic_valid
    assert cal.epsilon_step == pytest.approx(1.0, rel=1e-9)
    kwargs = {"c1": 1.0, "lam": 0.1, "n_clients": 10, "rho": 1.0, "m_i": 500}
    sigma = consensus_sigma(**kwargs, epsilon=cal.epsilon_step, delta=cal.delta_step)
    assert sigma == pytest.approx(cal.sigma(consensus_sensitivity(**kwargs)), rel=1e-9)


def test_classic_reading_beside_a_valid_total_is_only_reported() -> None:
    # moments at epsilon 50 needs little noise: its total is valid, the per-round classic reading
    # (about 10) is not, which classic_valid says; the paper's sigma refuses that reading
    cal = calibrate_consensus(50.0, 1e-5, 10, accountant="moments")
    assert cal.epsilon <= 50.0
    assert cal.epsilon_step > 1 and not cal.classic_valid
    with pytest.raises(DpfedInputError, match="per-round epsilon <= 1"):
        consensus_sigma(
            c1=1.0,
            lam=0.1,
            n_clients=10,
            rho=1.0,
            m_i=500,
            epsilon=cal.epsilon_step,
            delta=cal.delta_step,
        )
