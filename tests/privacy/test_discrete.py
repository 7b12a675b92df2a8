"""Tests for dpfed.privacy.discrete and dpfed.privacy.bernoulli_exp: exact integer samplers."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import textwrap
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpfed.privacy.bernoulli_exp as bexp
import dpfed.privacy.discrete as disc
from dpfed._validation import DpfedInputError
from dpfed.privacy.bernoulli_exp import (
    EXP_THRESHOLDS,
    LazyUniform,
    bernoulli_exp,
    bernoulli_exp_integer,
    exp_neg_digits,
    geometric_exp,
)
from dpfed.privacy.discrete import (
    DiscreteGaussianParameters,
    as_rational,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace,
    discrete_laplace_pmf,
)

N = 10**6
SEED = 20260601


def _chi2_pvalue(samples: np.ndarray, support: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness of fit: bins of the support with expected count >= 20, the rest of
    the line pooled into the two tails."""
    counts = np.zeros(support.size + 2)
    inside = (samples >= support[0]) & (samples <= support[-1])
    counts[1:-1] = np.bincount(samples[inside] - support[0], minlength=support.size)
    counts[0] = np.sum(samples < support[0])
    counts[-1] = np.sum(samples > support[-1])
    tail = (1.0 - probs.sum()) / 2.0
    expected = np.concatenate(([tail], probs, [tail])) * samples.size
    # merge neighbouring bins until each expects at least 20
    obs_bins, exp_bins = [], []
    o = e = 0.0
    for oc, ec in zip(counts, expected, strict=True):
        o += oc
        e += ec
        if e >= 20:
            obs_bins.append(o)
            exp_bins.append(e)
            o = e = 0.0
    obs_bins[-1] += o
    exp_bins[-1] += e
    obs, exp = np.array(obs_bins), np.array(exp_bins)
    exp *= obs.sum() / exp.sum()
    return float(stats.chisquare(obs, exp).pvalue)


# --------------------------------------------------------------------------------------------
# exact constants and trials of probability e^-gamma
# --------------------------------------------------------------------------------------------


def test_exp_digits_are_exact():
    # floor(e^-1 2^64) and the next word, against a 300-digit decimal computation
    from decimal import Decimal, getcontext

    getcontext().prec = 300
    value = (-Decimal(1)).exp()
    assert exp_neg_digits(Fraction(1), 1) == int(value * 2**64)
    assert exp_neg_digits(Fraction(1), 2) == int(value * 2**128)
    value = (-Decimal(7) / Decimal(3)).exp()
    assert exp_neg_digits(Fraction(7, 3), 3) == int(value * 2**192)
    assert [int(t) for t in EXP_THRESHOLDS[1:4]] == [
        int((-Decimal(v)).exp() * 2**64) for v in (1, 2, 3)
    ]
    assert int(EXP_THRESHOLDS[44]) == 1 and int(EXP_THRESHOLDS[45]) == 0


def test_lazy_uniform_compares_word_by_word():
    rng = np.random.default_rng(0)
    x = Fraction(1)
    first, second = exp_neg_digits(x, 1), exp_neg_digits(x, 2) & (2**64 - 1)
    below = LazyUniform(first, rng)
    below.words.append(second - 1)  # U = e^-1 truncated, minus one unit in the 128th bit
    assert below.below_exp(x)
    above = LazyUniform(first, rng)
    above.words.append(second + 1)
    assert not above.below_exp(x)
    drawn = LazyUniform(first, rng)  # the tie draws the next word from rng
    assert drawn.below_exp(x) == (drawn.words[1] < second)
    assert len(drawn.words) == 2
    assert LazyUniform(first - 1, rng).below_exp(x)
    assert not LazyUniform(first + 1, rng).below_exp(x)


