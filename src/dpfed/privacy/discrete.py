r"""Exact samplers of the discrete Laplace and discrete Gaussian distributions on the integers.

.. math::

    \mathrm{Lap}_{\mathbb Z}(t):\ P(x) = \frac{1 - e^{-1/t}}{1 + e^{-1/t}}\, e^{-|x|/t},
    \qquad
    \mathcal N_{\mathbb Z}(0, \sigma^2):\ P(x) = \frac{e^{-x^2/(2\sigma^2)}}
    {\sum_{y \in \mathbb Z} e^{-y^2/(2\sigma^2)}}, \qquad x \in \mathbb Z .

**Why not floating point.** A sampler that computes noise in floating point does not draw from
the distribution its privacy proof is about: the set of floats it can output, and their
probabilities, depend on the value being protected, which an attacker can exploit (Mironov 2012
for the Laplace mechanism; Jin, McMurtry, Rubinstein and Ohrimenko 2022, "Are we there yet?
Timing and floating-point attacks on differential privacy systems", for Gaussian samplers
including Box-Muller and numpy's ziggurat). The samplers here use integers only: every random
number is drawn by ``rng.integers`` from an injected ``numpy.random.Generator``, every decision
is an integer comparison, and the parameters are exact rationals (:class:`fractions.Fraction`).
The output is an ``int64`` array whose law is exactly the one above.

**Algorithms** (Canonne, Kamath and Steinke 2020, "The Discrete Gaussian for Differential
Privacy", NeurIPS; "CKS"):

* :func:`discrete_laplace`, CKS Algorithm 2, for rational :math:`t = a/b`: draw
  :math:`U` uniform on :math:`\{0..a-1\}` and keep it with probability :math:`e^{-U/a}`;
  draw :math:`V` with :math:`P(V \ge v) = e^{-v}`; :math:`X = U + aV` is then geometric,
  :math:`P(X = x) \propto e^{-x/a}`; :math:`Y = \lfloor X / b \rfloor`,
  :math:`P(Y = y) \propto e^{-y b/a}`; a uniform sign, rejecting :math:`-0`. The trials of
  probability :math:`e^{-\gamma}` are CKS Algorithm 1 (:mod:`dpfed.privacy.bernoulli_exp`),
  and :math:`V` is drawn from one uniform compared exactly with :math:`e^{-1}, e^{-2},
  \dots` (the same law as CKS's loop of :math:`e^{-1}` trials).
* :func:`discrete_gaussian`, CKS Algorithm 3, with the Laplace scale chosen for integer
  arithmetic. For any :math:`c > 0` let :math:`t = \sigma^2 / c`; then for every integer
  :math:`y`

  .. math::

      \frac{e^{-y^2/(2\sigma^2)}}{e^{-|y|/t}}
      = e^{c^2/(2\sigma^2)}\, e^{-(|y| - c)^2 / (2\sigma^2)}, \qquad
      e^{-(|y|-c)^2/(2\sigma^2)} \le 1,

  so a :math:`\mathrm{Lap}_{\mathbb Z}(t)` draw :math:`Y` accepted with probability
  :math:`e^{-(|Y| - c)^2/(2\sigma^2)}` is :math:`\mathcal N_{\mathbb Z}(0, \sigma^2)`. CKS
  take :math:`t = \lfloor\sigma\rfloor + 1` (an integer) and :math:`c = \sigma^2/t`; here
  :math:`c = \lfloor\sigma\rfloor` (an integer) and :math:`t = \sigma^2/c` (a rational) when
  :math:`\sigma \ge 1`, which keeps the acceptance exponent
  :math:`(|Y| - c)^2 q / (2p)` (for :math:`\sigma^2 = p/q`) of the order of :math:`p` instead
  of :math:`p^2`: every integer :math:`\sigma^2 \le 2^{56}` (:math:`\sigma \le 2^{28}`) stays
  in 64-bit integers. For
  :math:`\sigma < 1`, :math:`t = 1` and :math:`c = \sigma^2`, as CKS.

Both loops are vectorised: a batch of candidates is drawn at once, the accepted ones are kept
in order (independent candidates accepted independently are i.i.d. from the target, so taking
the first :math:`n` accepted is exact) and a new batch is drawn for the remainder. Every
intermediate is an ``int64`` whose range is checked when the parameters are read
(:class:`DiscreteGaussianParameters`); an entry whose acceptance exponent would not fit
(:math:`||Y| - c| > 2^{31}` for integer :math:`\sigma^2`: about :math:`2^{31}/\sigma`
Laplace scales out, which never happens in practice) is decided with Python's unbounded
integers, exactly.

**Why not a library.** OpenDP (0.16, MIT) implements these algorithms in Rust, but draws its
random bits from its own operating-system CSPRNG (``fill_bytes``: a thread-local generator
seeded from system entropy), with no way to seed it or to hand it bits. dpfed needs both:

* a simulation seed must reproduce a run bit for bit (every party's noise from
  ``SeedSequence(seed).spawn(...)``, :mod:`dpfed.privacy.noise_source`), and
* a deployed party draws its noise from a ChaCha20 stream keyed by its own secret, so that a
  party restarted after a crash replays exactly the noise it drew before, instead of drawing
  fresh noise for a release that may already have been seen (which would leak it).

A sampler that owns its randomness can do neither. It was also slower from Python: about
:math:`8 \cdot 10^{4}` samples per second for a vector release of :math:`10^5` integers (its
``make_gaussian`` over ``vector_domain(atom_domain(T=int))``), against millions here. So the
CKS algorithms are implemented here, over ``rng.integers``; with the deployment's
ChaCha-backed generator the integers are a CSPRNG's.

**Timing.** The samplers are not constant-time: the number of draws, hence the time, depends
on the values drawn (a large :math:`|Y|` takes more rounds of the geometric loop), never on the
data. Timing one scalar draw can therefore say something about that draw's noise (Jin et al.
2022). Here a release draws its whole vector in one vectorised call, whose time depends on all
its coordinates' noise jointly, and no party exposes per-sample timings; a deployment that must
also hide the batch time can draw the noise before the data is ready.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

import numpy as np

from dpfed._validation import DpfedInputError, check_int
from dpfed.privacy.bernoulli_exp import (
    DRAW_LIMIT,
    LazyUniform,
    bernoulli_exp_fraction,
    bernoulli_exp_integer,
    geometric_exp,
    uniform_below,
    uniform_words,
)

__all__ = [
    "MAX_FLOAT_FRACTION_BITS",
    "DiscreteGaussianParameters",
    "DiscreteLaplaceParameters",
    "as_rational",
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "discrete_laplace_pmf",
]

#: A float parameter is accepted only if its exact binary value has at most this many bits
#: after the binary point (2.25 and 1e6 are; 0.1, whose double is 3602879701896397 / 2^55,
#: is not: pass ``Fraction(1, 10)``).
MAX_FLOAT_FRACTION_BITS = 32

_INT64_MAX = (1 << 63) - 1
#: Bound on the Laplace numerator :math:`a` so that :math:`U + aV` fits for every
#: :math:`V \le 45` drawn by the fast path.
_LAPLACE_NUM_LIMIT = 1 << 56
#: Samples produced per batch: bounds the temporaries (a few 8 MiB arrays).
_CHUNK = 1 << 20
#: (drawn, accepted) before the first round, per sampler: proposals per sample still needed at
#: first (about 1 / the acceptance rate; the rate is then learnt).
_FIRST_LAPLACE = (8, 5)
_FIRST_GAUSSIAN = (43, 20)


def as_rational(name: str, value: int | Fraction | float | str) -> Fraction:
    r"""``value`` as an exact :class:`fractions.Fraction` (> 0).

    Integers and fractions are exact. A string is parsed by :class:`~fractions.Fraction`
    (``"2.25"``, ``"1/10"``). A float is read at its exact binary value, and accepted only if
    that value has at most :data:`MAX_FLOAT_FRACTION_BITS` bits after the binary point: a
    float such as ``0.1`` is not the number it was written as, and sampling at its binary
    value would silently change the parameter.

    Raises
    ------
    DpfedInputError
        On a value that is not a finite positive number, or a float that is not exactly a
        short binary fraction.
    """
    if isinstance(value, bool):
        raise DpfedInputError(f"{name} must be a positive rational number. Found {value!r}.")
    if isinstance(value, int | np.integer):
        out = Fraction(int(value))
    elif isinstance(value, Fraction | Rational):
        out = Fraction(value)
    elif isinstance(value, str):
        try:
            out = Fraction(value)
        except (ValueError, ZeroDivisionError):
            raise DpfedInputError(
                f"{name} must be a positive rational number. Found {value!r}."
            ) from None
    elif isinstance(value, float | np.floating):
        v = float(value)
        if not math.isfinite(v):
            raise DpfedInputError(f"{name} must be a finite positive number. Found {value!r}.")
        out = Fraction(v)
        if out.denominator > 1 << MAX_FLOAT_FRACTION_BITS:
            raise DpfedInputError(
                f"{name} = {value!r} is not exactly that number in binary floating point (its "
                f"value is {out.numerator}/{out.denominator}); pass it exactly, as "
                f"fractions.Fraction({str(value)!r}) or an integer."
            )
    else:
        raise DpfedInputError(f"{name} must be a positive rational number. Found {value!r}.")
    if out <= 0:
        raise DpfedInputError(f"{name} must be > 0. Found {value!r}.")
    return out


def _check_size(size: int | tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    dims = tuple(check_int("size", s, minimum=0) for s in shape)
    return dims, math.prod(dims)


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise DpfedInputError(
            f"rng must be a numpy.random.Generator (seeded, or a party's secret generator). "
            f"Found {type(rng).__name__}."
        )
    return rng


@dataclass(frozen=True)
class DiscreteLaplaceParameters:
    r"""The integers of CKS Algorithm 2 for scale :math:`t = a/b` (reduced).

    Attributes
    ----------
    scale : fractions.Fraction
        :math:`t`.
    num, den : int
        :math:`a, b`; :math:`1 \le a \le 2^{56}`, :math:`1 \le b \le 2^{62}`.
    """

    scale: Fraction
    num: int
    den: int

    @classmethod
    def from_scale(cls, scale: int | Fraction | float | str) -> DiscreteLaplaceParameters:
        """Validate ``scale`` (:func:`as_rational`) and bound its numerator and denominator.

        Raises
        ------
        DpfedInputError
            If :math:`a > 2^{56}` or :math:`b > 2^{62}`.
        """
        t = as_rational("scale", scale)
        if t.numerator > _LAPLACE_NUM_LIMIT or t.denominator > DRAW_LIMIT:
            raise DpfedInputError(
                f"scale = {t} needs a numerator at most 2^56 and a denominator at most 2^62 "
                "(64-bit integer arithmetic). Use a simpler fraction."
            )
        return cls(t, t.numerator, t.denominator)


def _laplace_candidates(
    params: DiscreteLaplaceParameters, n: int, rng: np.random.Generator
) -> np.ndarray:
    r"""One round of CKS Algorithm 2 on ``n`` proposals: the accepted ones, in order."""
    a, b = params.num, params.den
    u = uniform_below(rng, a, n)
    if a > 1:
        u = u[bernoulli_exp_fraction(u, a, rng)]
    v = geometric_exp(u.size, rng)
    v_max = (_INT64_MAX - (a - 1)) // a
    if v.size and int(v.max()) > v_max:  # only after a tie resolved far out: exact, in Python
        y = np.empty(u.size, dtype=np.int64)
        for i, (ui, vi) in enumerate(zip(u.tolist(), v.tolist(), strict=True)):
            yi = (ui + a * vi) // b
            if yi > _INT64_MAX:
                raise OverflowError("a discrete Laplace draw exceeded 2^63")  # pragma: no cover
            y[i] = yi
    else:
        y = u + a * v
        if b > 1:
            y //= b
    negative = rng.integers(0, 2, size=y.size, dtype=np.bool_)
    np.negative(y, out=y, where=negative)
    zero = y == 0
    if not zero.any():
        return y
    out: np.ndarray = y[~(negative & zero)]  # -0 is rejected: 0 would be counted twice
    return out


def discrete_laplace(
    scale: int | Fraction | float | str,
    size: int | tuple[int, ...],
    rng: np.random.Generator,
) -> np.ndarray:
    r"""Exact draws of :math:`\mathrm{Lap}_{\mathbb Z}(t)`,
    :math:`P(x) \propto e^{-|x|/t}` on :math:`\mathbb Z`.

    Parameters
    ----------
    scale : int, fractions.Fraction, float or str
        :math:`t > 0`, exact (:func:`as_rational`); numerator at most :math:`2^{56}`,
        denominator at most :math:`2^{62}`.
    size : int or tuple of int
        Output shape.
    rng : numpy.random.Generator
        The only source of randomness (``rng.integers`` only).

    Returns
    -------
    numpy.ndarray of int64, shape ``size``
        Variance :math:`2 e^{-1/t} / (1 - e^{-1/t})^2`.

    Raises
    ------
    DpfedInputError
        On a bad ``scale``, ``size`` or ``rng``.
    """
    params = DiscreteLaplaceParameters.from_scale(scale)
    shape, n = _check_size(size)
    gen = _check_rng(rng)
    out = np.empty(n, dtype=np.int64)
    _fill(out, lambda m: _laplace_candidates(params, m, gen), _FIRST_LAPLACE)
    return out.reshape(shape)


def _fill(out: np.ndarray, candidates: Callable[[int], np.ndarray], first: tuple[int, int]) -> None:
    """Fill ``out`` with accepted candidates, in order, a chunk at a time.

    The number of proposals per round is the number still needed over the acceptance rate
    seen so far (``first`` = (drawn, accepted) before any round), plus 5 % and 16 (integer
    arithmetic); it changes how many draws are wasted, never the law of the samples.
    """
    n = out.size
    filled = 0
    drawn, accepted = first
    while filled < n:
        need = min(n - filled, _CHUNK)
        proposals = need * drawn * 21 // (20 * max(accepted, 1)) + 16
        got = candidates(proposals)
        drawn += proposals
        accepted += got.size
        take = min(got.size, n - filled)
        out[filled : filled + take] = got[:take]
        filled += take


@dataclass(frozen=True)
class DiscreteGaussianParameters:
    r"""The integers of the discrete Gaussian sampler for :math:`\sigma^2 = p/q` (reduced).

    The sampler draws :math:`Y \sim \mathrm{Lap}_{\mathbb Z}(t)` and accepts it with
    probability :math:`e^{-\gamma}`,

    .. math::

        \gamma = \frac{(A|Y| - B)^2 F}{D}
        = \frac{(|Y| - c)^2}{2\sigma^2},

    with :math:`c = \lfloor\sigma\rfloor`, :math:`t = \sigma^2/c`, :math:`(A, B) = (1, c)`,
    :math:`F/D = q/(2p)` reduced, when :math:`\sigma \ge 1`; :math:`c = \sigma^2`,
    :math:`t = 1`, :math:`(A, B, F, D) = (q, p, 1, 2pq)` when :math:`\sigma < 1`.

    Attributes
    ----------
    sigma2 : fractions.Fraction
        :math:`\sigma^2`.
    laplace : DiscreteLaplaceParameters
        The proposal, scale :math:`t`.
    a, b, f, d : int
        :math:`A, B, F, D`.
    w_max : int
        Largest :math:`|A|Y| - B|` whose :math:`(A|Y| - B)^2 F` fits in int64; beyond it the
        exponent is computed with Python integers.
    y_max : int
        Largest :math:`|Y|` with :math:`A|Y| - B \le w_{max}`.
    """

    sigma2: Fraction
    laplace: DiscreteLaplaceParameters
    a: int
    b: int
    f: int
    d: int
    w_max: int
    y_max: int

    @classmethod
    def from_sigma2(cls, sigma2: int | Fraction | float | str) -> DiscreteGaussianParameters:
        r"""Validate :math:`\sigma^2` (:func:`as_rational`) and derive the sampler's integers.

        Raises
        ------
        DpfedInputError
            If an intermediate would not fit 64-bit arithmetic: :math:`D > 2^{62}` (roughly
            :math:`\sigma^2 > 2^{61}` for an integer :math:`\sigma^2`, or
            :math:`p q > 2^{61}` for :math:`\sigma < 1`) or the proposal's scale
            :math:`\sigma^2/c` has a numerator above :math:`2^{56}` (possible from
            :math:`\sigma^2 > 2^{56}`).
        """
        s2 = as_rational("sigma2", sigma2)
        p, q = s2.numerator, s2.denominator
        if p >= q:
            c = math.isqrt(p // q)
            scale = Fraction(p, q * c)
            g = math.gcd(q, 2 * p)
            a, b, f, d = 1, c, q // g, 2 * p // g
        else:
            scale = Fraction(1)
            a, b, f, d = q, p, 1, 2 * p * q
        if d > DRAW_LIMIT or scale.numerator > _LAPLACE_NUM_LIMIT:
            raise DpfedInputError(
                f"sigma2 = {s2} is outside the exact sampler's 64-bit range (it needs "
                f"2 p / gcd(q, 2p) <= 2^62 for sigma >= 1 and 2 p q <= 2^62 for sigma < 1, "
                f"with sigma2 = p/q). Use a simpler fraction or a smaller sigma2."
            )
        laplace = DiscreteLaplaceParameters.from_scale(scale)
        w_max = math.isqrt(_INT64_MAX // f)
        if b > w_max:
            raise DpfedInputError(
                f"sigma2 = {s2} is outside the exact sampler's 64-bit range (the acceptance "
                "exponent at 0 does not fit). Use a simpler fraction."
            )
        return cls(s2, laplace, a, b, f, d, w_max, (w_max + b) // a)


def _gaussian_candidates(
    params: DiscreteGaussianParameters, n: int, rng: np.random.Generator
) -> np.ndarray:
    """One round of the discrete Gaussian rejection on ``n`` Laplace proposals."""
    y = _laplace_candidates(params.laplace, n, rng)
    magnitude = np.abs(y)
    fast = magnitude <= params.y_max
    accept = np.zeros(y.size, dtype=bool)
    idx = np.flatnonzero(fast) if not fast.all() else None
    m = magnitude if idx is None else magnitude[idx]
    w = m * params.a - params.b if params.a != 1 else m - params.b
    exponent = w * w
    if params.f != 1:
        exponent *= params.f
    # gamma = exponent / D: its integer part is 0 for most proposals, so divide only the others
    whole = np.zeros(exponent.size, dtype=np.int64)
    big = np.flatnonzero(exponent >= params.d)
    if big.size:
        whole[big], exponent[big] = np.divmod(exponent[big], params.d)
    ok = bernoulli_exp_integer(whole, rng)
    passed = np.flatnonzero(ok)
    ok[passed] = bernoulli_exp_fraction(exponent[passed], params.d, rng)
    if idx is None:
        accept = ok
    else:
        accept[idx] = ok
        for i in np.flatnonzero(~fast).tolist():
            accept[i] = _accept_exact(int(magnitude[i]), params, rng)
    out: np.ndarray = y[accept]
    return out


def _accept_exact(
    magnitude: int, params: DiscreteGaussianParameters, rng: np.random.Generator
) -> bool:
    """The acceptance trial of one proposal, with Python integers (exponent beyond int64)."""
    w = params.a * magnitude - params.b
    whole, frac = divmod(w * w * params.f, params.d)
    if whole and not LazyUniform(int(uniform_words(rng, 1)[0]), rng).below_exp(Fraction(whole)):
        return False
    return bool(bernoulli_exp_fraction(np.array([frac], dtype=np.int64), params.d, rng)[0])


def discrete_gaussian(
    sigma2: int | Fraction | float | str,
    size: int | tuple[int, ...],
    rng: np.random.Generator,
) -> np.ndarray:
    r"""Exact draws of :math:`\mathcal N_{\mathbb Z}(0, \sigma^2)`,
    :math:`P(x) \propto e^{-x^2/(2\sigma^2)}` on :math:`\mathbb Z`.

    Parameters
    ----------
    sigma2 : int, fractions.Fraction, float or str
        :math:`\sigma^2 > 0`, exact (:func:`as_rational`); the range is that of
        :class:`DiscreteGaussianParameters` (every integer up to :math:`2^{56}`).
    size : int or tuple of int
        Output shape.
    rng : numpy.random.Generator
        The only source of randomness (``rng.integers`` only): a seeded generator gives the
        same samples bit for bit.

    Returns
    -------
    numpy.ndarray of int64, shape ``size``
        Mean 0, variance slightly below :math:`\sigma^2` (:func:`discrete_gaussian_variance`;
        within :math:`10^{-8}` relative for :math:`\sigma \ge 1.5`).

    Raises
    ------
    DpfedInputError
        On a bad ``sigma2``, ``size`` or ``rng``.
    """
    params = DiscreteGaussianParameters.from_sigma2(sigma2)
    shape, n = _check_size(size)
    gen = _check_rng(rng)
    out = np.empty(n, dtype=np.int64)
    _fill(out, lambda m: _gaussian_candidates(params, m, gen), _FIRST_GAUSSIAN)
    return out.reshape(shape)


def discrete_laplace_pmf(x: np.ndarray | int, scale: int | Fraction | float | str) -> np.ndarray:
    r""":math:`P(X = x)` of :math:`\mathrm{Lap}_{\mathbb Z}(t)`, in floating point (for checks).

    .. math::

        P(x) = \frac{1 - e^{-1/t}}{1 + e^{-1/t}}\, e^{-|x|/t} .
    """
    t = float(as_rational("scale", scale))
    r = math.exp(-1.0 / t)
    xs = np.abs(np.asarray(x, dtype=np.float64))
    out: np.ndarray = (1.0 - r) / (1.0 + r) * np.exp(-xs / t)
    return out


def _theta_sums(s2: float) -> tuple[float, float]:
    r"""Poisson summation for :math:`\sigma \ge 1`:
    :math:`\sum_y e^{-y^2/(2\sigma^2)} = \sigma\sqrt{2\pi}\,\theta`,
    :math:`\theta = \sum_{k \in \mathbb Z} e^{-2\pi^2\sigma^2 k^2}`; returns
    :math:`(\theta, \sum_k k^2 e^{-2\pi^2\sigma^2 k^2})`."""
    ks = np.arange(1, 8, dtype=np.float64)
    terms = np.exp(-2.0 * math.pi**2 * s2 * ks * ks)
    return 1.0 + 2.0 * float(np.sum(terms)), 2.0 * float(np.sum(ks * ks * terms))


def _gaussian_normaliser(s2: float) -> float:
    r""":math:`\sum_y e^{-y^2/(2\sigma^2)}`."""
    if s2 >= 1.0:
        return math.sqrt(2.0 * math.pi * s2) * _theta_sums(s2)[0]
    ys = np.arange(1, 64, dtype=np.float64)  # sigma < 1: the terms vanish by |y| = 40
    return 1.0 + 2.0 * float(np.sum(np.exp(-ys * ys / (2.0 * s2))))


def discrete_gaussian_pmf(x: np.ndarray | int, sigma2: int | Fraction | float | str) -> np.ndarray:
    r""":math:`P(X = x)` of :math:`\mathcal N_{\mathbb Z}(0, \sigma^2)`, in floating point.

    The normaliser is :math:`\sum_y e^{-y^2/(2\sigma^2)}`, summed directly for
    :math:`\sigma < 1` and by Poisson summation,
    :math:`\sigma\sqrt{2\pi} \sum_k e^{-2\pi^2\sigma^2 k^2}`, for :math:`\sigma \ge 1`.
    """
    s2 = float(as_rational("sigma2", sigma2))
    xs = np.asarray(x, dtype=np.float64)
    out: np.ndarray = np.exp(-xs * xs / (2.0 * s2)) / _gaussian_normaliser(s2)
    return out


def discrete_gaussian_variance(sigma2: int | Fraction | float | str) -> float:
    r""":math:`\mathrm{Var}[\mathcal N_{\mathbb Z}(0, \sigma^2)] < \sigma^2`.

    For :math:`\sigma \ge 1`, by Poisson summation,

    .. math::

        \mathrm{Var} = \sigma^2 \Big(1 - 4\pi^2\sigma^2
        \frac{\sum_k k^2 e^{-2\pi^2\sigma^2 k^2}}{\sum_k e^{-2\pi^2\sigma^2 k^2}}\Big)

    (a relative deficit of :math:`2 \cdot 10^{-7}` at :math:`\sigma = 1`, below
    :math:`10^{-16}` from :math:`\sigma = 1.5`); for :math:`\sigma < 1` by direct summation.
    """
    s2 = float(as_rational("sigma2", sigma2))
    if s2 >= 1.0:
        theta, moment = _theta_sums(s2)
        return s2 * (1.0 - 4.0 * math.pi**2 * s2 * moment / theta)
    ys = np.arange(1, 64, dtype=np.float64)
    weights = np.exp(-ys * ys / (2.0 * s2))
    return 2.0 * float(np.sum(ys * ys * weights)) / _gaussian_normaliser(s2)
