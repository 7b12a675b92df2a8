"""Fixed-point encoding modulo 2^64: exact sums, refused overflow."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfed import DpfedInputError
from dpfed.dca.fixedpoint import (
    MAX_FRACTIONAL_BITS,
    decode,
    encode,
    max_encoded,
    value_bound,
)


def test_round_trip_is_rounding_to_the_grid():
    x = np.array([[0.0, 1.5, -2.25, 1e-9], [3.0, -4.0, 123.456, -0.4999999]])
    enc = encode(x, n_summands=2, fractional_bits=16)
    assert enc.dtype == np.uint64
    np.testing.assert_array_equal(decode(enc, 16), np.rint(x * 2.0**16) / 2.0**16)


def test_negative_values_are_twos_complement():
    enc = encode(np.array([-1.0]), n_summands=1, fractional_bits=0)
    assert int(enc[0]) == 2**64 - 1


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 40), f=st.integers(0, 40), data=st.data())
def test_modular_sum_decodes_to_the_exact_integer_sum(n, f, data):
    limit = min(max_encoded(n), 2**53)  # integers exactly representable as floats
    q = data.draw(st.lists(st.integers(-limit, limit), min_size=n, max_size=n))
    x = np.array([math.ldexp(float(v), -f) for v in q])  # exactly on the grid
    enc = encode(x, n_summands=n, fractional_bits=f)
    assert [int(e) if int(e) < 2**63 else int(e) - 2**64 for e in enc] == q
    total = enc.sum(dtype=np.uint64)
    signed = int(total) if int(total) < 2**63 else int(total) - 2**64
    assert signed == sum(q)
    assert decode(np.array([total]), f)[0] == math.ldexp(float(sum(q)), -f)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 10**6), f=st.integers(0, 50), data=st.data())
def test_every_value_within_the_bound_is_accepted_and_sums_without_wrapping(n, f, data):
    bound = value_bound(n, f)
    x = np.array(data.draw(st.lists(st.floats(-bound, bound), min_size=1, max_size=20)))
    enc = encode(x, n_summands=n, fractional_bits=f)
    signed = [int(e) if int(e) < 2**63 else int(e) - 2**64 for e in enc]
    assert all(abs(v) <= max_encoded(n) for v in signed)
    assert signed == [int(np.rint(math.ldexp(v, f))) for v in x]


def test_bound_is_accepted_and_just_above_is_refused():
    n, f = 1000, 24
    bound = value_bound(n, f)
    encode(np.array([bound, -bound]), n_summands=n, fractional_bits=f)
    too_big = np.array([[0.0, 0.0], [0.0, bound * (1 + 1e-9) + 1.0]])
    with pytest.raises(DpfedInputError) as err:
        encode(too_big, n_summands=n, fractional_bits=f)
    msg = str(err.value)
    assert "values[1, 1]" in msg  # names the index
    assert repr(float(too_big[1, 1])) in msg  # names the value
    assert f"{bound:.6g}" in msg  # and the bound
    assert "1000 summands" in msg and "24 fractional bits" in msg


def test_the_bound_shrinks_with_the_number_of_summands():
    x = np.array([2.0**20])
    encode(x, n_summands=2**18, fractional_bits=24)
    with pytest.raises(DpfedInputError, match="too large to encode"):
        encode(x, n_summands=2**19, fractional_bits=24)
    assert value_bound(10, 24) == pytest.approx(2.0**63 / 10 / 2.0**24)


def test_without_the_check_the_sum_would_wrap():
    # the largest accepted values: N of them sum to at most 2^63 - 1, no wrap
    n = 3
    q = max_encoded(n)
    enc = encode(np.array([float(q)] * n), n_summands=n, fractional_bits=0)
    total = int(enc.sum(dtype=np.uint64))
    assert total < 2**63 and total == 3 * int(float(q))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_refused(bad):
    with pytest.raises(DpfedInputError, match=r"values\[2\] must be finite"):
        encode(np.array([0.0, 1.0, bad]), n_summands=3)


@pytest.mark.parametrize("f", [-1, MAX_FRACTIONAL_BITS + 1, 2.5])
def test_fractional_bits_are_validated(f):
    with pytest.raises(DpfedInputError, match="fractional_bits"):
        encode(np.zeros(2), n_summands=1, fractional_bits=f)


def test_decode_needs_64_bit_integers():
    with pytest.raises(DpfedInputError, match="uint64 or int64"):
        decode(np.zeros(3))
