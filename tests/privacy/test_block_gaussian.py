"""Tests for dpfed.privacy.block_gaussian: the fast exact discrete Gaussian sampler."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpfed.privacy.block_gaussian as bg
from dpfed._validation import DpfedInputError
from dpfed.privacy.block_gaussian import BlockEnvelope, block_gaussian, block_gaussian_rows
from dpfed.privacy.discrete import discrete_gaussian_pmf, discrete_gaussian_variance

from .test_discrete import _IntegersOnly

N = 10**6
SEED = 20261126


def _pmf_chi2(x: np.ndarray, sigma2: int, bins: int = 60) -> float:
    """Chi-square of the samples against the exact pmf, in ``bins`` bins of about equal
    probability over the integers (bin edges are integers; the pmf summed exactly, or for
    s >= 2^12 the normal integral with a continuity correction, exact to ~1e-8 there)."""
    sigma = math.sqrt(sigma2)
    if sigma2 >= 2**24:
        edges = np.floor(stats.norm.ppf(np.linspace(0, 1, bins + 1)[1:-1]) * sigma)
        cdf = stats.norm.cdf((edges + 0.5) / sigma)
        probs = np.diff(np.concatenate(([0.0], cdf, [1.0])))
        counts = np.bincount(np.searchsorted(edges, x, side="left"), minlength=bins)
        return float(stats.chisquare(counts, probs * x.size).pvalue)
    reach = int(9 * sigma)
    support = np.arange(-reach, reach + 1)
    pmf = discrete_gaussian_pmf(support, sigma2)
    cdf = np.cumsum(pmf)
    # bin j holds the integers whose cdf falls in [j/bins, (j+1)/bins)
    cuts = np.searchsorted(cdf, np.linspace(0, 1, bins + 1)[1:-1])
    edges = support[cuts]  # right ends (inclusive) of the bins
    probs = np.diff(np.concatenate(([0.0], cdf[cuts], [1.0])))
    counts = np.bincount(np.searchsorted(edges, x, side="left"), minlength=bins)
    return float(stats.chisquare(counts, probs * x.size).pvalue)


@pytest.mark.parametrize("sigma2", [2**16, 2**16 + 12345, 2**30 + 1, 2**48, 2**62, 2**80])
def test_law_is_the_discrete_gaussian(sigma2):
    x = block_gaussian(sigma2, N, np.random.default_rng(SEED))
    assert x.dtype == np.int64 and x.shape == (N,)
    assert _pmf_chi2(x, sigma2) > 1e-4
    var = discrete_gaussian_variance(sigma2)
    assert x.var() == pytest.approx(var, rel=0.01)
    assert abs(x.mean()) < 5 * math.sqrt(var / N)


def test_fine_bins_near_zero_and_parity():
    # bins of single integers at s^2 = 2^16 (s = 256): the blocks' boundaries and the
    # asymmetric negative blocks (which start at -1) must not show in the counts
    sigma2 = 2**16
    x = block_gaussian(sigma2, N, np.random.default_rng(SEED + 1))
    support = np.arange(-40, 41)
    inside = x[(x >= -40) & (x <= 40)]
    counts = np.bincount(inside + 40, minlength=support.size)
    probs = discrete_gaussian_pmf(support, sigma2)
    assert stats.chisquare(counts, probs / probs.sum() * inside.size).pvalue > 1e-4
    # block edges are multiples of w = 16: residues mod 16 are uniform
    residues = np.bincount(x % 16, minlength=16)
    assert stats.chisquare(residues).pvalue > 1e-4
    # symmetric
    assert stats.binomtest(int(np.sum(x > 0)), int(np.sum(x != 0))).pvalue > 1e-4


def test_tail_and_exact_decisions_have_the_same_law():
    # tail from 1 sigma (a third of the candidates) and a filter margin of 2^-5 (about 1 in 8
    # decisions made exactly): the same law
    sigma2 = 2**20
    env = BlockEnvelope.build(sigma2, Fraction(1), 5)
    x = block_gaussian(sigma2, 40_000, np.random.default_rng(SEED + 2), envelope=env)
    assert _pmf_chi2(x, sigma2, bins=30) > 1e-4
    assert np.mean(np.abs(x) >= env.tail_start) == pytest.approx(0.32, abs=0.02)
    assert x.var() == pytest.approx(sigma2, rel=0.03)


def test_exact_decision_path_agrees_with_the_filter(monkeypatch):
    # every candidate decided exactly, one word at a time: the same accept/reject as the filter
    sigma2 = 2**24
    env = BlockEnvelope.build(sigma2)
    rng = np.random.default_rng(SEED + 3)
    first = rng.integers(0, 2**64, size=(1, 3000), dtype=np.uint64)
    second = rng.integers(0, 2**64, size=(1, 3000), dtype=np.uint64)
    x_fast, acc_fast = bg._decide_rows(env, first, second, [rng])
    wide = BlockEnvelope.build(sigma2, margin_bits=2)
    x_slow, acc_slow = bg._decide_rows(wide, first, second, [np.random.default_rng(0)])
    # a margin of 1/4 sends many decisions to the exact path; the tail (none here) aside
    assert np.array_equal(x_fast, x_slow)
    assert np.array_equal(acc_fast, acc_slow)


def test_filter_error_is_far_below_its_margin():
    # the float acceptance probability against the exact bounds, over random candidates
    sigma2 = 2**48 + 977
    env = BlockEnvelope.build(sigma2)
    rng = np.random.default_rng(SEED + 4)
    index = rng.integers(0, 1024, size=400)
    index = index[env.piece[index] < env.tail_slot]
    t = rng.integers(0, env.width, size=index.size)
    x = env.piece_base[index] + env.piece_direction[index] * t
    alpha = np.exp(env.piece_log_ratio[index] - x * x * (0.5 / sigma2))
    worst = 0.0
    for a, j, v in zip(alpha, index, x, strict=True):
        low, high = env.block_acceptance_bounds(int(env.piece[j]), int(v), 2)
        assert high - low < Fraction(1, 2**100)
        worst = max(worst, abs(float((Fraction(float(a)) - low) / low)))
        assert low <= 1
    assert worst < 2.0**-40


def test_envelope_dominates_and_alias_is_exact():
    env = BlockEnvelope.build(2**40 + 3)
    w, s2, c = env.width, env.sigma2, env.scale
    assert sum(env.weights) == 2**64
    # every block's weight is at least c w f(nearest point); the tail's at least c W_tail
    for k in range(env.blocks):
        for slot, nearest in ((k, k * w), (env.blocks + k, k * w + 1)):
            bound = bg._exp_neg_bounds(Fraction(nearest * nearest, 2 * s2), 3)[1] if nearest else 1
            assert env.weights[slot] >= c * w * bound
    tail_high = bg._tail_mass_bounds(env.tail_start, s2, 3)[1]
    assert env.weights[env.tail_slot] >= c * tail_high
    # the alias table gives piece i exactly weight_i / 2^64
    full = 2**55
    mass = [0] * 512
    for j in range(512):
        thr = int(env.threshold[j])
        mass[j] += thr
        mass[int(env.piece[512 + j])] += full - thr
    assert mass[: len(env.weights)] == list(env.weights)
    assert all(m == 0 for m in mass[len(env.weights) :])
    assert 0.97 < env.acceptance_rate() < 0.99


def test_rows_are_each_generators_own():
    sigma2 = 2**48
    gens = [np.random.Generator(np.random.SFC64(i)) for i in range(5)]
    together = block_gaussian_rows(sigma2, gens, 777)
    alone = np.stack(
        [block_gaussian(sigma2, 777, np.random.Generator(np.random.SFC64(i))) for i in range(5)]
    )
    assert np.array_equal(together, alone)
    again = block_gaussian_rows(
        sigma2, [np.random.Generator(np.random.SFC64(i)) for i in range(5)], 777
    )
    assert np.array_equal(together, again)
    assert not np.array_equal(together[0], together[1])


def test_short_rows_draw_again(monkeypatch):
    # with a tenth of the candidates needed, every row refills from its own generator
    monkeypatch.setattr(bg, "_candidates", lambda dim: max(1, dim // 10))
    sigma2 = 2**30
    gens = [np.random.default_rng(i) for i in range(3)]
    rows = block_gaussian_rows(sigma2, gens, 500)
    assert rows.shape == (3, 500)
    alone = block_gaussian(sigma2, 500, np.random.default_rng(1))
    assert np.array_equal(rows[1], alone)
    assert rows.std() == pytest.approx(2**15, rel=0.1)


def test_only_integers_are_drawn():
    env = BlockEnvelope.build(2**20, Fraction(1), 5)
    x = block_gaussian(2**20, 2000, _IntegersOnly(np.random.PCG64(5)), envelope=env)
    assert x.dtype == np.int64


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sigma2": 2**16 - 1}, "sigma2"),
        ({"sigma2": 2**80 + 1}, "2\\^80"),
        ({"sigma2": 2**20, "tail_sigmas": Fraction(8)}, "tail_sigmas"),
        ({"sigma2": 2**20, "margin_bits": 41}, "margin_bits"),
        ({"sigma2": 2**20 + 0.5}, "sigma2"),
    ],
)
def test_bad_parameters_are_refused(kwargs, match):
    with pytest.raises(DpfedInputError, match=match):
        BlockEnvelope.build(**kwargs)


def test_bad_generators_and_envelopes_are_refused():
    with pytest.raises(DpfedInputError, match="Generator"):
        block_gaussian_rows(2**20, [np.random.RandomState(0)], 10)
    with pytest.raises(DpfedInputError, match="envelope is for"):
        block_gaussian(2**21, 10, np.random.default_rng(0), envelope=BlockEnvelope.build(2**20))
    assert block_gaussian_rows(2**20, [], 10).shape == (0, 10)


def test_raw_words_are_the_integers_words():
    # the fast path reads raw words only where they equal integers(0, 2**64, uint64)'s
    kinds = [np.random.SFC64, np.random.PCG64, np.random.PCG64DXSM, np.random.Philox]
    for kind in kinds:
        raw = bg._words(np.random.Generator(kind(9)), (2, 500))
        ref = np.random.Generator(kind(9)).integers(0, 2**64, size=(2, 500), dtype=np.uint64)
        assert np.array_equal(raw, ref), kind.__name__
    pytest.importorskip("randomgen")
    from dpfed.privacy.noise_source import secret_generator

    raw = bg._words(secret_generator(bytes(32)), (2, 500))
    ref = secret_generator(bytes(32)).integers(0, 2**64, size=(2, 500), dtype=np.uint64)
    assert np.array_equal(raw, ref)
    # a 32-bit bit generator goes through integers
    mt = bg._words(np.random.Generator(np.random.MT19937(9)), (2, 5))
    ref = np.random.Generator(np.random.MT19937(9)).integers(0, 2**64, size=(2, 5), dtype=np.uint64)
    assert np.array_equal(mt, ref)
