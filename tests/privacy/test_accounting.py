"""Tests for dpfed.privacy.accounting: closed forms, dp-accounting front ends, calibration."""

from __future__ import annotations

import itertools
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpfed._validation import DpfedInputError
from dpfed.privacy import accountants
from dpfed.privacy.accounting import (
    ACCOUNTANTS,
    MECHANISMS,
    NUMERICAL_ACCOUNTANTS,
    PURE_MECHANISMS,
    Release,
    advanced_composition,
    as_release,
    basic_composition,
    calibrate_noise_multiplier,
    check_classic_range,
    classic_gaussian_epsilon,
    classic_gaussian_sigma,
    corollary1_epsilon,
    gaussian_epsilon,
    gaussian_epsilon_heterogeneous,
    gaussian_releases_epsilon,
    moments_accountant_epsilon,
    release_event,
    releases_epsilon,
    releases_event,
)

# --------------------------------------------------------------------------------------------
# dp-accounting front ends equal dp-accounting called directly
# --------------------------------------------------------------------------------------------

DIRECT_CASES = [(3.0, 5, 1e-5), (8.0, 20, 1e-6), (20.0, 100, 1e-5), (1.5, 1, 1e-3)]


@pytest.mark.parametrize(("z", "steps", "delta"), DIRECT_CASES)
def test_pld_is_dp_accountings_pld_without_its_discretisation(
    z: float, steps: int, delta: float
) -> None:
    # Gaussian releases compose exactly (Gaussian DP); dp-accounting's PLD approaches that
    # figure from above as its discretisation shrinks (a tenth of its default interval of 1e-4
    # already takes it 10 to 70 times closer; 1e-6 took 15-20 s a case)
    direct = PLDAccountant().compose(dp_accounting.GaussianDpEvent(z), steps).get_epsilon(delta)
    exact = gaussian_epsilon(z, steps, delta, accountant="pld")
    assert exact <= direct + 1e-12
    assert exact == pytest.approx(direct, rel=1e-5)
    fine = PLDAccountant(value_discretization_interval=1e-5)
    fine_direct = fine.compose(dp_accounting.GaussianDpEvent(z), steps).get_epsilon(delta)
    assert abs(fine_direct - exact) <= abs(direct - exact) + 1e-12


@pytest.mark.parametrize("z", [0.05, 0.3, 1.0, 4.0, 50.0, 2000.0])
@pytest.mark.parametrize("steps", [1, 7, 400])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_pld_is_the_analytic_gaussian_of_the_composed_multiplier(z, steps, delta) -> None:
    # T releases at z are one release at z / sqrt(T) (Gaussian DP composes mu^2 additively)
    analytic = dp_accounting.get_epsilon_gaussian(z / math.sqrt(steps), delta)
    assert gaussian_epsilon(z, steps, delta, accountant="pld") == pytest.approx(
        analytic, rel=1e-9, abs=1e-12
    )
    mixed = [z] * steps + [2.0 * z]
    composed = dp_accounting.get_epsilon_gaussian((steps + 0.25) ** -0.5 * z, delta)
    assert gaussian_releases_epsilon(mixed, delta) == pytest.approx(composed, rel=1e-9, abs=1e-12)


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
    return math.sqrt(2 * math.log(1.25 / (GRID_DELTA / (2 * t)))) / z


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


@pytest.mark.parametrize(("z", "steps"), OUTSIDE)
def test_advanced_refuses_outside_theorem1_range(z: float, steps: int) -> None:
    # Outside eps_step <= 1 Theorem 1 is not proved: no Corollary 1 figure is given.
    with pytest.raises(DpfedInputError, match=r"accountant 'advanced'.*per-step epsilon <= 1"):
        gaussian_epsilon(z, steps, GRID_DELTA, accountant="advanced")


