"""Tests for dpfed.privacy.accounting: closed forms, dp-accounting front ends, calibration."""

from __future__ import annotations

import itertools
import math
import os

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpfed._validation import DpfedInputError
from dpfed.privacy.accounting import (
    ACCOUNTANTS,
    advanced_composition,
    basic_composition,
    calibrate_noise_multiplier,
    classic_gaussian_epsilon,
    classic_gaussian_sigma,
    corollary1_epsilon,
    gaussian_epsilon,
    gaussian_epsilon_heterogeneous,
    moments_accountant_epsilon,
)

RUN_SLOW = os.environ.get("DPFED_SLOW", "") not in ("", "0")
slow = [
    pytest.mark.slow,
    pytest.mark.skipif(not RUN_SLOW, reason="slow PLD point; set DPFED_SLOW=1"),
]

# --------------------------------------------------------------------------------------------
# dp-accounting front ends equal dp-accounting called directly
# --------------------------------------------------------------------------------------------

DIRECT_CASES = [(3.0, 5, 1e-5), (8.0, 20, 1e-6), (20.0, 100, 1e-5), (1.5, 1, 1e-3)]


@pytest.mark.parametrize(("z", "steps", "delta"), DIRECT_CASES)
def test_pld_equals_dp_accounting(z: float, steps: int, delta: float) -> None:
    direct = PLDAccountant().compose(dp_accounting.GaussianDpEvent(z), steps).get_epsilon(delta)
    assert gaussian_epsilon(z, steps, delta, accountant="pld") == pytest.approx(direct, abs=1e-9)


@pytest.mark.parametrize(
    ("z", "steps", "delta"), [*DIRECT_CASES, (0.7, 3, 1e-5), (50.0, 1000, 1e-8)]
)
def test_rdp_equals_dp_accounting(z: float, steps: int, delta: float) -> None:
    direct = RdpAccountant().compose(dp_accounting.GaussianDpEvent(z), steps).get_epsilon(delta)
    assert gaussian_epsilon(z, steps, delta, accountant="rdp") == pytest.approx(direct, abs=1e-9)


def test_default_accountant_is_pld() -> None:
    assert gaussian_epsilon(10.0, 2, 1e-5) == gaussian_epsilon(10.0, 2, 1e-5, accountant="pld")


# --------------------------------------------------------------------------------------------
# PLD (tight) versus the paper's Theorem 1 + Corollary 1 ("advanced")
# --------------------------------------------------------------------------------------------

GRID_DELTA = 1e-5
GRID = [(z, t) for z in (0.5, 1.0, 2.0, 5.0, 10.0, 50.0) for t in (1, 5, 20, 100)]


def _eps_step(z: float, t: int) -> float:
    """Per-step classic epsilon used by the "advanced" accountant (delta_step = delta / 2T)."""
    return classic_gaussian_epsilon(z, GRID_DELTA / (2 * t))


INSIDE = [(z, t) for z, t in GRID if _eps_step(z, t) <= 1.0]
OUTSIDE = [(z, t) for z, t in GRID if _eps_step(z, t) > 1.0]


def test_grid_split_is_as_expected() -> None:
    # Theorem 1's hypothesis eps_step <= 1 holds for z in {10, 50} and for (z=5, T=1) only.
    assert sorted(INSIDE) == sorted(
        [(5.0, 1)] + [(z, t) for z in (10.0, 50.0) for t in (1, 5, 20, 100)]
    )


@pytest.mark.parametrize(("z", "steps"), INSIDE)
def test_pld_below_corollary1_inside_theorem1_range(z: float, steps: int) -> None:
    eps_pld = gaussian_epsilon(z, steps, GRID_DELTA, accountant="pld")
    eps_adv = gaussian_epsilon(z, steps, GRID_DELTA, accountant="advanced")
    assert eps_pld <= eps_adv
    # and the closed form is far from tight (a factor > 4 on this grid)
    assert eps_adv > 4.0 * eps_pld


