r"""Exact Bernoulli trials of probability :math:`e^{-\gamma}` from uniform integers only.

The building block of the exact discrete Laplace and discrete Gaussian samplers
(:mod:`dpfed.privacy.discrete`), after Canonne, Kamath and Steinke (2020), "The Discrete
Gaussian for Differential Privacy" (NeurIPS), Algorithm 1. Every random number is an integer
drawn by ``rng.integers`` from an injected ``numpy.random.Generator``; every decision is an
integer comparison. No floating-point number is computed on the way from the generator's words
to a sample, so the samples have exactly the law claimed, and a seeded generator reproduces
them bit for bit.

Two exact constructions:

* **fractional part** (:func:`bernoulli_exp_fraction`), CKS Algorithm 1 for
  :math:`\gamma = r/D \in [0, 1]`: with :math:`A_K \sim \mathrm{Bernoulli}(\gamma/K)`
  independent, :math:`K^\star = \min\{K \ge 1 : A_K = 0\}` is odd with probability
  :math:`\sum_k (-1)^k \gamma^k / k! = e^{-\gamma}`. :math:`A_K` is ``U < r`` for
  :math:`U` uniform on :math:`\{0, \dots, DK - 1\}`; when :math:`DK` would not fit the
  generator's 63-bit range, :math:`A_K = [U < r] \wedge [U' = 0]` with :math:`U` uniform on
  :math:`\{0..D-1\}` and :math:`U'` on :math:`\{0..K-1\}` (the same law:
  :math:`(r/D)(1/K)`). The loop runs over the entries still pending; after :math:`k` rounds a
  fraction at most :math:`\gamma^k/k!` is left.
* **integer part** (:func:`bernoulli_exp_integer`) for :math:`\gamma = k \in \mathbb{N}`: CKS
  draw :math:`k` trials of probability :math:`e^{-1}` and return 1 if all succeed, i.e. one
  trial of probability :math:`e^{-k}`. Here that trial is one comparison of a uniform
  :math:`U \in [0, 1)` with :math:`e^{-k}`: :math:`U` is drawn 64 bits at a time (``rng``
  words :math:`w_1, w_2, \dots`, :math:`U = \sum_i w_i 2^{-64 i}`), and :math:`e^{-k}`'s
  binary expansion is computed exactly with integers (:func:`exp_neg_digits`). The first word
  decides unless it equals the first 64 bits of :math:`e^{-k}` (probability :math:`2^{-64}`);
  then further words are drawn and compared until they differ (:class:`LazyUniform`).
  :math:`e^{-k}` is irrational (Lindemann), so the comparison ends with probability 1.
  Exact, and one word instead of up to :math:`k` trials of probability :math:`e^{-1}` (each
  about :math:`e - 1 \approx 1.7` uniform draws).

The same comparison samples :math:`V` with :math:`P(V \ge v) = e^{-v}` (the geometric count
of successive :math:`e^{-1}` trials in CKS Algorithm 2) from one word:
:func:`geometric_exp` returns :math:`V = \#\{v \ge 1 : U < e^{-v}\}`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dpfed._validation import DpfedInputError

__all__ = [
    "DRAW_LIMIT",
    "EXP_THRESHOLDS",
    "LazyUniform",
    "bernoulli_exp",
    "bernoulli_exp_fraction",
    "bernoulli_exp_integer",
    "exp_neg_digits",
    "geometric_exp",
    "uniform_below",
    "uniform_words",
]

_WORD_BITS = 64
_WORD = 1 << _WORD_BITS
_WORD_MASK = _WORD - 1

#: Largest exclusive bound passed to one ``rng.integers`` call for ``int64`` draws.
DRAW_LIMIT = 1 << 62

#: Largest :math:`v` whose threshold :math:`\lfloor e^{-v} 2^{64} \rfloor` is non-zero.
_LAST_NONZERO = 44


@lru_cache(maxsize=4096)
def exp_neg_digits(x: Fraction, words: int) -> int:
    r""":math:`\lfloor e^{-x} \, 2^{64 \cdot words} \rfloor` exactly, for rational :math:`x > 0`.

    :math:`e^{x}` is bracketed by its Taylor sum :math:`S_N = \sum_{n \le N} x^n/n!` and
    :math:`S_N + R`, :math:`R = 2 x^{N+1}/(N+1)!` (valid once :math:`N + 2 > 2x`), in exact
    rational arithmetic; :math:`N` doubles until :math:`2^{B}/(S_N + R)` and :math:`2^{B}/S_N`
    have the same integer part, which is then that of :math:`e^{-x} 2^{B}` (never an
    integer: :math:`e^{-x}` is irrational for rational :math:`x \ne 0`).

    Parameters
    ----------
    x : fractions.Fraction
        :math:`x > 0`.
    words : int
        Precision in 64-bit words, :math:`B = 64 \cdot words`, ``words >= 1``.

    Returns
    -------
    int
        The integer part of :math:`e^{-x} 2^{B}`; its last 64 bits are the ``words``-th word
        of :math:`e^{-x}`'s binary expansion.
    """
    if x <= 0 or words < 1:
        raise DpfedInputError(f"exp_neg_digits needs x > 0 and words >= 1. Found {x}, {words}.")
    scale = 1 << (_WORD_BITS * words)
    p, q = x.numerator, x.denominator
    terms = max(32, 4 * int(x) + 8)
    while True:
        # S_N = num/den by Horner's rule, in integers: S = 1 + (x/1)(1 + (x/2)(1 + ...))
        num, den = 1, 1
        for n in range(terms, 0, -1):
            step = q * n
            num, den = den * step + p * num, den * step
        # R = 2 x^(N+1)/(N+1)! (every later term is at most half the previous)
        rem_num = 2 * p ** (terms + 1)
        rem_den = q ** (terms + 1) * math.factorial(terms + 1)
        low = scale * den * rem_den // (num * rem_den + rem_num * den)
        high = scale * den // num
        if low == high:
            return high
        terms *= 2


def _exp_word(x: Fraction, level: int) -> int:
    """The ``level``-th 64-bit word (1-based) of the binary expansion of :math:`e^{-x}`."""
    return exp_neg_digits(x, level) & _WORD_MASK


def _thresholds() -> np.ndarray:
    table = np.zeros(_LAST_NONZERO + 2, dtype=np.uint64)
    table[0] = np.uint64(_WORD_MASK)  # e^0 = 1: not a word; index 0 is never compared
    for v in range(1, _LAST_NONZERO + 2):
        table[v] = np.uint64(exp_neg_digits(Fraction(v), 1))
    if int(table[_LAST_NONZERO]) == 0 or int(table[_LAST_NONZERO + 1]) != 0:
        raise AssertionError("threshold table of e^-v is not as expected")  # pragma: no cover
    return table


#: :math:`T_v = \lfloor e^{-v} 2^{64} \rfloor` for :math:`v = 0..45` (:math:`T_{45} = 0`;
#: index 0 is a placeholder). A word :math:`w < T_v` means :math:`U < e^{-v}`, a word
#: :math:`w > T_v` means :math:`U > e^{-v}`, and :math:`w = T_v` needs more words.
EXP_THRESHOLDS = _thresholds()


def uniform_words(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniform 64-bit words, ``rng.integers(0, 2**64, dtype=uint64)``."""
    return rng.integers(0, _WORD, size=n, dtype=np.uint64)