@pytest.mark.parametrize(
    "gamma",
    [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 2), Fraction(10, 3), Fraction(12)],
)
def test_bernoulli_exp_mean(gamma):
    rng = np.random.default_rng(SEED)
    n = 200_000
    p = math.exp(-gamma)
    mean = bernoulli_exp(gamma, n, rng).mean()
    assert abs(mean - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_geometric_exp_pmf():
    rng = np.random.default_rng(SEED)
    v = geometric_exp(N, rng)
    support = np.arange(0, 12)
    probs = np.exp(-support) * (1 - math.exp(-1))
    assert v.dtype == np.int64
    assert _chi2_pvalue(v, support, probs) > 1e-4


class _Words:
    """Stands in for uniform_words: the given words first, then ``rest`` one at a time."""

    def __init__(self, first, rest):
        self.first = np.array(first, dtype=np.uint64)
        self.rest = list(rest)
        self.calls = 0

    def __call__(self, rng, n):
        self.calls += 1
        if self.calls == 1:
            assert n == self.first.size
            return self.first
        return np.array([self.rest.pop(0) for _ in range(n)], dtype=np.uint64)


def test_ties_are_resolved_with_more_words(monkeypatch):
    t3 = int(EXP_THRESHOLDS[3])
    d3 = exp_neg_digits(Fraction(3), 2) & (2**64 - 1)
    # geometric: a first word equal to T_3 is below e^-3 iff the next word is below e^-3's;
    # a first word 0 is below every e^-v with v <= 44 and tied with the rest
    d45 = exp_neg_digits(Fraction(45), 2) & (2**64 - 1)
    words = _Words([t3, t3, 0, 5], [d3 - 1, d3 + 1, d45 + 1])
    monkeypatch.setattr(bexp, "uniform_words", words)
    out = geometric_exp(4, np.random.default_rng(0))
    assert out.tolist() == [3, 2, 44, sum(5 < int(t) for t in EXP_THRESHOLDS[1:])]
    assert not words.rest
    # integer part: k = 3 with a tied first word; k = 50 (threshold 0) with a zero word
    d50 = exp_neg_digits(Fraction(50), 2) & (2**64 - 1)
    words = _Words([t3, t3, 0], [d3 - 1, d3 + 1, d50 - 1])  # k = 0 draws nothing
    monkeypatch.setattr(bexp, "uniform_words", words)
    out = bernoulli_exp_integer(np.array([3, 3, 50, 0], dtype=np.int64), np.random.default_rng(0))
    assert out.tolist() == [True, False, True, True]
    assert not words.rest


# --------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------


def test_as_rational_is_exact_or_refuses():
    assert as_rational("s", 3) == 3
    assert as_rational("s", Fraction(9, 4)) == Fraction(9, 4)
    assert as_rational("s", 2.25) == Fraction(9, 4)
    assert as_rational("s", "1/10") == Fraction(1, 10)
    assert as_rational("s", 1e6) == 10**6
    with pytest.raises(DpfedInputError, match=r"0\.1.*not exactly.*Fraction\('0\.1'\)"):
        as_rational("sigma2", 0.1)
    for bad in (0, -1, float("nan"), float("inf"), True, "x", None, [1]):
        with pytest.raises(DpfedInputError, match="s"):
            as_rational("s", bad)


def test_out_of_range_parameters_are_refused():
    with pytest.raises(DpfedInputError, match="64-bit"):
        discrete_gaussian(2**63, 1, np.random.default_rng(0))
    with pytest.raises(DpfedInputError, match="64-bit"):
        discrete_gaussian(Fraction(3, 2**61), 1, np.random.default_rng(0))
    with pytest.raises(DpfedInputError, match=r"2\^56"):
        discrete_laplace(2**57, 1, np.random.default_rng(0))
    with pytest.raises(DpfedInputError, match=r"numpy\.random\.Generator"):
        discrete_gaussian(1, 3, 0)
    with pytest.raises(DpfedInputError, match="size"):
        discrete_gaussian(1, -1, np.random.default_rng(0))


# --------------------------------------------------------------------------------------------
# laws
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [Fraction(1, 3), 1, Fraction(7, 2), 1000])
def test_discrete_laplace_chi_square_mean_variance(scale):
    rng = np.random.default_rng(SEED)
    x = discrete_laplace(scale, N, rng)
    t = float(scale)
    top = int(12 * t) + 3
    support = np.arange(-top, top + 1)
    assert x.dtype == np.int64 and x.shape == (N,)
    assert _chi2_pvalue(x, support, discrete_laplace_pmf(support, scale)) > 1e-4
    r = math.exp(-1 / t)
    var = 2 * r / (1 - r) ** 2
    assert abs(x.mean()) < 5 * math.sqrt(var / N)
    assert x.var() == pytest.approx(var, rel=0.02)


@pytest.mark.parametrize(
    "sigma2", [Fraction(1, 4), Fraction(15, 16), 1, Fraction(9, 4), 10, Fraction(12345, 1024), 1000]
)
def test_discrete_gaussian_chi_square_exact_pmf(sigma2):
    rng = np.random.default_rng(SEED)
    x = discrete_gaussian(sigma2, N, rng)
    top = int(8 * math.sqrt(float(sigma2))) + 3
    support = np.arange(-top, top + 1)
    assert x.dtype == np.int64
    assert _chi2_pvalue(x, support, discrete_gaussian_pmf(support, sigma2)) > 1e-4
    var = discrete_gaussian_variance(sigma2)
    assert abs(x.mean()) < 5 * math.sqrt(var / N)
    assert x.var() == pytest.approx(var, rel=0.01)


