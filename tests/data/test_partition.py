"""Vertical partitioning: parse_split, even_split and vertical_split."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfed import DpfedInputError
from dpfed.data import even_split, parse_split, vertical_split


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
