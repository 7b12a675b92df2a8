"""Tests for dpfed.protocols.decentralized.alpha_design: L_acc fit, privacy utility, choice of
alpha (paper 001)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from dpfed._validation import DpfedInputError
from dpfed.protocols.decentralized.alpha_design import (
    PAPER_WEIGHTS,
    AlphaChoice,
    LossCurve,
    choose_alpha,
    fit_accuracy_loss,
    privacy_utility,
)

ALPHAS = np.array([0.01, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0])


def _analytic_optimum(curve: LossCurve, w: tuple, lo: float, hi: float) -> float:
    """Root of J'(alpha) = U'(alpha) - L'(alpha) on [lo, hi]."""
    w1, _, w3, w4 = w

    def dj(a: float) -> float:
        du = -w1 * (w3 + 2 * w4 * a) / (w3 * a + w4 * a * a)
        dl = -curve.c4 * curve.c5 * math.exp(-curve.c5 * a)
        return du - dl

    return optimize.brentq(dj, lo, hi, xtol=1e-14)


# --------------------------------------------------------------------------------------------
# fit
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("c4", "c5", "c6"),
    [(0.2, 25.0, 0.3), (3.0, 2.0, 1.0), (20.0, 20.0, 0.35), (0.05, 5.0, 0.0)],
)
def test_fit_recovers_noiseless_parameters(c4: float, c5: float, c6: float) -> None:
    losses = c4 * np.exp(-c5 * ALPHAS) + c6
    curve = fit_accuracy_loss(ALPHAS, losses)
    assert curve.c4 == pytest.approx(c4, rel=1e-6)
    assert curve.c5 == pytest.approx(c5, rel=1e-6)
    assert curve.c6 == pytest.approx(c6, rel=1e-6, abs=1e-9)
    assert curve.rms < 1e-9


def test_fit_from_three_points() -> None:
    a = [0.05, 0.2, 0.6]
    losses = [0.2 * math.exp(-25 * x) + 0.3 for x in a]
    curve = fit_accuracy_loss(a, losses)
    assert (curve.c4, curve.c5, curve.c6) == pytest.approx((0.2, 25.0, 0.3), rel=1e-6)


def test_fit_noisy_points_approximately() -> None:
    rng = np.random.default_rng(7)
    a = np.linspace(0.01, 1.0, 25)
    losses = 0.2 * np.exp(-25 * a) + 0.3 + rng.normal(0, 0.002, a.size)
    curve = fit_accuracy_loss(a, losses)
    assert curve.c4 == pytest.approx(0.2, abs=0.02)
    assert curve.c5 == pytest.approx(25.0, rel=0.15)
    assert curve.c6 == pytest.approx(0.3, abs=0.003)
    assert curve.rms == pytest.approx(0.002, rel=0.5)


def test_fit_of_flat_losses_has_no_tradeoff() -> None:
    curve = fit_accuracy_loss([0.1, 0.5, 1.0], [0.4, 0.4, 0.4])
    assert curve.c4 == pytest.approx(0.0, abs=1e-12)
    assert curve.c6 == pytest.approx(0.4)
    assert curve.c5 > 0


@pytest.mark.parametrize(
    ("alphas", "losses"),
    [
        ([0.1, 0.2], [1.0, 0.5]),  # fewer than 3 points
        ([0.1, 0.1, 0.2], [1.0, 0.9, 0.5]),  # only 2 distinct alphas
        ([0.1, 0.2, 0.3], [1.0, float("nan"), 0.5]),
        ([0.1, float("inf"), 0.3], [1.0, 0.7, 0.5]),
        ([0.1, 0.2, 0.3], [1.0, 0.7]),
        ([0.0, 0.2, 0.3], [1.0, 0.7, 0.5]),
        ([[0.1, 0.2, 0.3]], [[1.0, 0.7, 0.5]]),
        ("abc", [1.0, 0.7, 0.5]),
    ],
)
def test_fit_rejects(alphas: object, losses: object) -> None:
    with pytest.raises(DpfedInputError):
        fit_accuracy_loss(alphas, losses)  # type: ignore[arg-type]


def test_loss_curve_evaluation_and_validation() -> None:
    curve = LossCurve(0.2, 25.0, 0.3)
    assert curve(0.0) == pytest.approx(0.5)
    assert isinstance(curve(0.1), float)
    np.testing.assert_allclose(curve(np.array([0.0, 0.04])), [0.5, 0.2 * math.exp(-1) + 0.3])
    assert curve.derivative(0.0) == pytest.approx(-5.0)
    with pytest.raises(DpfedInputError):
        LossCurve(0.2, 0.0, 0.3)
    with pytest.raises(DpfedInputError):
        LossCurve(-0.2, 1.0, 0.3)
    with pytest.raises(DpfedInputError):
        LossCurve(0.2, 1.0, float("nan"))


