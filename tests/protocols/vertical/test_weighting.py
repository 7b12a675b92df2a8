"""The label holder's weighting of the passive parties: the bound it minimises holds, the
statistics have the sensitivity their release is calibrated to, and a weighted private model
ends no worse than the label holder alone."""

import math
from dataclasses import replace

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.estimators.baselines import fit_local_only
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical
from dpfed.protocols.vertical.messages import Broadcast, Scores
from dpfed.protocols.vertical.weighting import (
    STATISTICS_FRACTIONS,
    StatisticsRelease,
    WeightingRequest,
    choose_passive_weight,
    fit_local_model,
    logistic_remainder_coefficients,
    third_derivative_bound,
)
from dpfed.runtime.messages import ProtocolError

from ...conftest import make_vertical_problem_with_test

LOGISTIC = get_loss("logistic")


def _mean_loss(scores, y):
    return float(np.mean(LOGISTIC.value(scores, y)))


def _exact_upper(release, scores, request):
    """The statistics at zero noise, in their own units (what ``upper`` gives without noise)."""
    values = release.statistics(scores, request) * release.scales
    values[1:] = np.maximum(values[1:], 0.0)
    return values


@pytest.mark.parametrize("signal", [0.0, 0.3, 1.0, 3.0])
@pytest.mark.parametrize("seed", range(5))
def test_the_chosen_weight_never_raises_the_training_loss(signal, seed):
    """With exact statistics, the loss at the chosen weight is at most the local-only loss,
    and the predicted change bounds the real one from above."""
    rng = np.random.default_rng(seed)
    n, bound = 2000, 2.0
    y = rng.choice([-1.0, 1.0], n)
    local = rng.normal(0, 1, n)
    # passive scores: some signal about the labels plus noise, within the score bound
    passive = np.clip(signal * 0.3 * y + rng.normal(0, 0.5, n), -bound, bound)
    change = np.clip(rng.normal(0, 0.1, n), -bound, bound)
    request = WeightingRequest.at(LOGISTIC, local, y, change)
    release = StatisticsRelease(
        n_samples=n, score_bound=bound, lipschitz=1.0, smoothness=0.25, noise_multiplier=1.0
    )
    choice = choose_passive_weight(
        own_change=np.zeros(n),
        request=request,
        upper_bounds=[_exact_upper(release, passive, request)],
        c3=third_derivative_bound(LOGISTIC),
    )
    beta = choice.weight
    before = _mean_loss(local, y)
    after = _mean_loss(local + beta * (change + passive), y)
    assert 0.0 <= beta <= 1.0
    assert after <= before + 1e-12
    assert after - before <= choice.predicted_change + 1e-12
    if signal >= 1.0:
        assert beta > 0.5  # useful passive scores are kept


def test_scores_that_do_not_help_get_weight_zero():
    """Scores of pure noise: the weight is 0 unless the statistics' noise happens to make them
    look useful, which the confidence margin keeps rare and small (measured: 4 of 60 seeds,
    weights up to 0.1; under the null about 1 in 15 draws)."""
    weights = []
    for seed in range(60):
        rng = np.random.default_rng(seed)
        n = 5000
        y = rng.choice([-1.0, 1.0], n)
        local = 2.0 * y + rng.normal(0, 1, n)  # a good local model
        passive = rng.normal(0, 0.5, n)  # noise
        request = WeightingRequest.at(LOGISTIC, local, y, np.zeros(n))
        release = StatisticsRelease(
            n_samples=n, score_bound=2.0, lipschitz=1.0, smoothness=0.25, noise_multiplier=3.0
        )
        released = release.apply(passive, request, rng)
        choice = choose_passive_weight(
            own_change=np.zeros(n),
            request=request,
            upper_bounds=[release.upper(released)],
            c3=third_derivative_bound(LOGISTIC),
        )
        weights.append(choice.weight)
    weights = np.array(weights)
    assert np.mean(weights > 0) <= 0.2
    assert weights.max() <= 0.25


def test_one_row_moves_the_statistics_by_at_most_their_sensitivity():
    """Replacing one row's score (anything in [-V, V]) moves the normalised vector by <= 1 in
    L2, and statistic k by <= sqrt(f_k), whatever the label holder broadcasts."""
    rng = np.random.default_rng(1)
    n, bound = 50, 1.5
    release = StatisticsRelease(
        n_samples=n, score_bound=bound, lipschitz=1.0, smoothness=0.25, noise_multiplier=1.0
    )
    worst = 0.0
    for _ in range(2000):
        # a dishonest label holder: derivatives far outside the loss's bounds, a huge change
        request = WeightingRequest(
            rng.normal(0, 5, n),
            rng.normal(0, 5, n),
            rng.normal(0, 5 * bound, n),
            rng.normal(0, 5, n),
            rng.normal(0, 5, n),
        )
        scores = rng.uniform(-bound, bound, n)
        other = scores.copy()
        i = rng.integers(n)
        other[i] = rng.choice([-bound, bound, rng.uniform(-bound, bound)])
        moved = release.statistics(scores, request) - release.statistics(other, request)
        assert np.all(np.abs(moved) <= np.sqrt(STATISTICS_FRACTIONS) + 1e-12)
        worst = max(worst, float(np.linalg.norm(moved)))
    assert worst <= 1.0 + 1e-12
    assert worst > 0.5  # the bound is not vacuous


