r"""A fast exact sampler of the discrete Gaussian :math:`\mathcal N_{\mathbb Z}(0, s^2)` for
large integer :math:`s^2`: rejection from a piecewise-uniform envelope.

CKS's sampler (:func:`dpfed.privacy.discrete.discrete_gaussian`) needs about 11 random integers
and two rejection stages per sample: about 12 times ``rng.normal``. The secure sum draws
:math:`10^7` such samples per run (one vector per client), and at that price its exact noise
would cost most of the run. This sampler draws **two 64-bit words per candidate** and accepts
about 97.5 % of them.

**The envelope.** With :math:`f(x) = e^{-x^2/(2 s^2)}`, a block width :math:`w = 2^b \le s/16`
and :math:`K = \lceil \tau s / w \rceil` blocks on each side (:math:`\tau = 6.5` by default),
the integers are cut into

* positive blocks :math:`B_k^+ = \{k w + t\}`, negative blocks :math:`B_k^- = \{-(k w + 1 + t)\}`,
  :math:`t = 0..w-1`, :math:`k = 0..K-1`, whose value of :math:`f` is largest at
  :math:`m_k = k w` (resp. :math:`k w + 1`);
* the tail :math:`|x| \ge L = K w` (the negative side from :math:`L + 1`), under the geometric
  envelope :math:`f(L) r^{|x| - L}`, :math:`r = e^{-L/s^2}` (:math:`x^2 \ge L^2 + 2L(|x| - L)`).

Each of these :math:`2K + 1` pieces gets an integer weight :math:`\omega \ge c\,W`, with
:math:`W` its envelope mass (:math:`w f(m_k)` for a block, :math:`f(L)(1 + r)/(1 - r)` for the
tail) and one integer :math:`c` for all; the weights are upper bounds computed exactly
(:func:`dpfed.privacy.bernoulli_exp.exp_neg_digits`) and sum to exactly :math:`2^{64}` (the slack
goes to the central block, which only lowers its acceptance). A candidate is

1. a piece, by Walker's alias method with integer thresholds: 9 bits of the first word pick
   one of 512 slots, the other 55 bits are compared with the slot's threshold (exact:
   :math:`P(\text{piece}) = \omega / 2^{64}`);
2. a point of the piece: for a block, :math:`t` uniform from the low :math:`b` bits of the
   second word; for the tail, :math:`y \sim \mathrm{Lap}_{\mathbb Z}(s^2/L)` (exact, CKS) and
   :math:`x = \pm(L + |y|)` with the sign of :math:`y`;
3. accepted with probability :math:`\alpha(x) = c\,w f(x)/\omega_k \le 1` (block) or
   :math:`\alpha(x) = (c W_{tail}/\omega_{tail})\, e^{-(|x| - L)^2/(2 s^2)}` (tail).

Then :math:`P(\text{candidate} = x \text{ and accepted}) = c f(x) / 2^{64}` for every integer
:math:`x`: the accepted candidates are i.i.d. :math:`\mathcal N_{\mathbb Z}(0, s^2)`, exactly.

**The acceptance test, exactly.** :math:`\alpha(x)` is irrational, and the test is
:math:`U < \alpha(x)` for a uniform :math:`U \in [0, 1)` whose leading bits are the second
word's high :math:`64 - b` bits. The comparison is *filtered* in floating point: the float
:math:`\hat\alpha = \exp(\ln(c w/\omega_k) - x^2/(2 s^2))` is within :math:`10^{-13}` of
:math:`\alpha` relatively (the exponent is at most about 25 with a rounding error of a few
units in :math:`2^{-52}`; ``exp`` is accurate to a few ulp), and the filter decides only
outside a margin :math:`\mu = 2^{-32}`, thirty thousand times that error: the candidate is
accepted when :math:`U`'s whole interval lies below :math:`\hat\alpha (1 - \mu)`, rejected when
it lies above :math:`\hat\alpha (1 + \mu)`. Otherwise (probability about :math:`2^{-31}`), and
for every tail candidate, the comparison is made exactly: :math:`\alpha(x)` is bracketed by
rational bounds from the exact binary expansion of :math:`e^{-\gamma}` (rational
:math:`\gamma`), and :math:`U` is extended by further 64-bit words until its interval lies on
one side (:func:`_uniform_below`). So the float is only a shortcut for a decision that exact
arithmetic would make the same way; the sample's law does not depend on floating point
(``tests/privacy/test_block_gaussian.py`` checks the filter's error against the exact
expansion, and the law with a margin so wide that most decisions are exact).

**Randomness.** Uniform 64-bit words only, from the caller's generator (its bit generator's
raw words where those are exactly ``rng.integers(0, 2**64, dtype=uint64)``'s, which is faster,
else ``rng.integers``): a seed reproduces every sample bit for bit, and
:func:`block_gaussian_rows` draws row ``i``'s words from generator ``i`` alone, so a client's
noise is the same whether it is drawn alone or with others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache, partial

import numpy as np

from dpfed._validation import DpfedInputError, check_int
from dpfed.privacy.bernoulli_exp import exp_neg_digits, uniform_words
from dpfed.privacy.discrete import discrete_laplace

__all__ = [
    "MAX_SIGMA2",
    "MIN_SIGMA2",
    "BlockEnvelope",
    "block_gaussian",
    "block_gaussian_rows",
]

#: Smallest :math:`s^2` served (:math:`s = 2^8`, blocks of 16 integers); below it use
#: :func:`dpfed.privacy.discrete.discrete_gaussian`.
MIN_SIGMA2 = 1 << 16
#: Largest :math:`s^2` served (:math:`s \le 2^{40}`: candidates stay exact in float64, and the
#: second word keeps at least 28 bits of the uniform for the filter).
MAX_SIGMA2 = 1 << 80

_SLOT_BITS = 9
_SLOTS = 1 << _SLOT_BITS
_THRESHOLD_BITS = 64 - _SLOT_BITS
_THRESHOLD_MASK = np.uint64((1 << _THRESHOLD_BITS) - 1)
_TOTAL = 1 << 64
#: Bits of the second word read as floats by the filter (exact in a float64 mantissa).
_FLOAT_BITS = 52
_DEFAULT_MARGIN_BITS = 32
_DEFAULT_TAIL_SIGMAS = Fraction(13, 2)


@dataclass(frozen=True)
class BlockEnvelope:
    r"""The envelope of :math:`\mathcal N_{\mathbb Z}(0, s^2)` (module docstring).

    Attributes
    ----------
    sigma2 : int
        :math:`s^2`.
    width_bits : int
        :math:`b`, blocks of :math:`w = 2^b` integers.
    blocks : int
        :math:`K` per side; the tail starts at :math:`L = K w`.
    scale : int
        :math:`c`.
    weights : tuple of int
        :math:`\omega` of slots ``0..K-1`` (positive blocks), ``K..2K-1`` (negative blocks),
        ``2K`` (the tail); the other slots weigh 0. They sum to :math:`2^{64}`.
    threshold : numpy.ndarray of uint64, shape (512,)
        Alias thresholds: slot ``j`` stays ``j`` when the 55-bit draw is below it, else goes
        to its alias.
    piece : numpy.ndarray of int64, shape (1024,)
        The piece of index ``j`` (slot ``j`` kept) and ``512 + j`` (slot ``j``'s alias).
    piece_base, piece_direction : numpy.ndarray of float64, shape (1024,)
        A block candidate is ``base + direction * t`` (exact in float64).
    piece_log_ratio : numpy.ndarray of float64, shape (1024,)
        :math:`\ln(c w / \omega)` of the piece (the filter's constant); NaN for the tail, which
        the filter never decides.
    margin_bits : int
        The filter's margin :math:`\mu = 2^{-margin\_bits}`.
    """

    sigma2: int
    width_bits: int
    blocks: int
    scale: int
    weights: tuple[int, ...]
    threshold: np.ndarray
    piece: np.ndarray
    piece_base: np.ndarray
    piece_direction: np.ndarray
    piece_log_ratio: np.ndarray
    margin_bits: int

    @property
    def width(self) -> int:
        """:math:`w = 2^b`."""
        return 1 << self.width_bits

    @property
    def tail_start(self) -> int:
        """:math:`L = K w`."""
        return self.blocks << self.width_bits

    @property
    def tail_slot(self) -> int:
        """The tail's slot, :math:`2K`."""
        return 2 * self.blocks

    def acceptance_rate(self) -> float:
        r""":math:`c \sum_x f(x) / 2^{64}`, the probability that a candidate is accepted
        (:math:`\sum_x f(x) = \sqrt{2\pi s^2}` up to :math:`e^{-2\pi^2 s^2}`, by Poisson
        summation)."""
        return self.scale * math.sqrt(2 * math.pi * self.sigma2) / _TOTAL

    @staticmethod
    @lru_cache(maxsize=64)
    def build(
        sigma2: int,
        tail_sigmas: Fraction = _DEFAULT_TAIL_SIGMAS,
        margin_bits: int = _DEFAULT_MARGIN_BITS,
    ) -> BlockEnvelope:
        r"""The envelope of :math:`\mathcal N_{\mathbb Z}(0, s^2)`, cached per argument.

        Parameters
        ----------
        sigma2 : int
            :math:`s^2`, an integer in [:data:`MIN_SIGMA2`, :data:`MAX_SIGMA2`].
        tail_sigmas : fractions.Fraction, default 13/2
            :math:`\tau`: the blocks cover :math:`|x| < \tau s` (rounded up to whole blocks);
            in :math:`[1, 7.5]`. Smaller values only send more candidates to the tail
            (tests use 1 to exercise it).
        margin_bits : int, default 32
            The float filter's margin :math:`2^{-margin\_bits}`, in [2, 40]. Smaller values
            send more decisions to exact arithmetic (tests use 4); the law is the same.

        Raises
        ------
        DpfedInputError
            On a value outside these ranges.
        """
        s2 = check_int("sigma2", sigma2, minimum=MIN_SIGMA2)
        if s2 > MAX_SIGMA2:
            raise DpfedInputError(f"sigma2 must be at most 2^80. Found {s2}.")
        tau = Fraction(tail_sigmas)
        if not 1 <= tau <= Fraction(15, 2):
            raise DpfedInputError(f"tail_sigmas must be in [1, 7.5]. Found {tail_sigmas}.")
        mb = check_int("margin_bits", margin_bits, minimum=2)
        if mb > 40:
            raise DpfedInputError(f"margin_bits must be at most 40. Found {mb}.")
        sigma = math.isqrt(s2)
        width_bits = (sigma // 16).bit_length() - 1
        w = 1 << width_bits
        blocks = -(-(tau.numerator * sigma) // (tau.denominator * w))
        # upper bounds of the envelope masses, as exact fractions
        masses = [_block_mass_bound(k * w, w, s2) for k in range(blocks)]
        masses += [_block_mass_bound(k * w + 1, w, s2) for k in range(blocks)]
        masses.append(_tail_mass_bounds(blocks * w, s2, 2)[1])
        pieces = len(masses)
        scale = int(Fraction(_TOTAL - 2 * pieces) / sum(masses, Fraction(0)))
        weights = [math.ceil(scale * m) for m in masses]
        weights[0] += _TOTAL - sum(weights)
        threshold, alias = _alias_table(weights + [0] * (_SLOTS - pieces))
        base = np.zeros(_SLOTS, dtype=np.float64)
        direction = np.zeros(_SLOTS, dtype=np.float64)
        log_ratio = np.full(_SLOTS, np.nan)
        for k in range(blocks):
            base[k], direction[k] = k * w, 1.0
            base[blocks + k], direction[blocks + k] = -(k * w + 1), -1.0
        for j in range(2 * blocks):
            log_ratio[j] = math.log(scale * w) - math.log(weights[j])
        piece = np.concatenate([np.arange(_SLOTS, dtype=np.int64), alias])
        return BlockEnvelope(
            s2,
            width_bits,
            blocks,
            scale,
            tuple(weights),
            threshold,
            piece,
            base[piece],
            direction[piece],
            log_ratio[piece],
            mb,
        )

    def tail_acceptance_bounds(self, distance: int, level: int) -> tuple[Fraction, Fraction]:
        r"""Rational bounds of a tail candidate's :math:`\alpha` at :math:`|x| - L` =
        ``distance``, from ``level + 1`` words of the exponentials' expansions."""
        low, high = _tail_mass_bounds(self.tail_start, self.sigma2, level + 1)
        factor = Fraction(self.scale, self.weights[self.tail_slot])
        if distance:
            e_low, e_high = _exp_neg_bounds(
                Fraction(distance * distance, 2 * self.sigma2), level + 1
            )
        else:
            e_low = e_high = Fraction(1)
        return factor * low * e_low, factor * high * e_high

    def block_acceptance_bounds(self, slot: int, x: int, level: int) -> tuple[Fraction, Fraction]:
        r"""Rational bounds of :math:`\alpha(x) = c w f(x) / \omega_{slot}`."""
        factor = Fraction(self.scale * self.width, self.weights[slot])
        if x == 0:
            return factor, factor
        low, high = _exp_neg_bounds(Fraction(x * x, 2 * self.sigma2), level + 1)
        return factor * low, factor * high


def _exp_neg_bounds(gamma: Fraction, words: int) -> tuple[Fraction, Fraction]:
    r""":math:`e^{-\gamma}` between two fractions of denominator :math:`2^{64 \cdot words}`."""
    digits = exp_neg_digits(gamma, words)
    return Fraction(digits, 1 << (64 * words)), Fraction(digits + 1, 1 << (64 * words))


def _block_mass_bound(nearest: int, width: int, sigma2: int) -> Fraction:
    r"""An upper bound of :math:`w f(m)`, :math:`m` the block's point nearest 0."""
    if nearest == 0:
        return Fraction(width)
    return width * _exp_neg_bounds(Fraction(nearest * nearest, 2 * sigma2), 2)[1]


def _tail_mass_bounds(start: int, sigma2: int, words: int) -> tuple[Fraction, Fraction]:
    r"""Bounds of :math:`W_{tail} = f(L)(1 + r)/(1 - r)`, :math:`r = e^{-L/s^2}`."""
    f_low, f_high = _exp_neg_bounds(Fraction(start * start, 2 * sigma2), words)
    r_low, r_high = _exp_neg_bounds(Fraction(start, sigma2), words)
    return f_low * (1 + r_low) / (1 - r_low), f_high * (1 + r_high) / (1 - r_high)


def _alias_table(weights: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    r"""Walker's alias table for integer weights summing to :math:`n 2^{Q}` (exact).

    Slot ``j`` keeps itself when a uniform :math:`u < 2^{Q}` is below ``threshold[j]`` and goes
    to ``alias[j]`` otherwise, so piece ``i`` is chosen with probability
    :math:`\omega_i / (n 2^Q)`.
    """
    n = len(weights)
    full = 1 << _THRESHOLD_BITS
    if sum(weights) != n * full:
        raise AssertionError("alias weights must sum to n 2^Q")  # pragma: no cover
    rest = list(weights)
    threshold = [full] * n
    alias = list(range(n))
    small = [j for j in range(n) if rest[j] < full]
    large = [j for j in range(n) if rest[j] >= full]
    while small and large:
        j = small.pop()
        g = large.pop()
        threshold[j] = rest[j]
        alias[j] = g
        rest[g] -= full - rest[j]
        (small if rest[g] < full else large).append(g)
    # what is left holds exactly 2^Q each (integer weights: no rounding residue)
    for j in small + large:
        if rest[j] != full:
            raise AssertionError("alias table did not balance")  # pragma: no cover
    return np.array(threshold, dtype=np.uint64), np.array(alias, dtype=np.int64)


def _uniform_below(
    prefix: int,
    bits: int,
    bounds: Callable[[int], tuple[Fraction, Fraction]],
    rng: np.random.Generator,
) -> bool:
    r"""Whether :math:`U < \alpha` exactly, for :math:`U` uniform on :math:`[0, 1)` whose leading
    ``bits`` bits are ``prefix`` and whose later bits are drawn from ``rng`` on demand.

    ``bounds(level)`` gives :math:`lo \le \alpha \le hi` tightening with ``level``; :math:`U`
    and the bounds are refined together (64 bits and one level at a time) until :math:`U`'s
    interval lies on one side.
    """
    level = 1
    while True:
        low, high = bounds(level)
        if Fraction(prefix + 1, 1 << bits) <= low:
            return True
        if Fraction(prefix, 1 << bits) >= high:
            return False
        prefix = (prefix << 64) | int(uniform_words(rng, 1)[0])
        bits += 64
        level += 1


def _decide_rows(
    env: BlockEnvelope,
    first: np.ndarray,
    second: np.ndarray,
    generators: Sequence[np.random.Generator],
) -> tuple[np.ndarray, np.ndarray]:
    r"""Candidates and their acceptance for words of shape ``(rows, n)``; the rare exact
    decisions draw from row ``i``'s generator, in candidate order."""
    slot = (first >> np.uint64(_THRESHOLD_BITS)).view(np.int64)
    # index into the piece tables: the slot itself, or 512 + slot for its alias
    index = ((first & _THRESHOLD_MASK) >= env.threshold[slot]).view(np.uint8).astype(np.int64)
    index <<= _SLOT_BITS
    index += slot
    b = env.width_bits
    # a block candidate's value, exact in float64 (|x| < 2^43)
    x = (second & np.uint64(env.width - 1)).view(np.int64).astype(np.float64)
    x *= env.piece_direction[index]
    x += env.piece_base[index]
    # the filter: U's leading bits as a float interval [low, low + ulp), in units of the ulp
    float_shift = max(b, 64 - _FLOAT_BITS)
    low = (second >> np.uint64(float_shift)).view(np.int64).astype(np.float64)
    alpha = x * x
    alpha *= -0.5 / env.sigma2
    alpha += env.piece_log_ratio[index]
    np.exp(alpha, out=alpha)
    # alpha - low in units of U's last bit: U < alpha for sure when it is >= 1 + margin,
    # U >= alpha for sure when it is <= -margin (an absolute margin mu: alpha <= 1)
    alpha *= math.ldexp(1.0, 64 - float_shift)
    alpha -= low
    margin = math.ldexp(1.0, 64 - float_shift - env.margin_bits)
    accept = alpha >= 1.0 + margin
    decided = alpha <= -margin
    decided |= accept
    x_int = x.astype(np.int64)
    if not decided.all():
        rows, cols = np.nonzero(~decided)
        _decide_exactly(env, (rows, cols), index, second, x_int, accept, generators)
    return x_int, accept


def _decide_exactly(
    env: BlockEnvelope,
    undecided: tuple[np.ndarray, np.ndarray],
    index: np.ndarray,
    second: np.ndarray,
    x: np.ndarray,
    accept: np.ndarray,
    generators: Sequence[np.random.Generator],
) -> None:
    """The candidates the filter left (and every tail candidate), row by row in candidate
    order: a row's tail points first (one Laplace call), then each decision's words."""
    b = env.width_bits
    rows, cols = undecided
    tail_scale = Fraction(env.sigma2, env.tail_start)
    for row in np.unique(rows).tolist():
        rng = generators[row]
        mine = cols[rows == row]
        slots = env.piece[index[row, mine]]
        is_tail = slots == env.tail_slot
        y = discrete_laplace(tail_scale, int(is_tail.sum()), rng)
        x[row, mine[is_tail]] = np.where(y >= 0, env.tail_start + y, -(env.tail_start - y))
        distances = iter(np.abs(y).tolist())
        for col, slot, tail in zip(mine.tolist(), slots.tolist(), is_tail.tolist(), strict=True):
            if tail:
                bounds = partial(env.tail_acceptance_bounds, next(distances))
                prefix, bits = int(uniform_words(rng, 1)[0]), 64
            else:
                bounds = partial(env.block_acceptance_bounds, slot, int(x[row, col]))
                prefix, bits = int(second[row, col]) >> b, 64 - b
            accept[row, col] = _uniform_below(prefix, bits, bounds, rng)


#: Bit generators whose ``random_raw`` words are exactly the words of
#: ``integers(0, 2**64, dtype=uint64)`` (one 64-bit output each; tested).
_RAW_64 = frozenset(
    {
        ("numpy.random._sfc64", "SFC64"),
        ("numpy.random._pcg64", "PCG64"),
        ("numpy.random._pcg64", "PCG64DXSM"),
        ("numpy.random._philox", "Philox"),
        ("randomgen.chacha", "ChaCha"),
    }
)


def _words(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Uniform 64-bit words: the bit generator's raw output where it is 64 bits (a third of
    the time of ``integers``, which handles bounds), else ``integers``."""
    kind = type(rng.bit_generator)
    if (kind.__module__, kind.__name__) in _RAW_64:
        raw: np.ndarray = rng.bit_generator.random_raw(shape)
        return raw
    return rng.integers(0, _TOTAL, size=shape, dtype=np.uint64)


def _draw_words(generators: Sequence[np.random.Generator], n: int) -> tuple[np.ndarray, np.ndarray]:
    words = np.empty((len(generators), 2, n), dtype=np.uint64)
    for i, rng in enumerate(generators):
        words[i] = _words(rng, (2, n))
    return words[:, 0], words[:, 1]


def _candidates(dim: int) -> int:
    """Candidates drawn for ``dim`` samples: acceptance is above 0.97, so this rarely falls
    short (then the row draws again); it changes the number of words drawn, not the law."""
    return dim + dim // 16 + 64


def block_gaussian_rows(
    sigma2: int,
    generators: Sequence[np.random.Generator],
    dim: int,
    *,
    envelope: BlockEnvelope | None = None,
) -> np.ndarray:
    r"""One row of ``dim`` exact :math:`\mathcal N_{\mathbb Z}(0, s^2)` draws per generator.

    Row ``i`` is a function of ``generators[i]`` alone (the same as
    ``block_gaussian(sigma2, dim, generators[i])``): the rows are computed together only to
    share numpy's passes.

    Parameters
    ----------
    sigma2 : int
        :math:`s^2`, an integer in [:data:`MIN_SIGMA2`, :data:`MAX_SIGMA2`].
    generators : sequence of numpy.random.Generator
        One per row (``rng.integers`` only).
    dim : int
        Samples per row, ``>= 0``.
    envelope : BlockEnvelope, optional
        A non-default envelope of the same ``sigma2`` (tests).

    Returns
    -------
    numpy.ndarray of int64, shape (len(generators), dim)
    """
    env = envelope if envelope is not None else BlockEnvelope.build(sigma2)
    if env.sigma2 != sigma2:
        raise DpfedInputError(f"envelope is for sigma2 = {env.sigma2}, not {sigma2}.")
    d = check_int("dim", dim, minimum=0)
    gens = list(generators)
    for rng in gens:
        if not isinstance(rng, np.random.Generator):
            raise DpfedInputError(
                f"generators must be numpy.random.Generator objects. Found {type(rng).__name__}."
            )
    out = np.empty((len(gens), d), dtype=np.int64)
    if not gens or not d:
        return out
    first, second = _draw_words(gens, _candidates(d))
    x, accept = _decide_rows(env, first, second, gens)
    rank = np.cumsum(accept, axis=1)
    counts = rank[:, -1]
    full = counts >= d
    if full.all():
        out[...] = x[accept & (rank <= d)].reshape(len(gens), d)
        return out
    for i in range(len(gens)):
        row = x[i][accept[i]][:d]
        out[i, : row.size] = row
        filled = row.size
        while filled < d:  # a short row draws again from its own generator
            f1, f2 = _draw_words([gens[i]], _candidates(d - filled))
            more_x, more_ok = _decide_rows(env, f1, f2, [gens[i]])
            more = more_x[0][more_ok[0]][: d - filled]
            out[i, filled : filled + more.size] = more
            filled += more.size
    return out


def block_gaussian(
    sigma2: int, size: int, rng: np.random.Generator, *, envelope: BlockEnvelope | None = None
) -> np.ndarray:
    r"""``size`` exact draws of :math:`\mathcal N_{\mathbb Z}(0, s^2)`, :math:`P(x) \propto
    e^{-x^2/(2 s^2)}` on :math:`\mathbb Z`, for an integer :math:`s^2 \ge 2^{16}`.

    The same law as :func:`dpfed.privacy.discrete.discrete_gaussian` (a different sequence of
    draws), at about two random words per sample.

    Parameters
    ----------
    sigma2 : int
        :math:`s^2` in [:data:`MIN_SIGMA2`, :data:`MAX_SIGMA2`].
    size : int
    rng : numpy.random.Generator
    envelope : BlockEnvelope, optional
        A non-default envelope (tests).

    Returns
    -------
    numpy.ndarray of int64, shape (size,)
    """
    out: np.ndarray = block_gaussian_rows(sigma2, [rng], size, envelope=envelope)[0]
    return out
