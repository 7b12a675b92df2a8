"""Partitioning: parse_split, even_split, vertical_split and horizontal_split."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfed import DpfedInputError
from dpfed.data import even_split, horizontal_split, parse_split, vertical_split


@pytest.mark.parametrize(
    ("text", "expected"),
    [("66,57", [66, 57]), (" 1, 2 ,3 ", [1, 2, 3]), ("123", [123])],
)
def test_parse_split(text: str, expected: list[int]) -> None:
    assert parse_split(text) == expected


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "at least one"),
        ("   ", "at least one"),
        ("66,,57", "empty part at position 2"),
        ("66,", "empty part at position 2"),
        ("66,abc", "'abc' at position 2, which is not an integer"),
        ("66,5.5", "'5.5' at position 2"),
        ("0,123", "0 at position 1"),
        ("66,-3", "-3 at position 2"),
    ],
)
def test_parse_split_errors(text: str, match: str) -> None:
    with pytest.raises(DpfedInputError, match=match):
        parse_split(text)


def test_parse_split_rejects_non_string() -> None:
    with pytest.raises(DpfedInputError, match="string"):
        parse_split([66, 57])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("n", "parties", "expected"),
    [(123, 2, [62, 61]), (10, 3, [4, 3, 3]), (5, 5, [1] * 5), (7, 1, [7])],
)
def test_even_split(n: int, parties: int, expected: list[int]) -> None:
    assert even_split(n, parties) == expected


@pytest.mark.parametrize(
    ("n", "parties", "match"),
    [(3, 4, "parties must be <= the feature count 3"), (0, 1, "n_features"), (5, 0, "parties")],
)
def test_even_split_errors(n: int, parties: int, match: str) -> None:
    with pytest.raises(DpfedInputError, match=match):
        even_split(n, parties)


def test_vertical_split_dense_blocks_are_contiguous_copies() -> None:
    X = np.arange(24, dtype=float).reshape(4, 6)
    blocks = vertical_split(X, [2, 3, 1])
    assert [b.shape for b in blocks] == [(4, 2), (4, 3), (4, 1)]
    np.testing.assert_array_equal(blocks[1], X[:, 2:5])
    assert all(isinstance(b, np.ndarray) and b.flags.c_contiguous for b in blocks)
    blocks[0][0, 0] = -1.0
    assert X[0, 0] == 0.0


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_vertical_split_sparse_gives_csr(fmt: str) -> None:
    X = sp.random(5, 7, density=0.5, format=fmt, random_state=np.random.default_rng(0))
    blocks = vertical_split(X, [3, 4])
    assert all(sp.issparse(b) and b.format == "csr" for b in blocks)
    np.testing.assert_array_equal(sp.hstack(blocks).toarray(), X.toarray())


def test_vertical_split_wrong_sum_message() -> None:
    X = sp.csr_matrix((3, 123))
    with pytest.raises(
        DpfedInputError, match="split 66,50 sums to 116 but the data has 123 features"
    ):
        vertical_split(X, [66, 50])


@pytest.mark.parametrize(
    ("split", "match"),
    [([3, 0], r"split\[1\]"), ([], "at least one"), ("3,3", "sequence"), ([2.5, 3.5], "integer")],
)
def test_vertical_split_bad_split(split: object, match: str) -> None:
    with pytest.raises(DpfedInputError, match=match):
        vertical_split(np.zeros((2, 6)), split)  # type: ignore[arg-type]


def test_vertical_split_needs_2d() -> None:
    with pytest.raises(DpfedInputError, match=r"2-D.*\(5,\)"):
        vertical_split(np.zeros(5), [5])


@st.composite
def _matrix_and_split(draw: st.DrawFn) -> tuple[np.ndarray, list[int], bool]:
    widths = draw(st.lists(st.integers(1, 5), min_size=1, max_size=5))
    rows = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    sparse = draw(st.booleans())
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, sum(widths))) * (rng.random((rows, sum(widths))) < 0.5)
    return X, widths, sparse


@settings(max_examples=60, deadline=None)
@given(_matrix_and_split())
def test_vertical_split_blocks_hstack_back(case: tuple[np.ndarray, list[int], bool]) -> None:
    X, widths, sparse = case
    blocks = vertical_split(sp.csr_matrix(X) if sparse else X, widths)
    assert [b.shape[1] for b in blocks] == widths
    back = sp.hstack(blocks).toarray() if sparse else np.hstack(blocks)
    np.testing.assert_array_equal(back, X)


# --- horizontal_split ------------------------------------------------------------------


def _assert_partition(parts: list[np.ndarray], n: int) -> None:
    assert all(p.dtype == np.int64 and p.ndim == 1 and p.size >= 1 for p in parts)
    assert all(np.all(np.diff(p) > 0) for p in parts)  # sorted, no repeats
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(n))


def test_horizontal_split_default_is_contiguous_and_even() -> None:
    parts = horizontal_split(7, 3)
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4], [5, 6]]
    assert [p.size for p in horizontal_split(10, 4)] == even_split(10, 4)
    assert [p.tolist() for p in horizontal_split(3, 1)] == [[0, 1, 2]]


def test_horizontal_split_seeded_is_random_and_reproducible() -> None:
    a = horizontal_split(100, 4, rng=7)
    b = horizontal_split(100, 4, rng=np.random.default_rng(7))
    _assert_partition(a, 100)
    assert [p.size for p in a] == [25] * 4
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], np.arange(25))
    c = horizontal_split(100, 4, rng=8)
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_horizontal_split_sizes() -> None:
    parts = horizontal_split(10, 3, sizes=[1, 6, 3])
    assert [p.tolist() for p in parts] == [[0], [1, 2, 3, 4, 5, 6], [7, 8, 9]]
    shuffled = horizontal_split(10, 3, sizes=np.array([1, 6, 3]), rng=0)
    _assert_partition(shuffled, 10)
    assert [p.size for p in shuffled] == [1, 6, 3]


def test_horizontal_split_uneven() -> None:
    parts = horizontal_split(1000, 5, uneven=0.5, rng=1)
    _assert_partition(parts, 1000)
    sizes = [p.size for p in parts]
    assert len(set(sizes)) > 1 and min(sizes) >= 1
    again = horizontal_split(1000, 5, uneven=0.5, rng=1)
    assert [p.size for p in again] == sizes
    # A tiny concentration piles the rows on one part; every part still gets a row.
    extreme = [p.size for p in horizontal_split(50, 10, uneven=1e-3, rng=2)]
    assert min(extreme) >= 1 and sum(extreme) == 50
    # A large one gives nearly even parts; n == parts gives one row each.
    near = [p.size for p in horizontal_split(1000, 4, uneven=1e6, rng=3)]
    assert max(near) - min(near) <= 5
    assert [p.size for p in horizontal_split(4, 4, uneven=0.1, rng=4)] == [1] * 4
    _assert_partition(horizontal_split(30, 3, uneven=1.0), 30)  # rng=None: unseeded


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))),
    st.sampled_from([None, 0.3, 5.0]),
    st.integers(0, 2**32 - 1),
)
def test_horizontal_split_always_partitions(
    n_parts: tuple[int, int], uneven: float | None, seed: int
) -> None:
    n, parts = n_parts
    result = horizontal_split(n, parts, uneven=uneven, rng=seed)
    assert len(result) == parts
    _assert_partition(result, n)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((10, 0), {}, r"parts must be an integer >= 1. Found 0"),
        ((0, 1), {}, r"n_samples must be an integer >= 1"),
        ((3, 4), {}, r"parts must be <= n_samples = 3 .*Found 4"),
        ((10, 2), {"sizes": [4, 5]}, r"sizes 4,5 sum to 9. Expected them to sum to n_samples = 10"),
        ((10, 2), {"sizes": [10, 0]}, r"sizes\[1\] must be an integer >= 1. Found 0"),
        ((10, 3), {"sizes": [5, 5]}, r"one size per part \(3 parts\). Found 2 sizes"),
        ((10, 2), {"sizes": "55"}, r"sizes must be a sequence"),
        ((10, 2), {"sizes": [5, 5], "uneven": 1.0}, r"either sizes or uneven, not both"),
        ((10, 2), {"uneven": 0.0}, r"uneven must be a finite number > 0. Found 0.0"),
        ((10, 2), {"uneven": float("nan")}, r"uneven must be a finite number > 0"),
        ((10, 2), {"rng": 1.5}, r"rng must be a numpy.random.Generator, an integer seed"),
        ((10, 2), {"rng": -1}, r"rng must be a seed >= 0"),
    ],
)
def test_horizontal_split_errors(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(DpfedInputError, match=match):
        horizontal_split(*args, **kwargs)
