r"""Fixed-point encoding of real vectors as integers modulo :math:`2^{64}`.

A real value :math:`x` is encoded with :math:`f` fractional bits as the integer

.. math::

    q = \operatorname{rint}(x \, 2^{f}) \in \mathbb{Z},

stored as its two's complement in a ``numpy.uint64``, i.e. as :math:`q \bmod 2^{64}`.
Addition of ``uint64`` arrays wraps modulo :math:`2^{64}`, which is exactly the arithmetic of
the secret shares (:mod:`dpfed.dca.shares`). A modular sum :math:`s = \sum_i q_i \bmod 2^{64}`
decodes to the true integer sum (read back as a signed 64-bit integer, divided by
:math:`2^f`) **provided the true sum lies in** :math:`[-(2^{63}-1),\ 2^{63}-1]`. For :math:`N`
summands this is guaranteed when every encoded value satisfies

.. math::

    |q_i| \le L_N = \left\lfloor \frac{2^{63} - 1}{N} \right\rfloor ,
    \qquad\text{i.e. roughly}\qquad |x_i| \, 2^{f} < 2^{63} / N .

:func:`encode` refuses (:class:`~dpfed.DpfedInputError`, naming the value, its index and the
bound) any value outside that range instead of letting the modular sum wrap silently.
Rounding to the nearest integer makes the encoding error of each value at most
:math:`2^{-f-1}`, so a decoded sum of :math:`N` values is within :math:`N 2^{-f-1}` of the
real sum of the inputs (plus the float64 rounding of the final division).
"""

from __future__ import annotations

import math

import numpy as np

from dpfed._validation import DpfedInputError, check_int

__all__ = [
    "DEFAULT_FRACTIONAL_BITS",
    "MAX_FRACTIONAL_BITS",
    "check_fractional_bits",
    "decode",
    "encode",
    "encode_scaled_into",
    "first_bad_index",
    "max_encoded",
    "overflow_error",
    "scaled_limit",
    "value_bound",
]

#: Fractional bits used unless told otherwise: a resolution of :math:`2^{-24} \approx 6\cdot
#: 10^{-8}`, and values up to about :math:`5.5 \cdot 10^{11} / N` in magnitude.
DEFAULT_FRACTIONAL_BITS = 24

#: Largest accepted number of fractional bits (a value of magnitude 1 must still fit).
MAX_FRACTIONAL_BITS = 62

_INT63 = (1 << 63) - 1


def check_fractional_bits(fractional_bits: int) -> int:
    """Return ``fractional_bits`` as int if it is an integer in [0, :data:`MAX_FRACTIONAL_BITS`].

    Raises
    ------
    DpfedInputError
        Otherwise.
    """
    f = check_int("fractional_bits", fractional_bits, minimum=0)
    if f > MAX_FRACTIONAL_BITS:
        raise DpfedInputError(
            f"fractional_bits must be at most {MAX_FRACTIONAL_BITS}. Found {fractional_bits!r}."
        )
    return f


def max_encoded(n_summands: int) -> int:
    r"""Largest magnitude :math:`L_N = \lfloor (2^{63}-1)/N \rfloor` of an encoded integer.

    Any :math:`N` integers with :math:`|q_i| \le L_N` have a sum in
    :math:`[-(2^{63}-1), 2^{63}-1]`, so their sum modulo :math:`2^{64}` decodes exactly.

    Parameters
    ----------
    n_summands : int
        Number of values that will be added, :math:`N \ge 1`.

    Returns
    -------
    int
        :math:`L_N`.
    """
    n = check_int("n_summands", n_summands, minimum=1)
    return _INT63 // n