def _outside_param(z: float, t: int):
    # PLD cost grows as z / sqrt(T) shrinks (11 s at z=0.5, T=100); those points are slow.
    marks = slow if z / math.sqrt(t) < 0.5 else []
    return pytest.param(z, t, marks=marks, id=f"z={z}-T={t}")


@pytest.mark.parametrize(("z", "steps"), [_outside_param(z, t) for z, t in OUTSIDE])
def test_pld_below_corollary1_outside_theorem1_range(z: float, steps: int) -> None:
    # Outside eps_step <= 1 Theorem 1 is not proved, yet on this grid the Corollary 1 figure
    # still exceeds the tight PLD epsilon (the T (e^eps - 1) eps term explodes).
    eps_pld = gaussian_epsilon(z, steps, GRID_DELTA, accountant="pld")
    eps_adv = gaussian_epsilon(z, steps, GRID_DELTA, accountant="advanced")
    assert eps_pld < eps_adv


@pytest.mark.parametrize(("z", "steps"), OUTSIDE)
def test_corollary1_above_exact_gaussian_outside_range(z: float, steps: int) -> None:
    # Cheap check over the whole outside region: T Gaussian releases with multiplier z are
    # exactly one Gaussian release with multiplier z / sqrt(T) (analytic Gaussian epsilon).
    exact = dp_accounting.get_epsilon_gaussian(z / math.sqrt(steps), GRID_DELTA)
    assert gaussian_epsilon(z, steps, GRID_DELTA, accountant="advanced") > exact


def test_classic_theorem1_understates_epsilon_for_tiny_noise() -> None:
    # Outside Theorem 1's range the classic formula stops being a DP guarantee: at z = 0.5 and
    # delta = 1e-5 it claims eps = 9.69, while the mechanism's true epsilon is about 10.0.
    # So the "basic" accountant (T = 1: just Theorem 1) is below the tight PLD value there.
    eps_pld = gaussian_epsilon(0.5, 1, GRID_DELTA, accountant="pld")
    eps_classic = classic_gaussian_epsilon(0.5, GRID_DELTA)
    assert eps_classic == pytest.approx(9.6896, abs=1e-4)
    assert eps_pld == pytest.approx(9.997, abs=1e-2)
    assert gaussian_epsilon(0.5, 1, GRID_DELTA, accountant="basic") < eps_pld
    # The exact analytic Gaussian agrees; the crossover is near eps_classic = 8.4 (z = 0.574).
    assert eps_classic < dp_accounting.get_epsilon_gaussian(0.5, GRID_DELTA)
    assert classic_gaussian_epsilon(0.6, GRID_DELTA) > dp_accounting.get_epsilon_gaussian(
        0.6, GRID_DELTA
    )
    # Within the theorem's range (eps <= 1) the classic bound holds.
    for z in (4.9, 5.0, 10.0, 50.0):
        assert classic_gaussian_epsilon(z, GRID_DELTA) > dp_accounting.get_epsilon_gaussian(
            z, GRID_DELTA
        )


# --------------------------------------------------------------------------------------------
# closed forms computed by hand
# --------------------------------------------------------------------------------------------


def test_classic_gaussian_epsilon_by_hand() -> None:
    # ln(1.25 / 1e-5) = ln(125000) = 11.736069016284437; sqrt(2 * that) / 2
    assert classic_gaussian_epsilon(2.0, 1e-5) == pytest.approx(
        math.sqrt(2 * 11.736069016284437) / 2, rel=1e-14
    )
    assert classic_gaussian_epsilon(2.0, 1e-5) == pytest.approx(2.4224026313026945, rel=1e-14)