def test_the_released_statistics_carry_the_planned_noise():
    rng = np.random.default_rng(2)
    n = 100
    release = StatisticsRelease(
        n_samples=n, score_bound=1.0, lipschitz=1.0, smoothness=0.25, noise_multiplier=2.5
    )
    request = WeightingRequest(np.ones(n), np.full(n, 0.2), np.zeros(n))
    scores = rng.uniform(-1, 1, n)
    exact = release.statistics(scores, request)
    draws = np.array([release.apply(scores, request, rng) for _ in range(20000)]) - exact
    assert np.allclose(draws.std(axis=0), 2.5, rtol=0.03)
    assert release.release.noise_multiplier == 2.5 and release.release.l2_sensitivity == 1.0


def test_the_local_model_is_the_label_holders_regularised_optimum():
    blocks, y, _, _ = make_vertical_problem_with_test(n=400, split=(4, 3))
    lam = 1e-2
    x = fit_local_model(blocks[0], y, LOGISTIC, lam * len(y))
    reference = fit_local_only(blocks, y, lam=lam)
    assert np.allclose(x, reference["coef"], atol=1e-6)


def _weak_passive_problem(seed=0):
    """A label holder with real features and a passive party with few rows of pure noise."""
    rng = np.random.default_rng(seed)
    n, n_test = 300, 2000
    w = rng.normal(0, 1, 5)
    X = rng.normal(0, 1, (n + n_test, 5)) / math.sqrt(5)
    y = np.where(X @ w * 3 + rng.logistic(size=n + n_test) > 0, 1.0, -1.0)
    noise = rng.normal(0, 1, (n + n_test, 40)) / math.sqrt(40)
    return [X[:n], noise[:n]], y[:n], [X[n:], noise[n:]], y[n:]


@pytest.mark.parametrize("epsilon", [1.0, 8.0])
def test_a_weighted_private_model_is_no_worse_than_local_only(epsilon):
    blocks, y, test_blocks, y_test = _weak_passive_problem()
    lam = 1e-3
    local = fit_local_only(blocks, y, lam=lam, test_blocks=test_blocks, test_labels=y_test)
    for seed in range(3):
        res = train_vertical(
            blocks,
            y,
            VerticalConfig(mechanism="sound", epsilon=epsilon, delta=1e-5, lam=lam, seed=seed),
            test_blocks=test_blocks,
            test_labels=y_test,
        )
        assert res.final["test_log_loss"] <= local["test_log_loss"] + 0.002
        assert res.privacy["epsilon"] <= epsilon
        weight = res.weighting["weight"]
        assert res.final["passive_weight"] == weight
        assert np.allclose(res.models["party1"], 0.0) == (weight == 0.0)


def test_the_statistics_release_is_accounted():
    blocks, y, test_blocks, y_test = make_vertical_problem_with_test(n=600, split=(4, 3))
    res = train_vertical(
        blocks,
        y,
        VerticalConfig(mechanism="sound", epsilon=2.0, delta=1e-5, seed=0),
        test_blocks=test_blocks,
        test_labels=y_test,
    )
    events = res.ledger.events("party1")
    assert [e.label for e in events].count("statistics") == 1
    assert res.privacy["per_party"]["party1"]["epsilon"] <= 2.0 + 1e-9
    off = train_vertical(
        blocks,
        y,
        VerticalConfig(mechanism="sound", epsilon=2.0, delta=1e-5, seed=0, passive_weighting=False),
    )
    assert "statistics" not in [e.label for e in off.ledger.events("party1")]
    # the same epsilon buys less noise per model release without the statistics
    assert off.privacy["per_party"]["party1"]["noise_multipliers"][0] < min(
        res.privacy["per_party"]["party1"]["noise_multipliers"]
    )


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(mechanism="none"), "part of the sound mechanism"),
        (
            dict(mechanism="sound", epsilon=1.0, delta=1e-5, protect_label_holder=True),
            "protect_label_holder",
        ),
        (dict(mechanism="sound", epsilon=1.0, delta=1e-5, loss="squared"), "bounded slope"),
    ],
)
def test_weighting_is_refused_where_it_does_not_hold(options, match):
    with pytest.raises(DpfedInputError, match=match):
        VerticalConfig(passive_weighting=True, **options).validated()