# --------------------------------------------------------------------------------------------
# utility and choice
# --------------------------------------------------------------------------------------------


def test_privacy_utility_hand_computed() -> None:
    # w = (0.02, 6, 9, 1), alpha = 0.5: 0.02 ln(6 / (4.5 + 0.25)) = 0.02 ln(1.2631579)
    #   = 0.02 * 0.2336149 = 0.0046723
    assert privacy_utility(0.5) == pytest.approx(0.0046723, rel=1e-4)
    assert privacy_utility(0.5, PAPER_WEIGHTS) == pytest.approx(0.02 * math.log(6 / 4.75))
    values = privacy_utility(np.array([0.01, 0.1, 1.0]))
    assert values.shape == (3,)
    assert np.all(np.diff(values) < 0)  # decreasing: smaller alpha, more privacy


@pytest.mark.parametrize(
    ("c4", "c5", "lo", "hi"),
    [(0.2, 25.0, 0.05, 0.5), (20.0, 20.0, 0.3, 0.8)],  # the paper's DVP and PVP fits
)
def test_choose_alpha_finds_analytic_optimum(c4: float, c5: float, lo: float, hi: float) -> None:
    curve = LossCurve(c4, c5, 0.3)
    choice = choose_alpha(curve)
    assert isinstance(choice, AlphaChoice)
    expected = _analytic_optimum(curve, PAPER_WEIGHTS, lo, hi)
    assert choice.alpha == pytest.approx(expected, rel=1e-6)
    assert not choice.at_boundary
    assert choice.loss == pytest.approx(curve(choice.alpha))
    assert choice.utility == pytest.approx(privacy_utility(choice.alpha))
    assert choice.objective == pytest.approx(choice.utility - choice.loss)


def test_paper_dvp_curve_optimum_value() -> None:
    # U'(a) = L'(a): 0.02 (9 + 2a) / (9a + a^2) = 0.2 * 25 e^{-25 a}; at a = 0.1422:
    # lhs = 0.02 * 9.2844 / 1.2999 = 0.14285, rhs = 5 e^{-3.555} = 0.14288
    assert choose_alpha(LossCurve(0.2, 25.0, 0.0)).alpha == pytest.approx(0.1422, abs=2e-4)


def test_choose_alpha_is_the_grid_optimum_and_ignores_c6() -> None:
    grid = np.linspace(0.05, 0.5, 46)
    curve = LossCurve(0.2, 25.0, 0.3)
    values = privacy_utility(grid) - curve(grid)
    choice = choose_alpha(curve, grid=grid)
    assert abs(choice.alpha - grid[np.argmax(values)]) <= 0.01
    assert choice.objective >= values.max()
    shifted = choose_alpha(LossCurve(0.2, 25.0, 5.0), grid=grid)
    assert shifted.alpha == pytest.approx(choice.alpha, rel=1e-6)


def test_choose_alpha_boundary_and_no_interior_optimum_near_zero() -> None:
    curve = LossCurve(0.2, 25.0, 0.3)
    # on [0.3, 1] J is decreasing: the optimum is the lower end
    high = choose_alpha(curve, grid=np.linspace(0.3, 1.0, 50))
    assert high.at_boundary
    assert high.alpha == pytest.approx(0.3)
    # U -> infinity as alpha -> 0: extending the range down moves the answer to its end
    wide = choose_alpha(curve, grid=np.geomspace(1e-8, 1.0, 500))
    assert wide.at_boundary
    assert wide.alpha == pytest.approx(1e-8)


@pytest.mark.parametrize(
    "w", [(0.0, 6, 9, 1), (0.02, 0, 9, 1), (0.02, 6, 0, 0), (0.02, 6, -1, 1), (0.02, 6, 9)]
)
def test_utility_rejects_bad_weights(w: tuple) -> None:
    with pytest.raises(DpfedInputError):
        privacy_utility(0.5, w)


def test_choose_alpha_rejects() -> None:
    curve = LossCurve(0.2, 25.0, 0.3)
    with pytest.raises(DpfedInputError, match="grid"):
        choose_alpha(curve, grid=[0.1])
    with pytest.raises(DpfedInputError, match="grid"):
        choose_alpha(curve, grid=[0.0, 0.1])
    with pytest.raises(DpfedInputError, match="curve"):
        choose_alpha((0.2, 25.0, 0.3))  # type: ignore[arg-type]
    with pytest.raises(DpfedInputError):
        privacy_utility(0.0)