def test_classic_gaussian_sigma_inverts_theorem1() -> None:
    # sigma = sqrt(2 ln(125000)) C / eps, C = 3, eps = 0.5
    assert classic_gaussian_sigma(0.5, 1e-5, 3.0) == pytest.approx(
        math.sqrt(2 * 11.736069016284437) * 3.0 / 0.5, rel=1e-14
    )
    for eps, delta, c in [(0.1, 1e-6, 1.0), (1.0, 1e-3, 0.25), (0.7, 0.01, 4.0)]:
        sigma = classic_gaussian_sigma(eps, delta, c)
        assert classic_gaussian_epsilon(sigma / c, delta) == pytest.approx(eps, rel=1e-12)


def test_corollary1_by_hand() -> None:
    # sqrt(2 * 10 * ln(1e5)) * 0.1 = sqrt(230.25850929940458) * 0.1 = 1.5174271293851464
    # 10 * 0.1 * (e^0.1 - 1) = 0.10517091807564771
    assert corollary1_epsilon(0.1, 10, 1e-5) == pytest.approx(1.6225980474607942, abs=1e-12)


def test_advanced_composition_equal_epsilons_is_corollary1() -> None:
    for eps, t, dprime in [(0.1, 10, 1e-5), (0.5, 3, 1e-3), (1.3, 50, 1e-7)]:
        eps_prime, delta_total = advanced_composition([eps] * t, 1e-6, dprime)
        assert eps_prime == pytest.approx(corollary1_epsilon(eps, t, dprime), rel=1e-12)
        assert delta_total == pytest.approx(t * 1e-6 + dprime, rel=1e-12)


def test_advanced_composition_heterogeneous_by_hand() -> None:
    eps_prime, delta_total = advanced_composition([0.1, 0.2], [1e-6, 2e-6], 1e-5)
    # sqrt(2 ln(1e5) (0.01 + 0.04)) + 0.1 (e^0.1 - 1) + 0.2 (e^0.2 - 1)
    expected = (
        math.sqrt(2 * 11.512925464970229 * 0.05)
        + 0.1 * (1.1051709180756477 - 1)
        + 0.2 * (1.2214027581601699 - 1)
    )
    assert eps_prime == pytest.approx(expected, rel=1e-12)
    assert delta_total == pytest.approx(1.3e-5, rel=1e-12)
    # numpy arrays are accepted for delta_step
    assert advanced_composition([0.1, 0.2], np.array([1e-6, 2e-6]), 1e-5) == (
        eps_prime,
        delta_total,
    )


def test_basic_composition_by_hand() -> None:
    eps, delta = basic_composition([0.1, 0.2, 0.3], [1e-6, 0.0, 2e-6])
    assert eps == pytest.approx(0.6, rel=1e-15)
    assert delta == pytest.approx(3e-6, rel=1e-15)
    assert basic_composition([], []) == (0.0, 0.0)


def test_gaussian_epsilon_basic_and_advanced_by_hand() -> None:
    # basic: T = 4, delta_step = 1e-5 / 4, eps = 4 sqrt(2 ln(1.25 * 4 / 1e-5)) / 3
    assert gaussian_epsilon(3.0, 4, 1e-5, accountant="basic") == pytest.approx(
        4 * math.sqrt(2 * math.log(5e5)) / 3, rel=1e-14
    )
    # advanced: T = 10, delta_step = 1e-5 / 20, delta' = 5e-6
    e = math.sqrt(2 * math.log(1.25 * 20 / 1e-5)) / 20.0
    expected = math.sqrt(2 * 10 * math.log(1 / 5e-6)) * e + 10 * e * (math.exp(e) - 1)
    assert gaussian_epsilon(20.0, 10, 1e-5, accountant="advanced") == pytest.approx(
        expected, rel=1e-12
    )