def test_defaults_weigh_only_unprotected_sound_jobs():
    sound = dict(mechanism="sound", epsilon=1.0, delta=1e-5)
    assert VerticalConfig(**sound).validated().passive_weighting is True
    assert VerticalConfig(**sound, protect_label_holder=True).validated().passive_weighting is False
    assert VerticalConfig().validated().passive_weighting is False


def test_parties_refuse_weighting_messages_out_of_place():
    from dpfed.protocols.vertical.driver import make_vertical_role, vertical_setup

    blocks, y, _, _ = make_vertical_problem_with_test(n=100, split=(3, 2))
    cfg = VerticalConfig(
        mechanism="sound",
        noise_multiplier=2.0,
        delta=1e-5,
        seed=0,
        iterations=2,
    ).validated()
    setup = vertical_setup(cfg, [b.shape[1] for b in blocks], len(y))
    names = ["label", "party1"]
    rng = np.random.default_rng(0)
    holder = make_vertical_role(setup, 0, names, blocks[0], rng=rng, labels=y)
    party = make_vertical_role(setup, 1, names, blocks[1], rng=np.random.default_rng(1))
    (first,) = holder.start()
    assert first.gradient is None  # round 0 of 2: nothing asked yet
    (reply,) = party.handle(first)
    assert reply.statistics is None
    sneaky = Scores("party1", "label", 1, reply.scores, np.zeros(3))
    with pytest.raises(ProtocolError, match="statistics"):
        holder.handle(sneaky)
    (second,) = holder.handle(reply)
    assert second.gradient is not None and second.change is not None
    assert second.rising is not None and second.rising.shape == (100,)  # the logistic loss
    for malformed, expected in (
        (replace(second, rising=None), "rising and falling"),
        (replace(second, falling=second.falling[:7]), r"falling must have shape \(100,\)"),
    ):
        with pytest.raises(ProtocolError, match=expected):
            party._release_statistics(malformed)
    (last,) = party.handle(second)
    assert last.statistics is not None and last.statistics.shape == (3,)
    (done,) = holder.handle(last)
    assert done.finished and 0.0 <= done.passive_weight <= 1.0
    bad = Broadcast(
        "label", "party1", 2, second.residual, second.dual, 0.25, True, passive_weight=1.5
    )
    with pytest.raises(ProtocolError, match=r"\[0, 1\]"):
        party.handle(bad)


@pytest.mark.parametrize("reach", [0.5, 2.0, 4.0])
def test_the_per_row_remainder_bounds_the_logistic_remainder_for_every_step(reach):
    """For scores from -8 to 8, both labels and steps anywhere in [-reach, reach], the loss
    minus its second-order expansion is at most C3 u t^3 / 6 (t > 0) or C3 w |t|^3 / 6
    (t < 0); the coefficients lie in [0, 1] and vanish for steps away from 0."""
    c3 = third_derivative_bound(LOGISTIC)
    a = np.linspace(-8.0, 8.0, 801)
    rising, falling = logistic_remainder_coefficients(a, reach)
    assert np.all((0.0 <= rising) & (rising <= 1.0) & (0.0 <= falling) & (falling <= 1.0))
    assert np.all(rising[a >= 0.0] == 0.0) and np.all(falling[a <= 0.0] == 0.0)
    steps = np.linspace(-reach, reach, 401)
    for label in (-1.0, 1.0):
        y = np.full(a.shape, label)
        base = LOGISTIC.value(a, y)
        slope, curve = LOGISTIC.derivative(a, y), LOGISTIC.second_derivative(a, y)
        for t in steps[steps != 0.0]:
            remainder = LOGISTIC.value(a + t, y) - base - slope * t - 0.5 * curve * t * t
            coefficient = rising if t > 0 else falling
            assert np.all(remainder <= c3 * coefficient * abs(t) ** 3 / 6.0 + 1e-12)
    assert np.mean(rising + falling) < 1.5  # the constant bound charges 2


def test_a_request_with_coefficients_weighs_the_cubes_by_sign():
    request = WeightingRequest(
        np.zeros(3), np.zeros(3), np.zeros(3), np.array([0.5, 0.0, 2.0]), np.array([1.0, 0.2, 0.0])
    )
    steps = np.array([2.0, -1.0, 1.0])
    assert request.cubic(steps) == pytest.approx(0.5 * 8 + 0.2 * 1 + 1.0 * 1)  # clipped to 1
    assert WeightingRequest(np.zeros(3), np.zeros(3), np.zeros(3)).cubic(steps) == 10.0
