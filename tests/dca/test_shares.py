"""Additive secret sharing modulo 2^64: exact reconstruction, uniform single views."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpfed import DpfedInputError
from dpfed.dca.fixedpoint import encode, max_encoded
from dpfed.dca.keystream import MaskStream
from dpfed.dca.shares import mask_offset, mask_words, reconstruct, split_shares

KEY = bytes(range(100, 132))


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 6),
    m=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_shares_reconstruct_each_vector_and_the_exact_sum(n, d, m, seed, data):
    limit = max_encoded(n)
    q = np.array(
        data.draw(st.lists(st.integers(-limit, limit), min_size=n * d, max_size=n * d)),
        dtype=object,
    ).reshape(n, d)
    encoded = np.array([[int(v) % 2**64 for v in row] for row in q], dtype=np.uint64)
    masks = mask_words(MaskStream(seed.to_bytes(32, "little")), 0, n, m, d)
    messages = split_shares(encoded, masks)
    assert messages.shape == (n, m, d)
    np.testing.assert_array_equal(reconstruct(messages), encoded)
    node_sums = messages.sum(axis=0, dtype=np.uint64)  # what each node publishes
    total = node_sums.sum(axis=0, dtype=np.uint64)
    expected = [sum(int(v) for v in q[:, j]) for j in range(d)]
    assert [int(t) if int(t) < 2**63 else int(t) - 2**64 for t in total] == expected


def test_masks_of_a_client_do_not_depend_on_its_block():
    stream = MaskStream(KEY)
    whole = mask_words(stream, 0, 10, 4, 7)
    np.testing.assert_array_equal(mask_words(stream, 3, 5, 4, 7), whole[3:8])
    assert mask_offset(3, 4, 7) == 3 * 3 * 7


def _top_byte_uniform(words: np.ndarray) -> float:
    counts = np.bincount((words >> np.uint64(56)).astype(np.int64), minlength=256)
    return stats.chisquare(counts).pvalue


@pytest.mark.parametrize("value", [0.0, 3.5, -1234.5])
def test_one_nodes_view_is_uniform_whatever_the_input(value):
    n, m, d = 4000, 3, 16
    encoded = encode(np.full((n, d), value), n_summands=n)
    messages = split_shares(encoded, mask_words(MaskStream(KEY), 0, n, m, d))
    for k in range(m):
        view = messages[:, k].reshape(-1)
        # the input is constant, so any leak of it would show as a non-uniform top byte
        assert _top_byte_uniform(view) > 1e-4, (value, k)
        bits = np.unpackbits(view.view(np.uint8)).reshape(-1, 64).mean(axis=0)
        assert np.all(np.abs(bits - 0.5) < 0.02), (value, k)
    # the same test does detect an unmasked message
    assert _top_byte_uniform(encoded.reshape(-1)) < 1e-10


def test_node_views_for_two_inputs_are_indistinguishable():
    n, m, d = 3000, 2, 8
    views = []
    for value, key in ((0.0, KEY), (1000.0, bytes(32))):
        encoded = encode(np.full((n, d), value), n_summands=n)
        messages = split_shares(encoded, mask_words(MaskStream(key), 0, n, m, d))
        views.append((messages[:, 0].reshape(-1) >> np.uint64(40)).astype(np.float64))
    assert stats.ks_2samp(views[0], views[1]).pvalue > 1e-4


def test_one_compute_node_receives_the_encoded_vector():
    encoded = np.arange(6, dtype=np.uint64).reshape(2, 3)
    messages = split_shares(encoded, np.empty((2, 0, 3), dtype=np.uint64))
    np.testing.assert_array_equal(messages[:, 0], encoded)


def test_shapes_and_dtypes_are_checked():
    with pytest.raises(DpfedInputError, match="uint64"):
        split_shares(np.zeros((2, 3)), np.zeros((2, 1, 3), dtype=np.uint64))
    with pytest.raises(DpfedInputError, match=r"\(B, M-1, D\)"):
        split_shares(np.zeros((2, 3), dtype=np.uint64), np.zeros((2, 1, 4), dtype=np.uint64))
