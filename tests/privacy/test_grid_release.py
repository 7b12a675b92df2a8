"""Tests for dpfed.privacy.grid_release: releases on a power-of-two grid, exact noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.privacy.grid_release import DEFAULT_GRID_BITS, GridGaussianRelease, grid_exponent


@pytest.mark.parametrize("sigma", [1e-9, 0.3, 1.0, 3.0, 1234.5, 2.0**40])
def test_grid_step_gives_2_to_26_grid_units(sigma):
    assert DEFAULT_GRID_BITS == 26
    e = grid_exponent(sigma)
    ratio = sigma / math.ldexp(1.0, e)
    assert 2**DEFAULT_GRID_BITS <= ratio < 2 ** (DEFAULT_GRID_BITS + 1)
    assert grid_exponent(sigma, 0) == math.floor(math.log2(sigma))


def test_parameters_in_grid_units():
    r = GridGaussianRelease("u", l2_sensitivity=0.5, sigma=3.0, dim=400)
    gamma = r.grid_step
    assert gamma == 2.0**-25  # 3 = 1.5 * 2^1: 3 / 2^-25 = 1.5 * 2^26
    assert r.sigma2_grid >= (3.0 / gamma) ** 2 and r.sigma2_grid - (3.0 / gamma) ** 2 < 1
    assert r.sensitivity_grid == 0.5 / gamma + 20.0  # sqrt(400) coordinates of slack
    assert r.noise_multiplier == pytest.approx(6.0 / (1 + 20 * gamma / 0.5), rel=1e-12)
    assert r.noise_multiplier < 3.0 / 0.5
    sparse = GridGaussianRelease("u", 0.5, 3.0, 400, changed_coordinates=1)
    assert sparse.sensitivity_grid == 0.5 / gamma + 1.0


def test_rounding_slack_bound_holds_for_neighbours():
    # rint moves each changed coordinate by at most |delta| + 1 grid units
    rng = np.random.default_rng(0)
    r = GridGaussianRelease("u", 1.0, 0.01, 50)
    gamma = r.grid_step
    worst = 0.0
    for _ in range(200):
        a = rng.normal(size=50)
        step = rng.normal(size=50)
        b = a + step / np.linalg.norm(step) * rng.uniform(0, 1.0)
        diff = np.rint(a / gamma) - np.rint(b / gamma)
        worst = max(worst, np.linalg.norm(diff) / r.sensitivity_grid)
    assert worst <= 1.0


def test_sample_is_on_the_grid_and_unbiased():
    r = GridGaussianRelease("u", 1.0, 2.0, 1000)
    rng = np.random.default_rng(1)
    value = np.linspace(-3, 3, 1000)
    out = r.sample(rng, np.tile(value, (200, 1)))
    assert out.shape == (200, 1000) and out.dtype == np.float64
    units = out / r.grid_step
    assert np.array_equal(units, np.rint(units))  # exact multiples of the grid step
    noise = out - np.rint(value / r.grid_step) * r.grid_step
    assert abs(noise.mean()) < 5 * 2.0 / math.sqrt(noise.size)
    assert noise.std() == pytest.approx(2.0, rel=0.01)
    again = r.sample(np.random.default_rng(1), np.tile(value, (200, 1)))
    assert np.array_equal(out, again)


def test_refusals():
    with pytest.raises(DpfedInputError, match="sigma"):
        GridGaussianRelease("u", 1.0, 0.0, 3)
    with pytest.raises(DpfedInputError, match="changed_coordinates"):
        GridGaussianRelease("u", 1.0, 1.0, 3, changed_coordinates=4)
    r = GridGaussianRelease("u", 1.0, 1.0, 3)
    with pytest.raises(DpfedInputError, match="last axis 3"):
        r.sample(np.random.default_rng(0), np.zeros(4))
    with pytest.raises(DpfedInputError, match="finite"):
        r.sample(np.random.default_rng(0), np.array([0.0, np.nan, 1.0]))
    with pytest.raises(DpfedInputError, match="too large"):
        r.sample(np.random.default_rng(0), np.array([0.0, 2.0**37, 1.0]))
    # between 2^53 and 2^62 grid units the integer release is kept, written as the nearest float
    big = r.sample(np.random.default_rng(0), np.array([0.0, 2.0**30, 1.0]))
    assert big[1] == pytest.approx(2.0**30, rel=1e-6)


@pytest.mark.parametrize(
    ("sens", "z", "dim"),
    [
        (0.5, 6.0, 400),
        (1.0, 0.3, 1),
        (2.0**-30, 20.0, 32561),
        (7.0, 1.0, 10**6),
        (1.0, 2.0**10 * (1 - 1e-9), 4),  # the raise crosses a power of two: a coarser grid
    ],
)
def test_for_multiplier_keeps_the_accounted_multiplier(sens, z, dim):
    r = GridGaussianRelease.for_multiplier("u", sens, z, dim)
    assert r.noise_multiplier >= z
    # the raise is what the rounding needs, no more: sigma = z (Delta + gamma sqrt d)
    assert r.sigma == pytest.approx(z * (sens + r.grid_step * math.sqrt(dim)), rel=1e-11)
    assert r.sigma / r.grid_step >= 2**DEFAULT_GRID_BITS
    assert r.noise_multiplier <= z * (1 + 1e-9)


def test_for_multiplier_keeps_the_multiplier_over_many_rounding_cases():
    rng = np.random.default_rng(11)
    for _ in range(3000):
        z = float(np.exp(rng.uniform(-3, 5)))
        sens = float(np.exp(rng.uniform(-20, 10)))
        dim = int(rng.integers(1, 10**6))
        assert GridGaussianRelease.for_multiplier("u", sens, z, dim).noise_multiplier >= z


def test_for_multiplier_refuses_a_multiplier_the_grid_cannot_keep():
    with pytest.raises(DpfedInputError, match="cannot keep noise multiplier"):
        GridGaussianRelease.for_multiplier("u", 1.0, 2.0**26, 4)


def test_for_multiplier_noise_has_the_multiplier_s_scale():
    r = GridGaussianRelease.for_multiplier("u", 0.25, 4.0, 200_000)
    noise = r.sample(np.random.default_rng(3), np.zeros(200_000))
    assert noise.std() == pytest.approx(1.0, rel=0.01)