def test_classic_theorem1_understates_epsilon_for_tiny_noise() -> None:
    # Why the classical accountants refuse outside Theorem 1's range: at z = 0.5 and
    # delta = 1e-5 the formula would claim eps = 9.69, while the mechanism's true epsilon is
    # about 10.0 (PLD and the exact analytic Gaussian agree), so a "basic" figure (T = 1: just
    # Theorem 1) there would be smaller than the truth.
    formula = math.sqrt(2 * math.log(1.25 / GRID_DELTA)) / 0.5
    eps_pld = gaussian_epsilon(0.5, 1, GRID_DELTA, accountant="pld")
    assert formula == pytest.approx(9.6896, abs=1e-4)
    assert eps_pld == pytest.approx(9.997, abs=1e-2)
    assert formula < dp_accounting.get_epsilon_gaussian(0.5, GRID_DELTA)
    # the crossover is near eps_classic = 8.4 (z = 0.574)
    assert math.sqrt(2 * math.log(1.25 / GRID_DELTA)) / 0.6 > dp_accounting.get_epsilon_gaussian(
        0.6, GRID_DELTA
    )
    for call in (
        lambda: gaussian_epsilon(0.5, 1, GRID_DELTA, accountant="basic"),
        lambda: classic_gaussian_epsilon(0.5, GRID_DELTA),
    ):
        with pytest.raises(DpfedInputError, match=r"epsilon <= 1.*found noise multiplier 0\.5 "):
            call()
    # Within the theorem's range (eps <= 1) the classic bound holds.
    for z in (4.9, 5.0, 10.0, 50.0):
        assert classic_gaussian_epsilon(z, GRID_DELTA) > dp_accounting.get_epsilon_gaussian(
            z, GRID_DELTA
        )


# --------------------------------------------------------------------------------------------
# closed forms computed by hand
# --------------------------------------------------------------------------------------------