def uniform_below(rng: np.random.Generator, high: int, n: int) -> np.ndarray:
    r"""``n`` integers uniform on :math:`\{0, \dots, high - 1\}` (int64), ``high <= 2^62``.

    A power of two :math:`2^m` takes the top :math:`m` bits of a full 64-bit word (numpy's
    fastest draw); anything else is ``rng.integers(0, high)``.
    """
    if high & (high - 1) == 0:
        bits = high.bit_length() - 1
        if bits == 0:
            return np.zeros(n, dtype=np.int64)
        out: np.ndarray = (uniform_words(rng, n) >> np.uint64(_WORD_BITS - bits)).view(np.int64)
        return out
    return rng.integers(0, high, size=n)


class LazyUniform:
    r"""A uniform :math:`U \in [0, 1)` of which only the leading 64-bit words are drawn.

    :math:`U = \sum_{i \ge 1} w_i 2^{-64 i}`: ``words`` holds :math:`w_1, w_2, \dots` drawn so
    far; :meth:`below_exp` compares :math:`U` with :math:`e^{-x}` word by word, drawing the next
    word from ``rng`` only while all words so far equal those of :math:`e^{-x}`.

    Parameters
    ----------
    first : int
        :math:`w_1`, already drawn.
    rng : numpy.random.Generator
        Source of further words.
    """

    def __init__(self, first: int, rng: np.random.Generator) -> None:
        self.words = [int(first)]
        self._rng = rng

    def below_exp(self, x: Fraction) -> bool:
        r"""Whether :math:`U < e^{-x}`, for rational :math:`x > 0`."""
        level = 0
        while True:
            if level == len(self.words):
                self.words.append(int(uniform_words(self._rng, 1)[0]))
            word = self.words[level]
            digit = _exp_word(x, level + 1)
            if word != digit:
                return word < digit
            level += 1