def value_bound(n_summands: int, fractional_bits: int = DEFAULT_FRACTIONAL_BITS) -> float:
    r"""Bound on :math:`|x|` below which :func:`encode` accepts a value, for :math:`N` summands.

    .. math::

        B(N, f) = L_N / 2^{f} = \left\lfloor \frac{2^{63}-1}{N} \right\rfloor 2^{-f}
        \approx \frac{2^{63}}{N \, 2^{f}} .

    Every value with :math:`|x| \le B(N, f)` is accepted (its rounded encoding has magnitude at
    most :math:`L_N`; values up to half a unit above may be accepted too).

    Parameters
    ----------
    n_summands : int
        :math:`N \ge 1`.
    fractional_bits : int, default :data:`DEFAULT_FRACTIONAL_BITS`
        :math:`f`.

    Returns
    -------
    float
        :math:`B(N, f)`.

    Examples
    --------
    >>> round(value_bound(1000, 24), 1)
    549755813.9
    """
    f = check_fractional_bits(fractional_bits)
    return math.ldexp(float(_float_floor(max_encoded(n_summands))), -f)


def _float_floor(limit: int) -> float:
    """The largest float that is <= ``limit`` (an exact comparison bound for float data)."""
    x = float(limit)
    if int(x) > limit:
        x = math.nextafter(x, 0.0)
    return x


def overflow_error(
    value: float, index: tuple[int, ...], n_summands: int, fractional_bits: int, name: str
) -> DpfedInputError:
    """The error for a value that cannot be encoded (not finite, or above :func:`value_bound`).

    Parameters
    ----------
    value : float
        The offending (unscaled) value.
    index : tuple of int
        Its index, shown as ``name[i, j]``.
    n_summands, fractional_bits : int
        :math:`N` and :math:`f`.
    name : str
        What the value is (e.g. ``"values"``).

    Returns
    -------
    DpfedInputError
    """
    where = f"{name}[{', '.join(str(int(i)) for i in index)}]"
    if not math.isfinite(value):
        return DpfedInputError(f"{where} must be finite to be encoded. Found {value}.")
    bound = math.ldexp(scaled_limit(n_summands), -fractional_bits)
    return DpfedInputError(
        f"{where} = {value!r} is too large to encode: with {n_summands} summands and "
        f"{fractional_bits} fractional bits every value must satisfy |x| * 2^{fractional_bits} "
        f"<= floor((2^63 - 1) / {n_summands}), i.e. |x| <= {bound:.6g}, or the sum modulo "
        "2^64 could wrap. Use fewer fractional bits or smaller values."
    )


def scaled_limit(n_summands: int) -> float:
    """:func:`max_encoded` as the largest float not above it (an exact bound for float data)."""
    return _float_floor(max_encoded(n_summands))


def first_bad_index(scaled: np.ndarray, limit: float) -> tuple[int, ...]:
    """Index of the first entry of ``scaled`` that is not finite or has magnitude > ``limit``."""
    bad = ~(np.abs(scaled) <= limit)  # NaN compares False, so it is caught as well
    flat = int(np.flatnonzero(bad.reshape(-1))[0])
    return tuple(int(i) for i in np.unravel_index(flat, scaled.shape))


def encode(
    values: np.ndarray,
    n_summands: int,
    fractional_bits: int = DEFAULT_FRACTIONAL_BITS,
    *,
    name: str = "values",
) -> np.ndarray:
    r"""Encode real values as fixed-point integers modulo :math:`2^{64}`.

    .. math:: q = \operatorname{rint}(x\, 2^{f}) \bmod 2^{64}

    Parameters
    ----------
    values : array_like of float, any shape
        The values :math:`x`.
    n_summands : int
        The number :math:`N` of encoded values that will be summed coordinate-wise; it sets the
        bound :math:`|q| \le \lfloor (2^{63}-1)/N \rfloor` (:func:`max_encoded`).
    fractional_bits : int, default :data:`DEFAULT_FRACTIONAL_BITS`
        :math:`f`.
    name : str, default "values"
        Name of the argument used in error messages.

    Returns
    -------
    numpy.ndarray of uint64, same shape as ``values``
        The two's complement of :math:`q`.

    Raises
    ------
    DpfedInputError
        If a value is not finite or exceeds the bound; the message names the value, its index
        and the bound (:func:`value_bound`).
    """
    f = check_fractional_bits(fractional_bits)
    n = check_int("n_summands", n_summands, minimum=1)
    x = np.asarray(values, dtype=np.float64)
    scaled = np.rint(np.ldexp(x, f))
    out = np.empty(x.shape, dtype=np.uint64)
    encode_scaled_into(scaled, out, n, f, original=x, name=name)
    return out