@pytest.mark.parametrize(
    ("z", "steps", "delta"),
    [(1.0, 1, 1e-5), (3.0, 10, 1e-5), (0.8, 50, 1e-6), (20.0, 5, 1e-3), (2.0, 200, 1e-5)],
)
def test_moments_accountant_vs_brute_force(z: float, steps: int, delta: float) -> None:
    orders = np.linspace(1.0, 2000.0, 2_000_001)  # step 1e-3
    alpha = steps * orders * (orders + 1) / (2 * z**2)
    brute = float(np.min((alpha + math.log(1 / delta)) / orders))
    eps = moments_accountant_epsilon(z, steps, delta)
    assert eps <= brute + 1e-12
    assert eps == pytest.approx(brute, rel=1e-6)
    assert gaussian_epsilon(z, steps, delta, accountant="moments") == eps


def test_moments_accountant_closed_form() -> None:
    # interior optimum tau* = z sqrt(2 ln(1/delta) / T) >= 1:
    # eps = T / (2 z^2) + sqrt(2 T ln(1/delta)) / z
    z, t, delta = 4.0, 10, 1e-5
    assert moments_accountant_epsilon(z, t, delta) == pytest.approx(
        t / (2 * z**2) + math.sqrt(2 * t * math.log(1 / delta)) / z, rel=1e-12
    )
    # tau* < 1 is clipped to tau = 1: eps = T / z^2 + ln(1/delta) = 400 + 11.5129...
    assert moments_accountant_epsilon(0.5, 100, 1e-5) == pytest.approx(
        400 + 11.512925464970229, rel=1e-12
    )
    # the paper's form: alpha(tau) = T tau (tau + 1) eps^2 / (4 ln(1.25/delta)) with
    # z = sqrt(2 ln(1.25/delta)) / eps is the same log moment
    eps_step, d = 0.3, 1e-5
    z = math.sqrt(2 * math.log(1.25 / d)) / eps_step
    tau = 7.0
    assert t * tau * (tau + 1) * eps_step**2 / (4 * math.log(1.25 / d)) == pytest.approx(
        t * tau * (tau + 1) / (2 * z**2), rel=1e-12
    )


# --------------------------------------------------------------------------------------------
# monotonicity
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_epsilon_increasing_in_steps(accountant: str) -> None:
    eps = [gaussian_epsilon(6.0, t, 1e-5, accountant=accountant) for t in (1, 2, 5, 10)]
    assert all(a < b for a, b in itertools.pairwise(eps)), eps


@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_epsilon_decreasing_in_noise(accountant: str) -> None:
    eps = [gaussian_epsilon(z, 10, 1e-5, accountant=accountant) for z in (4.0, 6.0, 9.0, 20.0)]
    assert all(a > b for a, b in itertools.pairwise(eps)), eps


# --------------------------------------------------------------------------------------------
# calibration
# --------------------------------------------------------------------------------------------


CALIBRATION_CASES = [
    pytest.param(acc, target, steps, id=f"{acc}-eps={target}-T={steps}")
    for acc in ACCOUNTANTS
    for target, steps in [(1.0, 10), (0.5, 2), (4.0, 3)]
    if not (acc == "pld" and target == 4.0)  # small-noise PLD is slow (~1 s per evaluation)
]


@pytest.mark.parametrize(("accountant", "target", "steps"), CALIBRATION_CASES)
def test_calibrate_round_trip(accountant: str, target: float, steps: int) -> None:
    z = calibrate_noise_multiplier(target, 1e-5, steps, accountant=accountant)
    eps = gaussian_epsilon(z, steps, 1e-5, accountant=accountant)
    assert eps <= target
    assert eps >= 0.99 * target
    # smallest: 0.1% less noise already exceeds the target
    assert gaussian_epsilon(0.999 * z, steps, 1e-5, accountant=accountant) > target


def test_calibrate_rdp_large_multiplier() -> None:
    # optimal RDP order beyond the default order grid: the bracket must still work
    z = calibrate_noise_multiplier(0.05, 1e-5, 1, accountant="rdp")
    eps = gaussian_epsilon(z, 1, 1e-5, accountant="rdp")
    assert 0.99 * 0.05 <= eps <= 0.05


