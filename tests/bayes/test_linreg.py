"""The whole method, fit_dp_linreg: modes, projection, clipping, privacy report, errors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.bayes import (
    ThresholdCache,
    fit_dp_linreg,
    row_statistics,
    statistics_sensitivity,
)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)) * 2
    y = X @ np.array([1.0, -0.5, 0.25]) + rng.normal(size=400)
    return X, y


class Spy:
    """A stand-in secure sum that records its inputs and adds the clients' noise."""

    def __init__(self):
        self.calls = []

    def __call__(self, values, *, noise_std, compute_nodes, tolerated, rng):
        self.calls.append({"values": values.copy(), "noise_std": np.asarray(noise_std)})
        noisy = values + rng.normal(size=values.shape) * noise_std
        return SimpleNamespace(total=noisy.sum(axis=0))


def test_nonprivate_is_the_closed_form(data):
    X, y = data
    fit = fit_dp_linreg(X, y, mode="nonprivate")
    expected = np.linalg.solve(np.eye(3) + X.T @ X, X.T @ y)
    np.testing.assert_allclose(fit.coef, expected, rtol=1e-10)
    assert fit.privacy()["epsilon"] == 0.0 and fit.bounds is None


def test_clipping_is_enforced_on_what_clients_send(data):
    X, y = data
    X = X.copy()
    X[0] = [100.0, -100.0, 3.0]
    y = y.copy()
    y[1] = 1e3
    spy = Spy()
    fit = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, mode="distributed", bound_x=2.0,
                        bound_y=1.5, rng=0, aggregate=spy)
    sent = spy.calls[0]["values"]
    np.testing.assert_allclose(sent, row_statistics(np.clip(X, -2, 2), np.clip(y, -1.5, 1.5)))
    assert np.abs(sent[:, :6]).max() <= 4.0 and np.abs(sent[:, 6:]).max() <= 3.0
    sigma = fit.calibration.noise_multipliers[0] * statistics_sensitivity(2.0, 1.5, 3)
    assert fit.sigma_std == pytest.approx(sigma)
    np.testing.assert_allclose(spy.calls[0]["noise_std"], sigma / np.sqrt(400 - 1))


def test_large_budget_approaches_the_clipped_nonprivate_fit(data):
    X, y = data
    fit = fit_dp_linreg(X, y, epsilon=1e7, delta=1e-4, mode="trusted", calibration="paper",
                        rng=1)
    clipped = fit_dp_linreg(np.clip(X, -7.5, 7.5), np.clip(y, -7.5, 7.5), mode="nonprivate")
    np.testing.assert_allclose(fit.coef, clipped.coef, rtol=1e-3)


def test_projection_report_and_bounds(data):
    X, y = data
    spy = Spy()
    cache = ThresholdCache()
    fit = fit_dp_linreg(X, y, epsilon=2.0, delta=1e-4, mode="distributed", projection=True,
                        rng=np.random.default_rng(3), aggregate=spy, threshold_repeats=2,
                        threshold_cache=cache)
    assert len(spy.calls) == 2  # moments, then statistics
    assert spy.calls[0]["values"].shape == (400, 4)
    assert fit.bounds.shape == (4,) and np.all(fit.bounds <= 7.5) and np.all(fit.bounds > 0)
    p = np.append(np.full(3, fit.thresholds.p_x), fit.thresholds.p_y)
    np.testing.assert_allclose(fit.bounds, np.minimum(p * fit.stds.stds, 7.5))
    assert np.abs(spy.calls[1]["values"][:, :6]).max() <= fit.bounds[:3].max() ** 2 + 1e-12
    report = fit.privacy()
    assert report["epsilon"] == 2.0 and report["delta"] == 1e-4
    assert report["calibration"] == "tight" and len(report["releases"]) == 2
    assert report["epsilon_accounted"] <= 2.0 * (1 + 1e-9)
    assert cache.misses == 1
    fit_dp_linreg(X, y, epsilon=2.0, delta=1e-4, mode="distributed", projection=True, rng=4,
                  aggregate=spy, threshold_repeats=2, threshold_cache=cache)
    assert cache.hits == 1


@pytest.mark.parametrize("mode", ["trusted", "input"])
def test_seeded_fits_are_reproducible(data, mode):
    X, y = data
    a = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, mode=mode, rng=7)
    b = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, mode=mode, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a.coef, b.coef)


def test_paper_calibration_note_for_epsilon_at_least_one(data):
    X, y = data
    fit = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, calibration="paper", rng=0)
    assert any("only for epsilon < 1" in n for n in fit.privacy()["notes"])
    fit = fit_dp_linreg(X, y, epsilon=0.5, delta=1e-4, calibration="paper", rng=0)
    assert not any("only for epsilon < 1" in n for n in fit.privacy()["notes"])


def test_bad_arguments(data):
    X, y = data
    with pytest.raises(DpfedInputError, match="projection"):
        fit_dp_linreg(X, y, mode="nonprivate", projection=True)
    with pytest.raises(DpfedInputError, match="needs epsilon and delta"):
        fit_dp_linreg(X, y, mode="trusted")
    with pytest.raises(DpfedInputError, match="mode must be one of"):
        fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, mode="secure")
    with pytest.raises(DpfedInputError, match="N - T - 1"):
        fit_dp_linreg(X[:3], y[:3], epsilon=1.0, delta=1e-4, mode="distributed", tolerated=2)
    with pytest.raises(DpfedInputError, match="y must be 1-D"):
        fit_dp_linreg(X, y[:-1], mode="nonprivate")