def encode_scaled_into(
    scaled: np.ndarray,
    out: np.ndarray,
    n_summands: int,
    fractional_bits: int,
    *,
    original: np.ndarray | None = None,
    name: str = "values",
    index_offset: tuple[int, ...] = (),
) -> None:
    r"""Check already scaled and rounded values and store them as ``uint64`` (the fast path).

    ``scaled`` must hold :math:`\operatorname{rint}(x\, 2^{f})` as float64; every entry is
    checked against :math:`L_N` (:func:`max_encoded`) with one pass for the maximum and one for
    the minimum, then converted exactly (integers below :math:`2^{63}` are exact in float64).

    Parameters
    ----------
    scaled : numpy.ndarray of float64
        Rounded scaled values :math:`\operatorname{rint}(x 2^f)`.
    out : numpy.ndarray of uint64 or int64, same shape
        Receives the encodings.
    n_summands : int
        :math:`N`.
    fractional_bits : int
        :math:`f` (for the error message).
    original : numpy.ndarray or None
        Unscaled values, shown in the error message (default: ``scaled / 2^f``).
    name : str, default "values"
        Name used in error messages.
    index_offset : tuple of int, default ()
        Added to the leading indices reported in an error (e.g. the first client of a block).

    Raises
    ------
    DpfedInputError
        If an entry is not finite or exceeds the bound.
    """
    limit = scaled_limit(n_summands)
    if scaled.size:
        hi = scaled.max()
        lo = scaled.min()
        if not (hi <= limit and -lo <= limit):  # also false for NaN
            where = first_bad_index(scaled, limit)
            raw = original if original is not None else np.ldexp(scaled, -fractional_bits)
            index = tuple(
                w + (int(index_offset[k]) if k < len(index_offset) else 0)
                for k, w in enumerate(where)
            )
            raise overflow_error(float(raw[where]), index, n_summands, fractional_bits, name)
    np.copyto(out.view(np.int64), scaled, casting="unsafe")


def decode(encoded: np.ndarray, fractional_bits: int = DEFAULT_FRACTIONAL_BITS) -> np.ndarray:
    r"""Decode fixed-point integers modulo :math:`2^{64}` (e.g. a modular sum) to float64.

    .. math:: x = \operatorname{int64}(s) \, 2^{-f}

    where :math:`\operatorname{int64}(s)` reads the ``uint64`` word :math:`s` as a two's
    complement signed integer. Exact as an integer whenever the true sum lies in
    :math:`[-(2^{63}-1), 2^{63}-1]` (which :func:`encode`'s bound guarantees); the conversion
    to float64 rounds sums beyond :math:`2^{53}` to 53 significant bits.

    Parameters
    ----------
    encoded : numpy.ndarray of uint64 (or int64)
        Encoded values or sums.
    fractional_bits : int, default :data:`DEFAULT_FRACTIONAL_BITS`
        :math:`f`.

    Returns
    -------
    numpy.ndarray of float64, same shape
    """
    f = check_fractional_bits(fractional_bits)
    arr = np.asarray(encoded)
    if arr.dtype not in (np.uint64, np.int64):
        raise DpfedInputError(
            f"encoded must be an array of uint64 or int64. Found dtype {arr.dtype}."
        )
    return np.ldexp(arr.view(np.int64).astype(np.float64), -f)