def test_calibrated_noise_ordering() -> None:
    # the tight accountants need the least noise; Corollary 1 needs the most at this budget
    zs = {a: calibrate_noise_multiplier(1.0, 1e-5, 10, accountant=a) for a in ACCOUNTANTS}
    assert zs["pld"] < zs["rdp"] < zs["moments"] < zs["basic"] < zs["advanced"]


# --------------------------------------------------------------------------------------------
# heterogeneous releases
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_heterogeneous_equal_multipliers_is_homogeneous(accountant: str) -> None:
    hom = gaussian_epsilon(6.0, 7, 1e-5, accountant=accountant)
    het = gaussian_epsilon_heterogeneous([6.0] * 7, 1e-5, accountant=accountant)
    assert het == pytest.approx(hom, rel=1e-12)


@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_heterogeneous_no_release_is_zero(accountant: str) -> None:
    assert gaussian_epsilon_heterogeneous([], 1e-5, accountant=accountant) == 0.0


def test_heterogeneous_gaussians_compose_to_one_gaussian() -> None:
    # Gaussian releases z_1..z_T compose to one Gaussian with z_eff = (sum z_t^-2)^(-1/2)
    zs = [4.0, 6.0, 6.0, 10.0]
    z_eff = sum(z**-2 for z in zs) ** -0.5
    for acc in ("rdp", "moments"):  # exact in closed form
        assert gaussian_epsilon_heterogeneous(zs, 1e-5, accountant=acc) == pytest.approx(
            gaussian_epsilon(z_eff, 1, 1e-5, accountant=acc), rel=1e-9
        )
    # PLD composes discretised distributions: pessimistic, but only by a hair
    het = gaussian_epsilon_heterogeneous(zs, 1e-5, accountant="pld")
    hom = gaussian_epsilon(z_eff, 1, 1e-5, accountant="pld")
    assert het == pytest.approx(hom, rel=1e-3)
    assert het >= dp_accounting.get_epsilon_gaussian(z_eff, 1e-5) - 1e-9
    # order does not matter
    assert gaussian_epsilon_heterogeneous(zs[::-1], 1e-5, accountant="pld") == het


def test_heterogeneous_closed_forms_by_hand() -> None:
    zs, delta = [2.0, 4.0, 8.0], 1e-5
    t = len(zs)
    eps_adv = [math.sqrt(2 * math.log(1.25 * 2 * t / delta)) / z for z in zs]
    expected_adv = math.sqrt(2 * math.log(2 / delta) * sum(e * e for e in eps_adv)) + sum(
        e * (math.exp(e) - 1) for e in eps_adv
    )
    assert gaussian_epsilon_heterogeneous(zs, delta, accountant="advanced") == pytest.approx(
        expected_adv, rel=1e-12
    )
    expected_basic = sum(math.sqrt(2 * math.log(1.25 * t / delta)) / z for z in zs)
    assert gaussian_epsilon_heterogeneous(zs, delta, accountant="basic") == pytest.approx(
        expected_basic, rel=1e-12
    )


# --------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------

NAN = float("nan")
INF = float("inf")

