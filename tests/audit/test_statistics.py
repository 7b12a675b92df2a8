"""The epsilon lower bound: valid on mechanisms whose epsilon is known exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfed._validation import DpfedInputError
from dpfed.audit.statistics import (
    clopper_pearson,
    epsilon_lower_bound,
    one_run_epsilon_lower_bound,
    one_run_p_value,
    roc_curve,
)
from dpfed.privacy.accounting import gaussian_epsilon_heterogeneous


def test_clopper_pearson_matches_the_beta_quantiles_and_the_edges():
    lo, hi = clopper_pearson(7, 50, 0.975)
    assert lo == pytest.approx(stats.beta.ppf(0.025, 7, 44))
    assert hi == pytest.approx(stats.beta.ppf(0.975, 8, 43))
    assert clopper_pearson(0, 10, 0.975)[0] == 0.0
    assert clopper_pearson(10, 10, 0.975)[1] == 1.0
    # (1 - level)^(1/n): the exact upper bound with no success
    assert clopper_pearson(0, 10, 0.975)[1] == pytest.approx(1 - 0.025 ** (1 / 10))
    with pytest.raises(DpfedInputError, match="successes"):
        clopper_pearson(11, 10, 0.975)


@pytest.mark.parametrize("mu", [0.5, 2.0, 4.0])
def test_the_bound_never_exceeds_the_true_epsilon_of_a_gaussian_test(mu):
    """mu-Gaussian DP: the scores of the optimal test are N(0, 1) and N(mu, 1). Over 40 audits
    the bound stays below the true epsilon (it may fail with probability 5% each, so allow
    a handful), and it grows with mu."""
    delta = 1e-5
    true_eps = gaussian_epsilon_heterogeneous([1.0 / mu], delta)
    rng = np.random.default_rng(int(mu * 10))
    bounds = [
        epsilon_lower_bound(rng.normal(size=400), rng.normal(mu, 1.0, size=400), delta).epsilon
        for _ in range(40)
    ]
    assert sum(b > true_eps for b in bounds) <= 5
    if mu >= 2:
        assert np.median(bounds) > 0


def test_a_perfect_test_is_bounded_by_the_number_of_runs():
    out, inn = np.zeros(200), np.ones(200)
    bound = epsilon_lower_bound(out, inn, 1e-5)
    assert bound.tpr == 1.0 and bound.fpr == 0.0
    # 100 evaluation runs: FPR <= 1 - 0.025^(1/100), TPR >= 0.025^(1/100)
    hi = 1 - 0.025 ** (1 / 100)
    assert bound.epsilon == pytest.approx(math.log((1 - hi - 1e-5) / hi), rel=1e-9)


def test_the_roc_runs_from_one_to_zero():
    fpr, tpr = roc_curve(np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    assert fpr[0] == 1.0 and tpr[0] == 1.0 and fpr[-1] == 0.0 and tpr[-1] == 0.0
    assert np.all(np.diff(fpr) <= 0) and np.all(np.diff(tpr) <= 0)


def test_too_few_runs_are_refused():
    with pytest.raises(DpfedInputError, match="at least 4 runs"):
        epsilon_lower_bound(np.zeros(3), np.ones(3), 1e-5)


def test_one_run_p_value_is_the_binomial_tail_without_delta():
    q = 1 / (1 + math.exp(-1.0))
    assert one_run_p_value(1000, 100, 70, 1.0, 0.0) == pytest.approx(stats.binom.sf(69, 100, q))
    # delta only adds to it, by at most 2 m delta
    with_delta = one_run_p_value(1000, 100, 70, 1.0, 1e-5)
    assert 0 < with_delta - one_run_p_value(1000, 100, 70, 1.0, 0.0) <= 2 * 1000 * 1e-5


def test_one_run_bound_inverts_the_p_value():
    """All 100 guesses right under pure DP: q^100 = 0.05 exactly at the bound."""
    eps = one_run_epsilon_lower_bound(1000, 100, 100, 0.0)
    q = 1 / (1 + math.exp(-eps))
    assert q**100 == pytest.approx(0.05, rel=1e-4)
    assert one_run_epsilon_lower_bound(1000, 100, 50, 1e-5) == 0.0


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_one_run_bound_stays_below_randomized_responses_epsilon(epsilon):
    """Canaries guessed right with probability e^eps / (1 + e^eps) (randomized response, which
    is exactly eps-DP): the bound stays below eps in (nearly) all of 40 audits."""
    rng = np.random.default_rng(int(epsilon * 10))
    q = 1 / (1 + math.exp(-epsilon))
    bounds = [
        one_run_epsilon_lower_bound(1000, 200, int(rng.binomial(200, q)), 0.0) for _ in range(40)
    ]
    assert sum(b > epsilon for b in bounds) <= 4
