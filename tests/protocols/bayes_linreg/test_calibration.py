"""Noise calibration of the releases: tight (exact, joint) and paper (classical, basic)."""

from __future__ import annotations

import math

import pytest

from dpfed import DpfedInputError
from dpfed.privacy.accounting import calibrate_noise_multiplier, gaussian_releases_epsilon
from dpfed.protocols.bayes_linreg import calibrate_releases


def test_tight_single_release_is_the_exact_gaussian():
    cal = calibrate_releases(1.0, 1e-4, projection=False)
    assert cal.noise_multipliers == (calibrate_noise_multiplier(1.0, 1e-4, 1, accountant="pld"),)
    assert cal.epsilon_accounted == pytest.approx(1.0, rel=1e-4)
    assert cal.epsilon_accounted <= 1.0
    assert cal.notes == () and cal.release_budgets is None


def test_tight_projection_splits_the_budget_jointly():
    cal = calibrate_releases(1.0, 1e-4, projection=True, std_share=0.3)
    z = calibrate_releases(1.0, 1e-4, projection=False).noise_multipliers[0]
    z1, z2 = cal.noise_multipliers
    assert z1**-2 + z2**-2 == pytest.approx(z**-2, rel=1e-12)
    assert z1**-2 == pytest.approx(0.3 * z**-2, rel=1e-12)
    assert cal.epsilon_accounted <= 1.0 * (1 + 1e-9)
    # the PLD accountant, composing the two releases separately, agrees
    assert gaussian_releases_epsilon([z1, z2], 1e-4) == pytest.approx(1.0, rel=1e-3)
    assert "jointly" in cal.composition


def test_centring_without_projection_is_a_first_release_of_its_own():
    z = calibrate_releases(1.0, 1e-4, projection=False).noise_multipliers[0]
    cal = calibrate_releases(1.0, 1e-4, projection=False, centre=True, centre_share=0.2)
    z1, z2 = cal.noise_multipliers
    assert z1**-2 == pytest.approx(0.2 * z**-2) and z2**-2 == pytest.approx(0.8 * z**-2)
    assert cal.first_share == 0.2 and cal.first_release == "column sums (centring)"
    assert cal.epsilon_accounted <= 1.0 * (1 + 1e-9)
    assert gaussian_releases_epsilon([z1, z2], 1e-4) == pytest.approx(1.0, rel=1e-3)
    assert cal.to_json()["first_release"] == "column sums (centring)"
    # with projection the sums share the moments release: same multipliers, std_share
    with_proj = calibrate_releases(1.0, 1e-4, projection=True, centre=True, centre_share=0.2)
    assert (
        with_proj.noise_multipliers
        == calibrate_releases(1.0, 1e-4, projection=True).noise_multipliers
    )
    assert with_proj.first_share == 0.3 and "column sums" in with_proj.first_release
    paper = calibrate_releases(0.5, 1e-4, projection=False, centre=True, calibration="paper")
    flat = [v for budget in paper.release_budgets for v in budget]
    assert flat == pytest.approx([0.15, 0.3e-4, 0.35, 0.7e-4])


def test_paper_calibration_is_classical_with_basic_composition():
    cal = calibrate_releases(0.9, 1e-4, projection=False, calibration="paper")
    assert cal.noise_multipliers[0] == pytest.approx(math.sqrt(2 * math.log(1.25e4)) / 0.9)
    assert cal.notes == ()  # epsilon < 1: the theorem applies
    cal = calibrate_releases(2.0, 1e-4, projection=True, calibration="paper")
    assert cal.release_budgets == ((0.6, 0.3e-4), (1.4, 0.7e-4))
    assert cal.noise_multipliers[1] == pytest.approx(math.sqrt(2 * math.log(1.25 / 0.7e-4)) / 1.4)
    assert any("only for epsilon < 1" in n and "1.4" in n for n in cal.notes)


def test_paper_calibration_at_large_epsilon_reports_the_exact_epsilon():
    cal = calibrate_releases(31.6, 1e-4, projection=False, calibration="paper")
    assert cal.epsilon_accounted > 50  # the classical formula under-states the noise needed
    assert any("more than the stated 31.6" in n for n in cal.notes)
    # the figure printed as the guarantee is never below the exact one; the paper's is kept
    assert cal.epsilon == cal.epsilon_accounted and cal.paper_epsilon == 31.6
    assert cal.to_json()["paper_epsilon"] == 31.6


def test_no_calibration_states_an_epsilon_below_the_noise_s_exact_epsilon():
    for calibration in ("tight", "paper"):
        for epsilon in (0.5, 2.0, 40.0):
            for projection in (False, True):
                cal = calibrate_releases(
                    epsilon, 1e-5, projection=projection, calibration=calibration
                )
                assert cal.epsilon >= cal.epsilon_accounted * (1 - 1e-9)
                assert cal.epsilon >= epsilon


def test_bad_arguments():
    with pytest.raises(DpfedInputError, match="calibration must be one of"):
        calibrate_releases(1.0, 1e-4, projection=False, calibration="classic")
    with pytest.raises(DpfedInputError, match="std_share"):
        calibrate_releases(1.0, 1e-4, projection=True, std_share=1.0)
    with pytest.raises(DpfedInputError, match="centre_share"):
        calibrate_releases(1.0, 1e-4, projection=False, centre=True, centre_share=0.0)
    with pytest.raises(DpfedInputError, match="delta"):
        calibrate_releases(1.0, 0.0, projection=False)