BAD_CALLS = [
    ("noise 0", lambda: gaussian_epsilon(0.0, 10, 1e-5), 0.0),
    ("noise <0", lambda: gaussian_epsilon(-1.5, 10, 1e-5), -1.5),
    ("noise inf", lambda: gaussian_epsilon(INF, 10, 1e-5), INF),
    ("noise nan", lambda: gaussian_epsilon(NAN, 10, 1e-5), NAN),
    ("steps 0", lambda: gaussian_epsilon(1.0, 0, 1e-5), 0),
    ("steps <0", lambda: gaussian_epsilon(1.0, -3, 1e-5), -3),
    ("steps frac", lambda: gaussian_epsilon(1.0, 2.5, 1e-5), 2.5),
    ("delta 0", lambda: gaussian_epsilon(1.0, 10, 0.0), 0.0),
    ("delta 1", lambda: gaussian_epsilon(1.0, 10, 1.0), 1.0),
    ("delta >1", lambda: gaussian_epsilon(1.0, 10, 1.5), 1.5),
    ("delta <0", lambda: gaussian_epsilon(1.0, 10, -1e-5), -1e-5),
    ("accountant", lambda: gaussian_epsilon(1.0, 10, 1e-5, accountant="gdp"), "gdp"),
    ("accountant case", lambda: gaussian_epsilon(1.0, 10, 1e-5, accountant="PLD"), "PLD"),
    ("cal eps 0", lambda: calibrate_noise_multiplier(0.0, 1e-5, 10), 0.0),
    ("cal eps <0", lambda: calibrate_noise_multiplier(-1.0, 1e-5, 10), -1.0),
    ("cal delta", lambda: calibrate_noise_multiplier(1.0, 2.0, 10), 2.0),
    ("cal steps", lambda: calibrate_noise_multiplier(1.0, 1e-5, 0), 0),
    ("cal acc", lambda: calibrate_noise_multiplier(1.0, 1e-5, 10, accountant="x"), "x"),
    ("classic z", lambda: classic_gaussian_epsilon(0.0, 1e-5), 0.0),
    ("classic delta", lambda: classic_gaussian_epsilon(1.0, 1.0), 1.0),
    ("sigma eps", lambda: classic_gaussian_sigma(-0.1, 1e-5, 1.0), -0.1),
    ("sigma delta", lambda: classic_gaussian_sigma(0.5, 0.0, 1.0), 0.0),
    ("sigma C", lambda: classic_gaussian_sigma(0.5, 1e-5, 0.0), 0.0),
    ("cor1 eps", lambda: corollary1_epsilon(-0.2, 10, 1e-5), -0.2),
    ("cor1 steps", lambda: corollary1_epsilon(0.1, 0, 1e-5), 0),
    ("cor1 delta'", lambda: corollary1_epsilon(0.1, 10, 0.0), 0.0),
    ("adv eps", lambda: advanced_composition([0.1, -0.1], 1e-6, 1e-5), -0.1),
    ("adv delta_step", lambda: advanced_composition([0.1], 1.0, 1e-5), 1.0),
    ("adv delta_steps", lambda: advanced_composition([0.1, 0.1], [1e-6, -1e-6], 1e-5), -1e-6),
    ("adv delta'", lambda: advanced_composition([0.1], 1e-6, 2.0), 2.0),
    ("adv lengths", lambda: advanced_composition([0.1, 0.2], [1e-6] * 3, 1e-5), 3),
    ("basic eps", lambda: basic_composition([INF], [1e-6]), INF),
    ("basic delta", lambda: basic_composition([0.1], [1.2]), 1.2),
    ("basic lengths", lambda: basic_composition([0.1, 0.2], [1e-6]), 1),
    ("moments z", lambda: moments_accountant_epsilon(-2.0, 10, 1e-5), -2.0),
    ("moments steps", lambda: moments_accountant_epsilon(2.0, 0, 1e-5), 0),
    ("moments delta", lambda: moments_accountant_epsilon(2.0, 10, 0.0), 0.0),
    ("het z", lambda: gaussian_epsilon_heterogeneous([1.0, 0.0], 1e-5), 0.0),
    ("het z inf", lambda: gaussian_epsilon_heterogeneous([INF], 1e-5), INF),
    ("het delta", lambda: gaussian_epsilon_heterogeneous([1.0], 1.0), 1.0),
    ("het acc", lambda: gaussian_epsilon_heterogeneous([1.0], 1e-5, accountant="zcdp"), "zcdp"),
]


@pytest.mark.parametrize(("call", "bad"), [pytest.param(c, b, id=i) for i, c, b in BAD_CALLS])
def test_bad_inputs_raise_with_value_in_message(call, bad) -> None:
    with pytest.raises(DpfedInputError) as info:
        call()
    assert repr(bad) in str(info.value) or str(bad) in str(info.value)
    assert "must" in str(info.value)  # says what was expected
