"""Tests for dpfed.protocols.decentralized.calibration: DVP / PVP calibration (paper 001),
schedules, totals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.privacy.accounting import advanced_composition
from dpfed.protocols.decentralized.calibration import (
    DVPNoise,
    alpha_schedule,
    decentralized_total,
    dvp_noise,
    pvp_zeta,
)


def _jacobian_alpha(c1: float, cr: float, b: int, strong: float) -> float:
    """alpha_bar of eq. (30): 2 ln(1 + c1 C^R / (B (rho + Phi + 2 eta N_p)))."""
    return 2 * math.log(1 + c1 * cr / (b * strong))


# --------------------------------------------------------------------------------------------
# DVP
# --------------------------------------------------------------------------------------------


def test_dvp_branch_a_positive_hand_computed() -> None:
    # alpha = 1, c1 = 1/4, C^R = 1, B = 100, rho = 0.01, eta = 0.5, N_p = 2:
    # rho + 2 eta N_p = 0.01 + 2 = 2.01; c1 C^R / (B * 2.01) = 0.25 / 201 = 0.00124378
    # a = 1 - 2 ln(1.00124378) = 1 - 0.00248601 = 0.99751398 > 0  ->  Phi = 0,
    # zeta = a / 2 = 0.49875699
    noise = dvp_noise(1.0, c1=0.25, CR=1.0, B=100, rho=0.01, eta=0.5, n_neighbours=2)
    assert isinstance(noise, DVPNoise)
    assert noise.a == pytest.approx(0.99751398, rel=1e-7)
    assert noise.phi == 0.0
    assert noise.zeta == pytest.approx(0.49875699, rel=1e-7)
    assert noise.dual_scale == pytest.approx(1.0 / 200)
    # the budget splits exactly: noise density 2 zeta + Jacobian alpha_bar = alpha
    assert noise.alpha_hat + _jacobian_alpha(0.25, 1.0, 100, 2.01) == pytest.approx(1.0)
    assert noise.alpha_bar == pytest.approx(_jacobian_alpha(0.25, 1.0, 100, 2.01))


def test_dvp_branch_a_nonpositive_hand_computed() -> None:
    # The paper's DVP setting: c1 = 1/4, C^R = 1750, rho = 10^-2.5; alpha = 0.1, B = 1000,
    # eta = 1, N_p = 2: rho + 2 eta N_p = 4.0031623; c1 C^R / (B * 4.0031623) = 0.1092886;
    # a = 0.1 - 2 ln(1.1092886) = 0.1 - 0.2074378 = -0.1074378 <= 0, so
    # Phi = 437.5 / (1000 (e^{0.025} - 1)) - 4.0031623 = 437.5 / 25.3151 - 4.0031623
    #     = 17.2823 - 4.0032 = 13.2790;  zeta = alpha / 4 = 0.025
    rho = 10**-2.5
    noise = dvp_noise(0.1, c1=0.25, CR=1750.0, B=1000, rho=rho, eta=1.0, n_neighbours=2)
    assert noise.a == pytest.approx(-0.1074378, rel=1e-6)
    assert noise.phi == pytest.approx(13.2790, rel=1e-5)
    assert noise.zeta == pytest.approx(0.025, rel=1e-12)
    # with Phi the Jacobian takes alpha / 2 and the noise the other half
    strong = rho + noise.phi + 2 * 1.0 * 2
    assert _jacobian_alpha(0.25, 1750.0, 1000, strong) == pytest.approx(0.05, rel=1e-9)
    assert noise.alpha_hat + noise.alpha_bar == pytest.approx(0.1)


def test_dvp_small_positive_a_takes_the_penalty_branch_hand_computed() -> None:
    # Adult on 10 nodes (B = 3256), ring (N_p = 2), eta = 1, the paper's DVP setting, alpha = 0.1:
    # strong = 10^-2.5 + 4 = 4.0031623; c1 C^R / (B strong) = 437.5 / 13034.30 = 0.0335651;
    # a = 0.1 - 2 ln(1.0335651) = 0.1 - 0.0660286 = 0.0339714: positive but below alpha / 2,
    # so Phi = 437.5 / (3256 (e^{0.025} - 1)) - 4.0031623 = 5.3078 - 4.0032 = 1.3046 and
    # zeta = alpha / 4 = 0.025 (the paper's rule would draw zeta = a / 2 = 0.0169862).
    rho = 10**-2.5
    noise = dvp_noise(0.1, c1=0.25, CR=1750.0, B=3256, rho=rho, eta=1.0, n_neighbours=2)
    assert noise.a == pytest.approx(0.0339714, rel=1e-5)
    assert noise.phi == pytest.approx(1.3046, rel=1e-4)
    assert noise.zeta == pytest.approx(0.025, rel=1e-12)
    assert _jacobian_alpha(0.25, 1750.0, 3256, rho + noise.phi + 4.0) == pytest.approx(0.05)


def test_dvp_zeta_is_continuous_where_the_branches_meet() -> None:
    # zeta = max(a, alpha / 2) / 2: sweep B across the switch a = alpha / 2 and check there is
    # no jump (the paper's switch at a = 0 sends zeta to 0 from above)
    kwargs = {"c1": 0.25, "CR": 1750.0, "rho": 10**-2.5, "eta": 1.0, "n_neighbours": 2}
    for B in range(1500, 20000, 250):
        noise = dvp_noise(0.2, B=B, **kwargs)
        assert noise.zeta == pytest.approx(max(noise.a, 0.1) / 2, rel=1e-12)
        assert noise.zeta >= 0.05 - 1e-12
        jacobian = _jacobian_alpha(0.25, 1750.0, B, 10**-2.5 + noise.phi + 4.0)
        assert noise.alpha_hat + jacobian == pytest.approx(0.2)


def test_dvp_is_not_algorithm2_as_printed() -> None:
    # Algorithm 2 as printed draws with zeta = alpha_hat (half this noise); the proof (and
    # Chaudhuri et al.) need zeta = alpha_hat / 2, which is what dvp_noise returns.
    noise = dvp_noise(1.0, c1=0.25, CR=1.0, B=100, rho=0.01, eta=0.5, n_neighbours=2)
    assert noise.zeta == pytest.approx(noise.a / 2)


def test_dvp_noise_decreases_as_alpha_grows() -> None:
    kwargs = {"c1": 0.25, "CR": 1750.0, "B": 3000, "rho": 10**-2.5, "eta": 1.0, "n_neighbours": 3}
    zetas = [dvp_noise(a, **kwargs).zeta for a in (0.01, 0.1, 0.5, 1.0, 5.0)]
    assert np.all(np.diff(zetas) > 0)


# --------------------------------------------------------------------------------------------
# PVP
# --------------------------------------------------------------------------------------------


def test_pvp_zeta_hand_computed() -> None:
    # The paper's PVP setting rho = 0.1, C^R = 146; alpha = 0.5, B = 1000:
    # zeta = rho B alpha / (2 C^R) = 0.1 * 1000 * 0.5 / 292 = 50 / 292 = 0.17123288
    assert pvp_zeta(0.5, rho=0.1, B=1000, CR=146.0) == pytest.approx(0.17123288, rel=1e-7)


# --------------------------------------------------------------------------------------------
# schedules
# --------------------------------------------------------------------------------------------


def test_schedules() -> None:
    np.testing.assert_array_equal(alpha_schedule(0.5, 3), [0.5, 0.5, 0.5])
    np.testing.assert_allclose(
        alpha_schedule(1.0, 4, kind="geometric", rate=0.5), [1.0, 0.5, 0.25, 0.125]
    )
    np.testing.assert_allclose(alpha_schedule(1.0, 3, kind="linear", rate=0.5), [1.0, 1.5, 2.0])
    np.testing.assert_allclose(alpha_schedule(1.0, 3, kind="linear", rate=-0.25), [1, 0.75, 0.5])
    assert alpha_schedule(0.1, 100).shape == (100,)


@pytest.mark.parametrize(
    ("alpha", "steps", "kind", "rate"),
    [
        (0.0, 3, "constant", None),
        (-1.0, 3, "constant", None),
        (1.0, 0, "constant", None),
        (1.0, 3, "constant", 0.5),
        (1.0, 3, "cosine", None),
        (1.0, 3, "geometric", None),
        (1.0, 3, "geometric", 0.0),
        (1.0, 3, "linear", -0.5),  # alpha_2 = 0
        (1.0, 3, "linear", float("nan")),
        (1.0, 3, "linear", "fast"),
    ],
)
def test_schedule_rejects(alpha: float, steps: int, kind: str, rate: object) -> None:
    with pytest.raises(DpfedInputError):
        alpha_schedule(alpha, steps, kind=kind, rate=rate)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# totals
# --------------------------------------------------------------------------------------------


def test_total_basic_is_the_sum() -> None:
    total = decentralized_total([0.1, 0.2, 0.3])
    assert total["epsilon"] == pytest.approx(0.6)
    assert total["delta"] == 0.0
    assert total["method"] == "basic"
    assert total["advanced_epsilon"] is None
    assert total["steps"] == 3


def test_total_basic_wins_for_few_iterations() -> None:
    # advanced: sqrt(2 ln(1e5) * 0.14) + sum a (e^a - 1) = 1.7955 + 0.0460 > 0.6
    total = decentralized_total([0.1, 0.2, 0.3], delta=1e-5)
    assert total["method"] == "basic"
    assert total["epsilon"] == pytest.approx(0.6)
    assert total["advanced_epsilon"] > 0.6


def test_total_advanced_wins_for_many_small_alphas() -> None:
    # 1000 x 0.01: basic 10; advanced sqrt(2 ln(1e5) * 0.1) + 1000 * 0.01 (e^0.01 - 1)
    #   = sqrt(2.3025851) + 0.1005017 = 1.5174271 + 0.1005017 = 1.6179288
    alphas = alpha_schedule(0.01, 1000)
    total = decentralized_total(alphas, delta=1e-5)
    assert total["basic_epsilon"] == pytest.approx(10.0)
    assert total["method"] == "advanced"
    assert total["epsilon"] == pytest.approx(1.6179288, rel=1e-6)
    assert total["delta"] == 1e-5
    assert total["epsilon"] == advanced_composition(list(alphas), 0.0, 1e-5)[0]


def test_total_grows_with_iterations() -> None:
    totals = [decentralized_total(alpha_schedule(0.1, t), delta=1e-6)["epsilon"] for t in (1, 10)]
    assert totals[0] < totals[1]
    assert decentralized_total([0.1])["epsilon"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("alphas", "delta"),
    [([], None), ([0.1, 0.0], None), ([0.1, float("inf")], None), ("abc", None), ([0.1], 1.0)],
)
def test_total_rejects(alphas: object, delta: float | None) -> None:
    with pytest.raises(DpfedInputError):
        decentralized_total(alphas, delta=delta)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"alpha": 0.0},
        {"c1": 0.0},
        {"CR": -1.0},
        {"B": 0},
        {"rho": 0.0},
        {"eta": -1.0},
        {"n_neighbours": -1},
    ],
)
def test_dvp_rejects(kwargs: dict) -> None:
    base = {"alpha": 0.5, "c1": 0.25, "CR": 1.0, "B": 10, "rho": 0.1, "eta": 1.0, "n_neighbours": 1}
    merged = {**base, **kwargs}
    alpha = merged.pop("alpha")
    with pytest.raises(DpfedInputError):
        dvp_noise(alpha, **merged)


def test_pvp_rejects() -> None:
    with pytest.raises(DpfedInputError, match="rho"):
        pvp_zeta(0.5, rho=0.0, B=10, CR=1.0)
    with pytest.raises(DpfedInputError, match="alpha"):
        pvp_zeta(float("nan"), rho=0.1, B=10, CR=1.0)