def test_classic_gaussian_epsilon_by_hand() -> None:
    # ln(1.25 / 1e-5) = ln(125000) = 11.736069016284437; sqrt(2 * that) / 6
    assert classic_gaussian_epsilon(6.0, 1e-5) == pytest.approx(
        math.sqrt(2 * 11.736069016284437) / 6, rel=1e-14
    )
    assert classic_gaussian_epsilon(6.0, 1e-5) == pytest.approx(0.8074675437675648, rel=1e-14)


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
    # basic: T = 4, delta_step = 1e-5 / 4, eps = 4 sqrt(2 ln(1.25 * 4 / 1e-5)) / 6
    assert gaussian_epsilon(6.0, 4, 1e-5, accountant="basic") == pytest.approx(
        4 * math.sqrt(2 * math.log(5e5)) / 6, rel=1e-14
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
    # (z >= 5.5: inside the classical range of "basic" and "advanced" at T = 10)
    eps = [gaussian_epsilon(z, 10, 1e-5, accountant=accountant) for z in (6.0, 9.0, 20.0, 40.0)]
    assert all(a > b for a, b in itertools.pairwise(eps)), eps


# --------------------------------------------------------------------------------------------
# calibration
# --------------------------------------------------------------------------------------------


CALIBRATION_CASES = [
    pytest.param(acc, target, steps, id=f"{acc}-eps={target}-T={steps}")
    for acc in ACCOUNTANTS
    for target, steps in [(1.0, 10), (0.5, 2), (4.0, 3)]
    if not (acc == "pld" and target == 4.0)  # small-noise PLD is slow (~1 s per evaluation)
    and not (acc == "basic" and target / steps > 1)  # refused: per-step epsilon above 1
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
    zs, delta = [6.0, 8.0, 12.0], 1e-5  # inside the classical range (per-step epsilon < 0.9)
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
# the classical Gaussian bound's proven range (per-step epsilon <= 1)
# --------------------------------------------------------------------------------------------

CLASSIC = ("basic", "advanced")


def _delta_step(accountant: str, steps: int, delta: float) -> float:
    return delta / steps if accountant == "basic" else delta / (2 * steps)


def _z_min(accountant: str, steps: int, delta: float) -> float:
    """Smallest multiplier inside the range: per-step epsilon sqrt(2 ln(1.25/d_s)) / z = 1."""
    return math.sqrt(2 * math.log(1.25 / _delta_step(accountant, steps, delta)))


def _limit(accountant: str, steps: int, delta: float) -> float:
    """The accountant's figure at per-step epsilon 1, the largest it can certify."""
    if accountant == "basic":
        return float(steps)
    return math.sqrt(2 * steps * math.log(2 / delta)) + steps * (math.e - 1)


def test_basic_refuses_noise_outside_the_range_and_names_it() -> None:
    with pytest.raises(DpfedInputError) as info:
        gaussian_epsilon(0.3, 1, 1e-5, accountant="basic")
    assert str(info.value) == (
        "accountant 'basic' uses the classical Gaussian bound, proven only for a per-step "
        "epsilon <= 1, i.e. noise multiplier >= 4.84 at per-step delta 1e-05; found noise "
        "multiplier 0.3 (per-step epsilon 16.1). Use accountant 'pld' or 'rdp'."
    )


@pytest.mark.parametrize("accountant", CLASSIC)
@pytest.mark.parametrize(("steps", "delta"), [(1, 1e-5), (7, 1e-3), (100, 1e-8)])
def test_the_range_ends_at_per_step_epsilon_one(accountant: str, steps: int, delta: float):
    z_min = _z_min(accountant, steps, delta)
    at_edge = gaussian_epsilon(z_min, steps, delta, accountant=accountant)
    assert at_edge == pytest.approx(_limit(accountant, steps, delta), rel=1e-12)
    zs = [z_min] * steps
    assert gaussian_epsilon_heterogeneous(zs, delta, accountant=accountant) == pytest.approx(
        at_edge, rel=1e-12
    )
    assert gaussian_releases_epsilon(zs, delta, accountant) == pytest.approx(at_edge, rel=1e-12)
    check_classic_range(zs, delta, accountant=accountant)
    below = z_min * (1 - 1e-6)
    pattern = (
        rf"accountant '{accountant}' uses the classical Gaussian bound, proven only for a "
        rf"per-step epsilon <= 1, i\.e\. noise multiplier >= {z_min:.3g} at per-step delta "
        rf"{_delta_step(accountant, steps, delta):g}; found noise multiplier"
    )
    with pytest.raises(DpfedInputError, match=pattern):
        gaussian_epsilon(below, steps, delta, accountant=accountant)
    # one release below the range is enough, wherever it is in the sequence
    mixed = [10 * z_min] * (steps - 1) + [below]
    for call in (
        lambda: gaussian_epsilon_heterogeneous(mixed, delta, accountant=accountant),
        lambda: gaussian_releases_epsilon(mixed, delta, accountant),
        lambda: check_classic_range(mixed, delta, accountant=accountant),
    ):
        with pytest.raises(DpfedInputError, match=pattern) as info:
            call()
        assert ("smallest of the" in str(info.value)) == (steps > 1)
    # the numerical accountants have no such range
    check_classic_range([0.01], delta, accountant="pld")


PROPERTY_GRID = [
    (z, t, d)
    for z in (0.3, 1.0, 3.0, 4.9, 5.5, 8.0, 20.0, 100.0, 1000.0)
    for t in (1, 3, 20, 100, 1000)
    for d in (1e-2, 1e-5, 1e-9)
]


@pytest.mark.parametrize("accountant", CLASSIC)
def test_classic_figures_are_upper_bounds_or_refused(accountant: str) -> None:
    # T Gaussian releases with multiplier z are exactly one with multiplier z / sqrt(T), so the
    # analytic Gaussian epsilon of z / sqrt(T) at the same total delta is the true epsilon of
    # the releases: a lower bound for every valid accountant.
    given = refused = 0
    for z, t, d in PROPERTY_GRID:
        if z >= _z_min(accountant, t, d):
            eps = gaussian_epsilon(z, t, d, accountant=accountant)
            exact = dp_accounting.get_epsilon_gaussian(z / math.sqrt(t), d)
            assert eps >= exact, (z, t, d, eps, exact)
            assert gaussian_epsilon_heterogeneous([z] * t, d, accountant=accountant) == (
                pytest.approx(eps, rel=1e-12)
            )
            given += 1
        else:
            with pytest.raises(DpfedInputError, match="proven only for a per-step epsilon <= 1"):
                gaussian_epsilon(z, t, d, accountant=accountant)
            refused += 1
    assert given > 20 and refused > 20  # the grid straddles the range


@pytest.mark.parametrize("accountant", CLASSIC)
def test_heterogeneous_classic_figures_are_upper_bounds(accountant: str) -> None:
    rng = np.random.default_rng(7)
    for t, d in [(2, 1e-5), (10, 1e-3), (50, 1e-7)]:
        zs = (_z_min(accountant, t, d) * rng.uniform(1.0, 6.0, size=t)).tolist()
        eps = gaussian_epsilon_heterogeneous(zs, d, accountant=accountant)
        # Gaussian releases compose exactly to one with z^-2 = sum z_t^-2
        z_eff = math.fsum(z**-2 for z in zs) ** -0.5
        assert eps >= dp_accounting.get_epsilon_gaussian(z_eff, d)


@pytest.mark.parametrize("accountant", CLASSIC)
@pytest.mark.parametrize(("steps", "delta"), [(1, 1e-5), (5, 1e-3), (50, 1e-6), (1000, 1e-9)])
@pytest.mark.parametrize("fraction", [0.01, 0.3, 1.0])
def test_classic_calibration_round_trips_inside_the_range(
    accountant: str, steps: int, delta: float, fraction: float
) -> None:
    target = fraction * _limit(accountant, steps, delta)
    z = calibrate_noise_multiplier(target, delta, steps, accountant=accountant)
    z_min = _z_min(accountant, steps, delta)
    assert z >= z_min * (1 - 1e-9)
    eps = gaussian_epsilon(z, steps, delta, accountant=accountant)
    assert target * (1 - 1e-9) <= eps <= target
    assert eps >= dp_accounting.get_epsilon_gaussian(z / math.sqrt(steps), delta)
    # smallest: 0.1% less noise certifies more than the target, or nothing at all
    if 0.999 * z >= z_min:
        assert gaussian_epsilon(0.999 * z, steps, delta, accountant=accountant) > target
    else:
        with pytest.raises(DpfedInputError, match="proven only"):
            gaussian_epsilon(0.999 * z, steps, delta, accountant=accountant)


@pytest.mark.parametrize(
    ("accountant", "target", "steps"),
    [
        ("basic", 20.0, 1),
        ("basic", 50.0, 1),
        ("basic", 10.5, 10),
        ("advanced", 7.0, 1),
        ("advanced", 60.0, 20),
    ],
)
def test_classic_calibration_refuses_a_target_outside_the_range(
    accountant: str, target: float, steps: int
) -> None:
    limit = _limit(accountant, steps, 1e-5)
    assert target > limit
    with pytest.raises(DpfedInputError) as info:
        calibrate_noise_multiplier(target, 1e-5, steps, accountant=accountant)
    msg = str(info.value)
    assert msg.startswith(
        f"accountant '{accountant}' uses the classical Gaussian bound, proven "
        "only for a per-step epsilon <= 1, i.e. noise multiplier >= "
    )
    assert f"found target epsilon {target:g}, above the {limit:.4g} it certifies" in msg
    assert msg.endswith("Use accountant 'pld' or 'rdp'.")


def test_the_refused_classic_calibration_would_have_been_false() -> None:
    # what "basic" used to return for epsilon 20 (50), delta 1e-5, one step: the formula's noise,
    # whose exact epsilon is 25.4 (96.4)
    for target, exact in [(20.0, 25.44), (50.0, 96.43)]:
        z = math.sqrt(2 * math.log(1.25 / 1e-5)) / target
        assert dp_accounting.get_epsilon_gaussian(z, 1e-5) == pytest.approx(exact, abs=0.01)


def test_classic_sigma_refuses_epsilon_above_one() -> None:
    assert classic_gaussian_sigma(1.0, 1e-5, 2.0) == pytest.approx(
        2.0 * math.sqrt(2 * math.log(1.25e5)), rel=1e-14
    )
    with pytest.raises(
        DpfedInputError,
        match=r"per-release epsilon <= 1, i\.e\. noise multiplier >= 4\.84 at per-release delta "
        r"1e-05; found epsilon 1\.5\. Use accountant 'pld' or 'rdp'",
    ):
        classic_gaussian_sigma(1.5, 1e-5, 2.0)


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


# --------------------------------------------------------------------------------------------
# releases of any mechanism (the accounting spine)
# --------------------------------------------------------------------------------------------


def _kfold_pure_delta(eps: float, k: int, eps_prime: float) -> float:
    """Exact delta(eps') of k compositions of eps-DP (Kairouz, Oh, Viswanath 2015): the
    hockey-stick divergence of k-fold binary randomized response."""
    p = math.exp(eps) / (1.0 + math.exp(eps))
    return math.fsum(
        math.comb(k, j)
        * max(0.0, p ** (k - j) * (1 - p) ** j - math.exp(eps_prime) * p**j * (1 - p) ** (k - j))
        for j in range(k + 1)
    )


def test_one_pure_release_is_its_epsilon():
    for eps in (0.1, 1.0, 3.0):
        got = releases_epsilon([Release("l2_laplace", 1.0 / eps)], 1e-9)
        assert got == pytest.approx(eps, abs=2e-3)
        assert releases_epsilon([("l2_laplace", 1.0 / eps)], 1e-9, "rdp") >= got - 1e-9


@pytest.mark.parametrize(("eps", "k", "i"), [(0.1, 50, 20), (0.5, 10, 3), (1.0, 4, 1)])
def test_pure_composition_matches_the_optimal_composition_theorem(eps, k, i):
    # At delta(eps') of the exact k-fold composition, the PLD epsilon is eps' (a pessimistic
    # discretisation may add a little, never take away).
    eps_prime = (k - 2 * i) * eps
    delta = _kfold_pure_delta(eps, k, eps_prime)
    got = releases_epsilon([("l2_laplace", 1.0 / eps)] * k, delta)
    assert eps_prime - 1e-6 <= got <= eps_prime + 5e-3


def test_pure_composition_beats_basic_and_advanced():
    eps, k, delta = 0.1, 50, 1e-5
    releases = [("l2_laplace", 1.0 / eps)] * k
    advanced = advanced_composition([eps] * k, 0.0, delta)[0]
    for accountant in NUMERICAL_ACCOUNTANTS:
        got = releases_epsilon(releases, delta, accountant)
        assert got < advanced < basic_composition([eps] * k, [0.0] * k)[0]


def test_mixed_releases_cost_more_than_each_part_and_less_than_their_sum():
    delta = 1e-5
    gauss = [3.0] * 10
    pure = [("l2_laplace", 10.0)] * 20
    for accountant in NUMERICAL_ACCOUNTANTS:
        g = releases_epsilon(gauss, delta, accountant)
        p = releases_epsilon(pure, delta, accountant)
        both = releases_epsilon([*gauss, *pure], delta, accountant)
        assert max(g, p) < both < g + p + releases_epsilon(pure, 1e-300, "rdp")
    # the order of the releases does not matter
    assert releases_epsilon([*pure, *gauss], delta) == releases_epsilon([*gauss, *pure], delta)


def test_gaussian_releases_alone_are_the_gaussian_accountant():
    zs = [20.0, 20.0, 50.0]  # inside the classical bounds' proved range
    for accountant in ACCOUNTANTS:
        assert releases_epsilon(zs, 1e-5, accountant) == gaussian_releases_epsilon(
            zs, 1e-5, accountant
        )
    assert releases_epsilon([Release("gaussian", z) for z in zs], 1e-5) == (
        gaussian_releases_epsilon(zs, 1e-5)
    )
    assert releases_epsilon([], 1e-5) == 0.0


def test_a_negligible_pure_release_leaves_the_gaussian_epsilon():
    zs = [2.0, 3.0]
    for accountant in NUMERICAL_ACCOUNTANTS:
        alone = gaussian_releases_epsilon(zs, 1e-5, accountant)
        mixed = releases_epsilon([*zs, ("l2_laplace", 1e6)], 1e-5, accountant)
        assert mixed == pytest.approx(alone, rel=2e-3)


def test_small_gaussian_multipliers_with_pure_releases_fall_back_to_rdp():
    releases = [("gaussian", 0.1), ("l2_laplace", 10.0)]
    assert releases_epsilon(releases, 1e-5) == releases_epsilon(releases, 1e-5, "rdp")


def test_pure_releases_need_a_numerical_accountant():
    for accountant in ("advanced", "basic", "moments"):
        with pytest.raises(DpfedInputError, match=r"accountant must be one of \('pld', 'rdp'\)"):
            releases_epsilon([("l2_laplace", 2.0)], 1e-5, accountant)


@pytest.mark.parametrize(
    ("item", "match"),
    [
        (("laplace", 1.0), "mechanism must be one of"),
        (("l2_laplace", 0.0), "noise_multiplier must be a finite number > 0"),
        (("gaussian",), r"a release must be \(mechanism, noise_multiplier\)"),
        (-1.0, "noise_multiplier must be a finite number > 0"),
    ],
)
def test_bad_releases_are_refused(item, match):
    with pytest.raises(DpfedInputError, match=match):
        releases_epsilon([item], 1e-5)


def test_release_events_are_dp_accounting_events_or_ours():
    laplace = release_event(Release("l2_laplace", 4.0))
    assert isinstance(laplace, dp_accounting.DpEvent)
    assert isinstance(laplace, accountants.L2LaplaceDpEvent) and laplace.noise_multiplier == 4.0
    ring = release_event(Release("discrete_gaussian", 3.0))
    assert isinstance(ring, accountants.DiscreteGaussianDpEvent) and ring.noise_multiplier == 3.0
    assert release_event(as_release(2.5)) == dp_accounting.GaussianDpEvent(2.5)
    composed = releases_event([2.0, ("l2_laplace", 4.0), 2.0])
    assert composed == dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 2),
            dp_accounting.SelfComposedDpEvent(laplace, 1),
        ]
    )
    # RDP reads a pure 1/z-DP release as the binary randomized response at epsilon 1/z
    rr = RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    rr.compose(dp_accounting.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(0.25)), 2), 3)
    assert releases_epsilon([("l2_laplace", 4.0)] * 3, 1e-5, "rdp") == pytest.approx(
        rr.get_epsilon(1e-5), rel=1e-12
    )
    assert set(PURE_MECHANISMS) <= set(MECHANISMS)


def test_discrete_gaussian_releases_are_composed_by_rdp_whatever_the_accountant():
    # the ring noise's releases hold under Renyi DP only: PLD asked, RDP given (never the
    # smaller PLD figure), composed with Gaussian and pure releases
    alone = releases_epsilon([("discrete_gaussian", 3.0)], 1e-5)
    assert alone == pytest.approx(gaussian_releases_epsilon([3.0], 1e-5, "rdp"), rel=1e-12)
    assert alone > gaussian_releases_epsilon([3.0], 1e-5, "pld")
    mixed = [("discrete_gaussian", 3.0), 4.0, ("l2_laplace", 5.0)]
    acc = RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_accounting.GaussianDpEvent(3.0))
    acc.compose(dp_accounting.GaussianDpEvent(4.0))
    acc.compose(dp_accounting.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(0.2)), 2))
    for accountant in ("pld", "rdp"):
        assert releases_epsilon(mixed, 1e-5, accountant) == pytest.approx(
            acc.get_epsilon(1e-5), rel=1e-9
        )
    for closed in ("advanced", "basic", "moments"):
        with pytest.raises(DpfedInputError, match="accountant must be one of"):
            releases_epsilon([("discrete_gaussian", 3.0)], 1e-5, closed)
