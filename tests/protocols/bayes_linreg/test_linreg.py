"""The whole method, fit_dp_linreg: modes, projection, centring, clipping, privacy report,
errors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.privacy.discrete_accounting import distributed_discrete_releases_epsilon
from dpfed.protocols.bayes_linreg import (
    ThresholdCache,
    calibrate_releases,
    fit_dp_linreg,
    moment_sensitivity,
    row_statistics,
    statistics_sensitivity,
    sum_sensitivity,
)
from dpfed.protocols.bayes_linreg.aggregation import RingRelease
from dpfed.protocols.bayes_linreg.linreg import RING_SAMPLER
from dpfed.protocols.bayes_linreg.sufficient_stats import n_statistics


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
    fit = fit_dp_linreg(X, y, mode="nonprivate", centre=False)
    expected = np.linalg.solve(np.eye(3) + X.T @ X, X.T @ y)
    np.testing.assert_allclose(fit.coef, expected, rtol=1e-10)
    assert fit.privacy()["epsilon"] == 0.0 and fit.bounds is None
    assert fit.centring is None and fit.intercept == 0.0
    np.testing.assert_allclose(fit.predict(X), X @ expected, rtol=1e-10)


def test_nonprivate_centring_uses_the_exact_means(data):
    X, y = data
    X, y = X + np.array([3.0, -1.0, 0.5]), y + 2.0
    fit = fit_dp_linreg(X, y, mode="nonprivate")
    Xc, yc = X - X.mean(axis=0), y - y.mean()
    expected = np.linalg.solve(np.eye(3) + Xc.T @ Xc, Xc.T @ yc)
    np.testing.assert_allclose(fit.coef, expected, rtol=1e-10)
    assert fit.centring.release == "exact"
    np.testing.assert_allclose(fit.predict(X), Xc @ expected + y.mean(), rtol=1e-10)
    assert fit.intercept == pytest.approx(y.mean() - X.mean(axis=0) @ expected)
    assert fit.privacy()["releases"] == [] and fit.privacy()["centre"] is True


def test_clipping_is_enforced_on_what_clients_send(data):
    X, y = data
    X = X.copy()
    X[0] = [100.0, -100.0, 3.0]
    y = y.copy()
    y[1] = 1e3
    spy = Spy()
    fit = fit_dp_linreg(
        X,
        y,
        epsilon=1.0,
        delta=1e-4,
        mode="distributed",
        bound_x=2.0,
        bound_y=1.5,
        rng=0,
        aggregate=spy,
        centre=False,
    )
    assert len(spy.calls) == 1  # the paper's algorithm: one release
    sent = spy.calls[0]["values"]
    np.testing.assert_allclose(sent, row_statistics(np.clip(X, -2, 2), np.clip(y, -1.5, 1.5)))
    assert np.abs(sent[:, :6]).max() <= 4.0 and np.abs(sent[:, 6:]).max() <= 3.0
    sigma = fit.calibration.noise_multipliers[0] * statistics_sensitivity(2.0, 1.5, 3)
    assert fit.sigma_std == pytest.approx(sigma)
    np.testing.assert_allclose(spy.calls[0]["noise_std"], sigma / np.sqrt(400 - 1))


def test_large_budget_approaches_the_clipped_nonprivate_fit(data):
    X, y = data
    fit = fit_dp_linreg(
        X, y, epsilon=1e7, delta=1e-4, mode="trusted", calibration="paper", rng=1, centre=False
    )
    clipped = fit_dp_linreg(
        np.clip(X, -7.5, 7.5), np.clip(y, -7.5, 7.5), mode="nonprivate", centre=False
    )
    np.testing.assert_allclose(fit.coef, clipped.coef, rtol=1e-3)
    # with centring: the DP means approach the clipped rows' means
    fit = fit_dp_linreg(X, y, epsilon=1e7, delta=1e-4, mode="trusted", calibration="paper", rng=1)
    Xc, yc = np.clip(X, -7.5, 7.5), np.clip(y, -7.5, 7.5)
    np.testing.assert_allclose(fit.centring.means, np.append(Xc.mean(0), yc.mean()), atol=1e-4)
    centred = fit_dp_linreg(Xc, yc, mode="nonprivate")
    np.testing.assert_allclose(fit.coef, centred.coef, rtol=1e-3)


def test_projection_report_and_bounds(data):
    X, y = data
    spy = Spy()
    cache = ThresholdCache()
    fit = fit_dp_linreg(
        X,
        y,
        epsilon=2.0,
        delta=1e-4,
        mode="distributed",
        projection=True,
        rng=np.random.default_rng(3),
        aggregate=spy,
        threshold_repeats=2,
        threshold_cache=cache,
    )
    assert len(spy.calls) == 2  # moments (with the column sums), then statistics
    assert spy.calls[0]["values"].shape == (400, 8)
    assert fit.bounds.shape == (4,) and np.all(fit.bounds <= 7.5) and np.all(fit.bounds > 0)
    p = np.append(np.full(3, fit.thresholds.p_x), fit.thresholds.p_y)
    np.testing.assert_allclose(fit.bounds, np.minimum(p * fit.stds.stds, 7.5))
    assert np.abs(spy.calls[1]["values"][:, :6]).max() <= fit.bounds[:3].max() ** 2 + 1e-12
    report = fit.privacy()
    assert report["epsilon"] == 2.0 and report["delta"] == 1e-4
    assert report["calibration"] == "tight" and len(report["releases"]) == 2
    assert "column sums" in report["releases"][0]["what"] and report["centre"] is True
    assert report["epsilon_accounted"] <= 2.0 * (1 + 1e-9)
    assert cache.misses == 1
    fit_dp_linreg(
        X,
        y,
        epsilon=2.0,
        delta=1e-4,
        mode="distributed",
        projection=True,
        rng=4,
        aggregate=spy,
        threshold_repeats=2,
        threshold_cache=cache,
    )
    assert cache.hits == 1


@pytest.mark.parametrize("mode", ["trusted", "input"])
def test_seeded_fits_are_reproducible(data, mode):
    X, y = data
    a = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, mode=mode, rng=7)
    b = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, mode=mode, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a.coef, b.coef)


@pytest.mark.parametrize("projection", [False, True])
def test_distributed_mode_accounts_its_exact_ring_noise(data, projection):
    # the default secure sum: every release's noise is exact in the ring, and the accounted
    # epsilon is the distributed discrete Gaussian's RDP figure of the noise actually added
    X, y = data
    fit = fit_dp_linreg(
        X,
        y,
        epsilon=1.0,
        delta=1e-4,
        mode="distributed",
        rng=3,
        projection=projection,
        threshold_repeats=1,
        tolerated=4,
    )
    privacy = fit.privacy()
    assert privacy["sampler"] == RING_SAMPLER
    assert "Renyi" in privacy["composition"]
    rings = [
        r
        for r in (getattr(fit.stds, "ring", None), getattr(fit.centring, "ring", None))
        if r is not None
    ]
    assert len(rings) == 1  # moments (projection) or column sums (centring): one first release
    final = RingRelease.for_sum(fit.sigma_std, fit.sensitivity, 400, 4, n_statistics(3))
    expected = distributed_discrete_releases_epsilon([rings[0].as_tuple(), final.as_tuple()], 1e-4)
    assert privacy["epsilon_accounted"] == pytest.approx(expected, rel=1e-12)
    assert expected <= 1.0 and privacy["epsilon"] == 1.0
    # calibrated by RDP, so the figure is the target (not the lower PLD one)
    assert expected == pytest.approx(1.0, rel=1e-3)
    # the paper's calibration: the accounted RDP figure, never below the stated one
    paper = fit_dp_linreg(
        X,
        y,
        epsilon=2.0,
        delta=1e-4,
        mode="distributed",
        rng=3,
        calibration="paper",
        projection=projection,
        threshold_repeats=1,
    )
    assert paper.privacy()["epsilon"] >= paper.privacy()["epsilon_accounted"] - 1e-12
    assert paper.privacy()["epsilon"] >= 2.0


def test_paper_calibration_note_for_epsilon_at_least_one(data):
    X, y = data
    fit = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, calibration="paper", rng=0, centre=False)
    assert any("only for epsilon < 1" in n for n in fit.privacy()["notes"])
    fit = fit_dp_linreg(X, y, epsilon=0.5, delta=1e-4, calibration="paper", rng=0, centre=False)
    assert not any("only for epsilon < 1" in n for n in fit.privacy()["notes"])
    # with centring the budget is split 0.3 : 0.7 (basic composition): epsilon 0.3 and 0.7
    fit = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, calibration="paper", rng=0)
    flat = [v for budget in fit.calibration.release_budgets for v in budget]
    assert flat == pytest.approx([0.3, 0.3e-4, 0.7, 0.7e-4])
    assert not any("only for epsilon < 1" in n for n in fit.privacy()["notes"])
    fit = fit_dp_linreg(X, y, epsilon=2.0, delta=1e-4, calibration="paper", rng=0)
    assert any("only for epsilon < 1" in n and "1.4" in n for n in fit.privacy()["notes"])


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


# -- centring by DP means --------------------------------------------------------------------


def test_centring_release_is_accounted_and_calibrated(data):
    X, y = data
    X = X + 1.0
    spy = Spy()
    fit = fit_dp_linreg(
        X,
        y,
        epsilon=1.0,
        delta=1e-4,
        mode="distributed",
        bound_x=6.0,
        bound_y=5.0,
        rng=0,
        aggregate=spy,
    )
    assert len(spy.calls) == 2  # column sums, then statistics
    Xc, yc = np.clip(X, -6.0, 6.0), np.clip(y, -5.0, 5.0)
    np.testing.assert_allclose(spy.calls[0]["values"], np.column_stack([Xc, yc]))
    # the budget: two releases split 0.3 : 0.7 in z^-2, composing to the total
    cal = fit.calibration
    z = calibrate_releases(1.0, 1e-4, projection=False).noise_multipliers[0]
    z0, z1 = cal.noise_multipliers
    assert z0**-2 == pytest.approx(0.3 * z**-2) and z1**-2 == pytest.approx(0.7 * z**-2)
    assert cal.epsilon_accounted <= 1.0 * (1 + 1e-9)
    assert cal.first_release == "column sums (centring)"
    # its noise: sigma = z0 * 2 sqrt(sum c^2), split over N - 1 clients in the secure sum
    sens = sum_sensitivity(6.0, 5.0, 3)
    assert sens == pytest.approx(2 * np.sqrt(3 * 36 + 25))
    assert fit.centring.sensitivity == pytest.approx(sens)
    assert fit.centring.sigma_std == pytest.approx(z0 * sens)
    np.testing.assert_allclose(spy.calls[0]["noise_std"], z0 * sens / np.sqrt(400 - 1))
    np.testing.assert_allclose(fit.centring.mean_noise_std, z0 * sens * np.sqrt(400 / 399) / 400)
    # the privacy report lists it
    report = fit.privacy()
    assert [r["what"] for r in report["releases"]] == [
        "column sums (the DP means of the centring)",
        "sufficient statistics",
    ]
    first = report["releases"][0]
    assert first["noise_multiplier"] == z0 and first["l2_sensitivity"] == pytest.approx(sens)
    assert first["sigma_std"] == pytest.approx(z0 * sens) and report["first_share"] == 0.3
    assert "column sums" in report["composition"]
    # the statistics are those of the centred rows, clipped again to the assumed bounds
    m = fit.centring.means
    expected = row_statistics(np.clip(Xc - m[:3], -6.0, 6.0), np.clip(yc - m[3], -5.0, 5.0))
    np.testing.assert_allclose(spy.calls[1]["values"], expected)


def test_centring_noise_variance_is_as_calibrated():
    rng = np.random.default_rng(5)
    X, y = rng.uniform(-2, 2, size=(60, 3)), rng.uniform(-2, 2, size=60)
    true = np.append(X.mean(0), y.mean())
    draws = np.array(
        [
            fit_dp_linreg(
                X,
                y,
                epsilon=2.0,
                delta=1e-4,
                mode="trusted",
                bound_x=2.0,
                bound_y=2.0,
                rng=np.random.default_rng([9, k]),
            ).centring.means
            for k in range(1500)
        ]
    )
    z0 = calibrate_releases(
        2.0, 1e-4, projection=False, centre=True, coordinates=n_statistics(3) + 8
    ).noise_multipliers[0]
    sigma = z0 * sum_sensitivity(2.0, 2.0, 3)
    measured = ((draws - true) * 60).var(axis=0)
    np.testing.assert_allclose(measured, sigma**2, rtol=0.12)
    np.testing.assert_allclose((draws - true).mean(axis=0), 0.0, atol=4 * sigma / 60 / 38)


def test_projection_reuses_the_moments_release_for_the_means(data):
    X, y = data
    spy = Spy()
    fit = fit_dp_linreg(
        X + 2.0,
        y,
        epsilon=2.0,
        delta=1e-4,
        mode="distributed",
        projection=True,
        rng=1,
        aggregate=spy,
        threshold_repeats=1,
    )
    assert len(spy.calls) == 2
    Xc, yc = np.clip(X + 2.0, -7.5, 7.5), np.clip(y, -7.5, 7.5)
    v = np.column_stack([Xc, yc])
    w = np.full(4, 7.5 / np.sqrt(2))
    np.testing.assert_allclose(spy.calls[0]["values"], np.column_stack([v * v, v * w]))
    sens = moment_sensitivity(7.5, 7.5, 3, first=True, first_scale=w)
    assert sens == pytest.approx(np.sqrt(4 * 2 * 7.5**4))
    assert fit.stds.sensitivity == pytest.approx(sens)
    assert fit.centring.release == "marginal moments"
    z0 = fit.calibration.noise_multipliers[0]
    np.testing.assert_allclose(spy.calls[0]["noise_std"], z0 * sens / np.sqrt(399))
    np.testing.assert_allclose(
        fit.centring.mean_noise_std, z0 * sens * np.sqrt(400 / 399) / w / 400
    )
    # the variance is taken around the DP means
    second = fit.stds.variances + fit.centring.means**2
    assert np.all(np.isfinite(second))
    # projection bounds act on the centred rows
    m = fit.centring.means
    b = fit.bounds
    expected = row_statistics(np.clip(Xc - m[:3], -b[:3], b[:3]), np.clip(yc - m[3], -b[3], b[3]))
    np.testing.assert_allclose(spy.calls[1]["values"], expected)
    assert fit.privacy()["releases"][0]["first_moment_scale"] == pytest.approx(w.tolist())


class Shift:
    """A noiseless secure sum that adds ``offset`` to the first release's total."""

    def __init__(self, offset):
        self.offset = np.asarray(offset, dtype=float)
        self.calls = 0

    def __call__(self, values, *, noise_std, compute_nodes, tolerated, rng):
        total = values.sum(axis=0)
        if self.calls == 0:
            total = total + self.offset
        self.calls += 1
        return SimpleNamespace(total=total)