def bernoulli_exp_integer(k: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    r"""One trial of probability :math:`e^{-k_i}` per entry, for integers :math:`k_i \ge 0`.

    Parameters
    ----------
    k : numpy.ndarray of int64, shape (n,)
        :math:`k_i \ge 0`.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
        ``True`` with probability :math:`e^{-k_i}` (always, without a draw, for
        :math:`k_i = 0`); one word per nonzero entry, more on a tie (probability :math:`2^{-64}`).
    """
    out: np.ndarray = k == 0
    todo = np.flatnonzero(~out)
    if not todo.size:
        return out
    kk = k[todo]
    words = uniform_words(rng, todo.size)
    thresholds = EXP_THRESHOLDS[np.minimum(kk, _LAST_NONZERO + 1)]
    out[todo] = words < thresholds
    for i in np.flatnonzero(words == thresholds).tolist():
        out[todo[i]] = LazyUniform(int(words[i]), rng).below_exp(Fraction(int(kk[i])))
    return out


def bernoulli_exp_fraction(r: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    r"""One trial of probability :math:`e^{-r_i/D}` per entry, :math:`0 \le r_i \le D`.

    CKS Algorithm 1 (module docstring), vectorised over the pending entries.

    Parameters
    ----------
    r : numpy.ndarray of int64, shape (n,)
        Numerators, :math:`0 \le r_i \le D`.
    den : int
        :math:`D`, :math:`1 \le D \le` :data:`DRAW_LIMIT`.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
    """
    if not 1 <= den <= DRAW_LIMIT:
        raise DpfedInputError(f"den must be in [1, 2^62]. Found {den}.")
    # K = 1 over every entry, without an index array
    success = uniform_below(rng, den, r.size) < r
    out: np.ndarray = ~success
    pending = np.flatnonzero(success)
    num = r[pending]
    k = 2
    while pending.size:
        if den * k <= DRAW_LIMIT:
            success = uniform_below(rng, den * k, pending.size) < num
        else:
            success = rng.integers(0, den, size=pending.size) < num
            success &= rng.integers(0, k, size=pending.size) == 0
        out[pending[~success]] = k % 2 == 1
        pending = pending[success]
        num = num[success]
        k += 1
    return out


def geometric_exp(n: int, rng: np.random.Generator) -> np.ndarray:
    r"""``n`` draws of :math:`V \ge 0` with :math:`P(V \ge v) = e^{-v}`.

    :math:`V = \#\{v \ge 1 : U < e^{-v}\}` for one uniform :math:`U` per draw: the thresholds
    decrease, so the entries with :math:`w < T_v` are those still counting at step :math:`v`.
    A word equal to :math:`T_v` (or 0, which ties with every :math:`v \ge 45`) is resolved with
    more words (:class:`LazyUniform`).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        Geometric with success probability :math:`1 - e^{-1}`; mean :math:`1/(e - 1)`.
    """
    words = uniform_words(rng, n)
    out = np.zeros(n, dtype=np.int64)
    tied = bool(np.any(words == EXP_THRESHOLDS[1]))
    alive = np.flatnonzero(words < EXP_THRESHOLDS[1])
    alive_words = words[alive]
    v = 1
    while alive.size:
        out[alive] = v
        v += 1
        tied = tied or bool(np.any(alive_words == EXP_THRESHOLDS[v]))
        below = alive_words < EXP_THRESHOLDS[v]
        alive = alive[below]
        alive_words = alive_words[below]
    # v stops at 45 at the latest (threshold 0). An entry that stopped at count c had
    # w >= T_(c+1); it is a tie when w == T_(c+1) (for c = 44: w == 0, below every e^-v).
    if tied:
        ties = np.flatnonzero(words == EXP_THRESHOLDS[out + 1])
        for i in ties.tolist():
            uniform = LazyUniform(int(words[i]), rng)
            count = int(out[i])
            while uniform.below_exp(Fraction(count + 1)):
                count += 1
            out[i] = count
    return out


def bernoulli_exp(gamma: Fraction, size: int, rng: np.random.Generator) -> np.ndarray:
    r"""``size`` independent trials of probability :math:`e^{-\gamma}`, rational
    :math:`\gamma \ge 0`.

    :math:`e^{-\gamma} = e^{-\lfloor\gamma\rfloor} e^{-(\gamma - \lfloor\gamma\rfloor)}`: the
    integer part by :func:`bernoulli_exp_integer`, then the fractional part by
    :func:`bernoulli_exp_fraction` for the entries that passed.

    Parameters
    ----------
    gamma : fractions.Fraction
        :math:`0 \le \gamma \le 2^{62}` with denominator at most :data:`DRAW_LIMIT`.
    size : int
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of bool, shape (size,)
    """
    g = Fraction(gamma)
    if g < 0 or g.denominator > DRAW_LIMIT or g > DRAW_LIMIT:
        raise DpfedInputError(
            f"gamma must be a rational in [0, 2^62] with denominator at most 2^62. Found {gamma!r}."
        )
    whole, frac = divmod(g.numerator, g.denominator)
    out = bernoulli_exp_integer(np.full(size, whole, dtype=np.int64), rng)
    passed = np.flatnonzero(out)
    if frac:
        out[passed] = bernoulli_exp_fraction(
            np.full(passed.size, frac, dtype=np.int64), g.denominator, rng
        )
    return out
