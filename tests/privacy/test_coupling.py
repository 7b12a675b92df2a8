"""Tests for dpfed.privacy.coupling: the delta that exact grid releases add to the continuous
accounting, and how every accountant and calibrator takes it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.privacy.accounting import (
    Release,
    as_release,
    calibrate_noise_multiplier,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_releases_epsilon,
    releases_epsilon,
    releases_event,
)
from dpfed.privacy.coupling import (
    COORDINATE_TV,
    RELEASE_GRID_BITS,
    calibration_delta,
    coupling_delta,
    epsilon_with_coupling,
    rounded_gaussian_tv_bound,
)
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.privacy.ledger import PrivacyEvent, PrivacyLedger


def test_coordinate_tv_is_the_bound_at_the_release_grid():
    assert RELEASE_GRID_BITS == 26
    assert COORDINATE_TV == rounded_gaussian_tv_bound(2.0**26)
    assert 4e-18 < COORDINATE_TV < 5e-18


def test_coupling_delta():
    assert coupling_delta(0, 5.0) == 0.0
    assert coupling_delta(1000, 2.0) == pytest.approx((1 + math.exp(2.0)) * 1000 * COORDINATE_TV)
    assert coupling_delta(10, 800.0) == math.inf
    # a9a's passive party at epsilon 8: 16 score releases of 32,561 coordinates
    assert 6e-9 < coupling_delta(16 * 32561, 8.0) < 8e-9
    with pytest.raises(DpfedInputError, match="coordinates"):
        coupling_delta(-1, 1.0)


@pytest.mark.parametrize(
    ("z", "steps", "coordinates", "delta"),
    [
        (3.0, 10, 10**7, 1e-5),
        (10.0, 100, 3 * 10**7, 1e-6),
        (2.0, 1, 10**9, 1e-5),
        (1.0, 1, 10**10, 1e-5),  # a coupling of about 4e-6: the second candidate's case
    ],
)
def test_epsilon_with_coupling_keeps_the_total_delta(z, steps, coordinates, delta):
    def continuous(d):
        return gaussian_epsilon(z, steps, d)

    eps = epsilon_with_coupling(continuous, delta, coordinates)
    assert eps >= continuous(delta)
    # the continuous profile at eps (closed form of the composed Gaussian) plus the coupling
    composed = z / math.sqrt(steps)
    assert gaussian_delta(composed, eps) + coupling_delta(coordinates, eps) <= delta * (1 + 1e-9)
    assert epsilon_with_coupling(continuous, delta, 0) == continuous(delta)


def test_a_coupling_above_half_of_delta_needs_the_fallback():
    def continuous(d):
        return gaussian_epsilon(1.0, 1, d)

    with pytest.raises(DpfedInputError, match="more than half"):
        epsilon_with_coupling(continuous, 1e-12, 10**9)
    assert epsilon_with_coupling(continuous, 1e-12, 10**9, fallback=lambda: 42.0) == 42.0
    assert calibration_delta(1e-12, 10**9, 1.0) == 1e-12  # the report then comes from RDP
    # a large epsilon: e^eps outgrows every delta, and the RDP figure is reported
    grid = gaussian_releases_epsilon([0.2] * 5, 1e-5, "pld", coordinates=10**6)
    assert grid == gaussian_releases_epsilon([0.2] * 5, 1e-5, "rdp")


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_calibration_delta_keeps_the_reported_epsilon_at_the_target(accountant):
    eps, delta, steps, coordinates = 1.0, 1e-8, 20, 10**8
    z = calibrate_noise_multiplier(
        eps, calibration_delta(delta, coordinates, eps), steps, accountant=accountant
    )
    reported = gaussian_releases_epsilon([z] * steps, delta, accountant, coordinates=coordinates)
    assert reported <= eps
    plain = calibrate_noise_multiplier(eps, delta, steps, accountant=accountant)
    assert z >= plain  # the coupling costs noise, if only a little
    assert z == pytest.approx(plain, rel=1e-2)
    if accountant == "rdp":  # an RDP bound holds for the discrete Gaussian: no coupling
        assert reported == gaussian_releases_epsilon([z] * steps, delta, accountant)


def test_releases_carry_coordinates_into_every_accountant():
    plain = [Release("gaussian", 2.0)] * 5
    grid = [Release("gaussian", 2.0, 10**6)] * 5
    assert as_release(("gaussian", 2.0, 7)) == Release("gaussian", 2.0, 7)
    assert as_release(("gaussian", 2.0)) == Release("gaussian", 2.0, 0)
    with pytest.raises(DpfedInputError, match="coordinates"):
        as_release(("gaussian", 2.0, -3))
    a, b = releases_epsilon(plain, 1e-7), releases_epsilon(grid, 1e-7)
    assert b > a
    assert b == pytest.approx(a, rel=1e-2)
    assert releases_epsilon(plain, 1e-7, "rdp") == releases_epsilon(grid, 1e-7, "rdp")
    mixed = [*grid, Release("l2_laplace", 4.0)]
    assert releases_epsilon(mixed, 1e-7) > releases_epsilon([*plain, ("l2_laplace", 4.0)], 1e-7)
    # the DpEvent is the continuous mechanisms' (the coupling is not an event)
    assert releases_event(grid) == releases_event(plain)


def test_ledger_events_record_their_coordinates():
    ledger = PrivacyLedger()
    for t in range(3):
        ledger.record(
            PrivacyEvent("bank", t, "gaussian", 2.0, 0.5, 1.0, "scores", coordinates=1000)
        )
    assert [r.coordinates for r in ledger.releases("bank")] == [1000] * 3
    assert ledger.epsilon("bank", 1e-5) == gaussian_releases_epsilon(
        [2.0] * 3, 1e-5, coordinates=3000
    )
    again = PrivacyEvent.from_dict(ledger.events("bank")[0].to_dict())
    assert again.coordinates == 1000
    with pytest.raises(DpfedInputError, match="coordinates"):
        PrivacyEvent("bank", 0, "gaussian", 2.0, 0.5, 1.0, coordinates=-1)


def test_gaussian_release_noise_is_on_the_grid_and_of_its_sigma():
    release = GaussianRelease.from_multiplier("scores", 0.5, 3.0)
    value = np.linspace(-2.0, 2.0, 50_000)
    out = release.noisy(np.random.default_rng(0), value)
    step = release.grid(value.size).grid_step
    assert np.array_equal(out / step, np.rint(out / step))
    noise = out - value
    assert noise.std() == pytest.approx(release.sigma, rel=0.02)
    assert release.grid(value.size).noise_multiplier >= release.noise_multiplier
    again = release.noisy(np.random.default_rng(0), value)
    assert np.array_equal(out, again)
    square = release.noisy(np.random.default_rng(0), value.reshape(500, 100))
    assert square.shape == (500, 100)