def test_predictions_use_the_dp_means(data):
    X, y = data
    X, y = X + np.array([1.0, -2.0, 0.5]), y + 3.0
    kwargs = dict(epsilon=1.0, delta=1e-4, mode="distributed", bound_x=50.0, bound_y=50.0, rng=0)
    exact = fit_dp_linreg(X, y, aggregate=Shift(np.zeros(4)), **kwargs)
    np.testing.assert_allclose(exact.centring.means, np.append(X.mean(0), y.mean()))
    # the released target sum is off by 400 * 0.25: the DP target mean is off by 0.25
    shifted = fit_dp_linreg(X, y, aggregate=Shift([0.0, 0.0, 0.0, 100.0]), **kwargs)
    assert shifted.centring.mean_y == pytest.approx(y.mean() + 0.25)
    np.testing.assert_allclose(shifted.coef, exact.coef, rtol=1e-9)
    np.testing.assert_allclose(shifted.predict(X), exact.predict(X) + 0.25, rtol=1e-9)
    # feature means: prediction is (x - m_x)^T mu + m_y
    moved = fit_dp_linreg(X, y, aggregate=Shift([40.0, -80.0, 0.0, 0.0]), **kwargs)
    m = moved.centring.means
    np.testing.assert_allclose(m[:3], X.mean(0) + np.array([0.1, -0.2, 0.0]))
    np.testing.assert_allclose(moved.predict(X), (X - m[:3]) @ moved.coef + m[3], rtol=1e-12)
    assert moved.intercept == pytest.approx(m[3] - m[:3] @ moved.coef)
    np.testing.assert_allclose(moved.predict(X), X @ moved.coef + moved.intercept, rtol=1e-9)
    assert moved.to_json()["centring"]["mean_y"] == pytest.approx(m[3])


def test_centre_false_is_the_papers_algorithm(data):
    X, y = data
    a = fit_dp_linreg(X, y, epsilon=1.0, delta=1e-4, rng=3, centre=False)
    assert a.centring is None and a.intercept == 0.0
    assert len(a.privacy()["releases"]) == 1 and a.privacy()["centre"] is False
    np.testing.assert_allclose(a.predict(X), X @ a.coef)
    d = X.shape[1]  # the default mode is trusted: its noise is drawn exactly on a grid
    assert (
        a.calibration.noise_multipliers
        == calibrate_releases(
            1.0, 1e-4, projection=False, coordinates=n_statistics(d) + 2 * (d + 1)
        ).noise_multipliers
    )
    assert a.privacy()["sampler"].startswith("exact discrete Gaussian")
    b = fit_dp_linreg(
        X, y, epsilon=1.0, delta=1e-4, rng=3, projection=True, centre=False, threshold_repeats=1
    )
    assert not b.stds.first_moments and b.stds.means is None and b.centring is None
