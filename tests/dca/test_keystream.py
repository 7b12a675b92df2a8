"""The AES-256-CTR mask stream: reproducible ranges, uniform words, secret keys."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from scipy import stats

from dpfed import DpfedInputError
from dpfed.dca.keystream import MaskStream

KEY = bytes(range(32))


def _ctr(segment: int, nbytes: int) -> bytes:
    counter = segment.to_bytes(12, "big") + (2).to_bytes(4, "big")
    return Cipher(algorithms.AES(KEY), modes.CTR(counter)).encryptor().update(bytes(nbytes))


def test_words_are_aes_256_counter_mode_by_segment():
    segment = 1 << 17  # words per 1 MiB segment
    words = MaskStream(KEY).words(2 * segment + 100)
    assert words[:100].tobytes() == _ctr(0, 800)
    assert words[:segment].tobytes() == _ctr(0, 1 << 20)
    assert words[segment : 2 * segment].tobytes() == _ctr(1, 1 << 20)
    assert words[2 * segment :].tobytes() == _ctr(2, 800)


def test_ranges_across_segment_boundaries():
    segment = 1 << 17
    whole = MaskStream(KEY).words(3 * segment)
    for offset, count in ((segment - 3, 7), (segment + 1, segment), (5, 2 * segment), (0, 1)):
        np.testing.assert_array_equal(
            MaskStream(KEY, chunk_bytes=4096).words(count, offset), whole[offset : offset + count]
        )


@pytest.mark.parametrize("offset", [0, 1, 2, 7, 37, 1000])
@pytest.mark.parametrize("count", [1, 2, 3, 31, 500])
def test_any_range_equals_the_slice_of_the_whole_stream(offset, count):
    whole = MaskStream(KEY).words(2000)
    part = MaskStream(KEY).words(count, offset)
    np.testing.assert_array_equal(part, whole[offset : offset + count])


@pytest.mark.parametrize("chunk", [16, 48, 4096])
def test_the_chunk_size_does_not_change_the_stream(chunk):
    np.testing.assert_array_equal(
        MaskStream(KEY, chunk_bytes=chunk).words(1001, 3), MaskStream(KEY).words(1001, 3)
    )


def test_fill_writes_multidimensional_arrays_in_c_order():
    out = np.empty((3, 4, 5), dtype=np.uint64)
    MaskStream(KEY).fill(out, 11)
    np.testing.assert_array_equal(out.reshape(-1), MaskStream(KEY).words(60, 11))


def test_bytes_are_uniform():
    words = MaskStream(KEY).words(1 << 17)
    counts = np.bincount(words.view(np.uint8), minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-4
    bits = np.unpackbits(words.view(np.uint8)).reshape(-1, 64).mean(axis=0)
    # 2^17 samples per bit position: standard error 0.0014
    assert np.all(np.abs(bits - 0.5) < 0.01)


def test_fresh_streams_have_fresh_keys():
    assert not np.array_equal(MaskStream().words(4), MaskStream().words(4))


def test_key_is_validated_and_not_shown():
    with pytest.raises(DpfedInputError, match="32 bytes"):
        MaskStream(b"short")
    assert KEY.hex() not in repr(MaskStream(KEY))


def test_pickling_keeps_the_stream():
    s = pickle.loads(pickle.dumps(MaskStream(KEY, chunk_bytes=64)))
    np.testing.assert_array_equal(s.words(50, 5), MaskStream(KEY).words(50, 5))


def test_fill_refuses_other_arrays():
    with pytest.raises(DpfedInputError, match="uint64"):
        MaskStream(KEY).fill(np.empty(4))
    with pytest.raises(DpfedInputError, match="C-contiguous"):
        MaskStream(KEY).fill(np.empty((4, 4), dtype=np.uint64)[:, ::2])