@pytest.mark.parametrize("sigma2", [2**40 + 12345, Fraction(2**41 + 7, 3), 2**48])
def test_discrete_gaussian_large_sigma_quantiles(sigma2):
    # At sigma >= 2^20 the pmf summed over an interval is the normal integral with a
    # continuity correction to ~1e-13: 40 equiprobable bins of the continuous normal.
    rng = np.random.default_rng(SEED)
    x = discrete_gaussian(sigma2, N, rng)
    sigma = math.sqrt(float(sigma2))
    edges = np.floor(stats.norm.ppf(np.linspace(0, 1, 41)[1:-1]) * sigma)
    cdf = stats.norm.cdf((edges + 0.5) / sigma)
    probs = np.diff(np.concatenate(([0.0], cdf, [1.0])))
    counts = np.bincount(np.searchsorted(edges, x, side="left"), minlength=40)
    assert stats.chisquare(counts, probs * N).pvalue > 1e-4
    assert x.var() / float(sigma2) == pytest.approx(1.0, rel=0.01)
    assert abs(x.mean()) < 5 * sigma / math.sqrt(N)


def test_discrete_gaussian_python_integer_path():
    # Force nearly every proposal through the unbounded-integer acceptance: same law.
    params = DiscreteGaussianParameters.from_sigma2(30)
    forced = dataclasses.replace(params, y_max=1)
    rng = np.random.default_rng(SEED)
    x = np.concatenate([disc._gaussian_candidates(forced, 2000, rng) for _ in range(10)])
    support = np.arange(-25, 26)
    assert _chi2_pvalue(x, support, discrete_gaussian_pmf(support, 30)) > 1e-4


# --------------------------------------------------------------------------------------------
# reproducibility and integer-only sampling
# --------------------------------------------------------------------------------------------


def test_seeded_output_is_bit_identical():
    a = discrete_gaussian(Fraction(2**41 + 7, 3), (300, 7), np.random.default_rng(11))
    b = discrete_gaussian(Fraction(2**41 + 7, 3), (300, 7), np.random.default_rng(11))
    c = discrete_gaussian(Fraction(2**41 + 7, 3), (300, 7), np.random.default_rng(12))
    assert a.shape == (300, 7) and a.dtype == np.int64
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    # a digest pinned: the same seed gives the same samples on any machine and numpy 2.x
    d = discrete_laplace(5, 1000, np.random.default_rng(3))
    assert np.array_equal(d, discrete_laplace(5, 1000, np.random.default_rng(3)))


def test_secret_generator_drives_the_sampler():
    pytest.importorskip("randomgen")
    from dpfed.privacy.noise_source import secret_generator

    secret = bytes(range(32))
    a = discrete_gaussian(10**6, 100, secret_generator(secret))
    b = discrete_gaussian(10**6, 100, secret_generator(secret))
    assert np.array_equal(a, b)


class _IntegersOnly(np.random.Generator):
    """A generator that refuses every draw but ``integers``."""

    def __getattribute__(self, name):
        if not name.startswith("_") and name not in ("integers", "bit_generator"):
            raise AssertionError(f"the sampler called rng.{name}")
        return super().__getattribute__(name)


def test_only_integers_are_drawn():
    rng = _IntegersOnly(np.random.PCG64(5))
    assert discrete_gaussian(Fraction(9, 4), 1000, rng).dtype == np.int64
    assert discrete_gaussian(2**40, 1000, rng).dtype == np.int64
    assert discrete_laplace(Fraction(7, 2), 1000, rng).dtype == np.int64


_SAMPLING_PATH = {
    bexp: (
        "uniform_words",
        "uniform_below",
        "bernoulli_exp_integer",
        "bernoulli_exp_fraction",
        "geometric_exp",
        "bernoulli_exp",
        "LazyUniform.below_exp",
    ),
    disc: (
        "_laplace_candidates",
        "_fill",
        "_gaussian_candidates",
        "_accept_exact",
        "discrete_gaussian",
        "discrete_laplace",
    ),
}


@pytest.mark.parametrize("module", list(_SAMPLING_PATH), ids=lambda m: m.__name__)
def test_no_float_in_the_sampling_path(module):
    """No float literal, float(), float dtype or transcendental function in the functions that
    turn the generator's integers into samples."""
    forbidden = {
        "float",
        "float64",
        "float32",
        "floating",
        "exp",
        "log",
        "sqrt",
        "expm1",
        "log1p",
        "random",
        "normal",
        "standard_normal",
        "true_divide",
        "divide",
    }
    for name in _SAMPLING_PATH[module]:
        target = module
        for part in name.split("."):
            target = getattr(target, part)
        tree = ast.parse(textwrap.dedent(inspect.getsource(target)))
        statements = [
            s
            for s in tree.body[0].body
            if not (  # the body, without the docstring
                isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
            )
        ]
        for node in (n for s in statements for n in ast.walk(s)):
            assert not (isinstance(node, ast.Constant) and isinstance(node.value, float)), name
            assert not isinstance(node, ast.Div), f"{name} uses true division"
            if isinstance(node, ast.Name | ast.Attribute):
                ident = node.id if isinstance(node, ast.Name) else node.attr
                assert ident not in forbidden, f"{name} uses {ident}"
