"""Client vectors as arrays, block callables or iterables of blocks."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.dca.source import ClientSource
from dpfed.dca.synthetic import UniformClients

Z = np.arange(21.0).reshape(7, 3)


def _collect(source, block_size, start=0, stop=None):
    firsts, blocks = [], []
    for first, block in source.blocks(block_size, start, stop):
        firsts.append(first)
        blocks.append(np.array(block))
    return firsts, np.concatenate(blocks)


def test_the_three_forms_give_the_same_rows():
    for source in (
        ClientSource(Z),
        ClientSource(lambda a, b: Z[a:b], n_clients=7, dim=3),
        ClientSource(iter([Z[:2], Z[2:6], Z[6:]]), n_clients=7),
    ):
        firsts, rows = _collect(source, 3)
        np.testing.assert_array_equal(rows, Z)
        assert firsts[0] == 0 and source.n_clients == 7 and source.dim == 3


def test_parts_keep_global_indices():
    part = ClientSource(Z).part(2, 6)
    firsts, rows = _collect(part, 3, 2, 6)
    assert firsts == [2, 5]
    np.testing.assert_array_equal(rows, Z[2:6])


def test_iterables_must_add_up_to_n_clients():
    with pytest.raises(DpfedInputError, match="yielded 5 rows"):
        _collect(ClientSource(iter([Z[:5]]), n_clients=7), 4)
    with pytest.raises(DpfedInputError, match="more than n_clients"):
        _collect(ClientSource(iter([Z, Z]), n_clients=7), 4)
    with pytest.raises(DpfedInputError, match="shape"):
        _collect(ClientSource(iter([Z, np.zeros((2, 4))]), n_clients=9), 4)


def test_callables_must_return_the_asked_shape():
    source = ClientSource(lambda a, b: np.zeros((b - a, 2)), n_clients=4, dim=3)
    with pytest.raises(DpfedInputError, match=r"values\(0, 4\) must have shape \(4, 3\)"):
        _collect(source, 8)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"values": np.zeros((0, 3))}, "N, D >= 1"),
        ({"values": Z, "n_clients": 6}, "n_clients = 6"),
        ({"values": lambda a, b: Z}, "n_clients is needed"),
        ({"values": lambda a, b: Z, "n_clients": 7}, "dim is needed"),
        ({"values": 3.0, "n_clients": 7}, "must be an"),
    ],
)
def test_bad_sources_are_refused(kwargs, match):
    with pytest.raises(DpfedInputError, match=match):
        ClientSource(**kwargs)


def test_uniform_clients_are_bounded_and_reproducible():
    src = UniformClients(5, bound=2.0, seed=3)
    block = src(10, 30)
    assert block.shape == (20, 5) and np.all(np.abs(block) <= 2.0)
    np.testing.assert_array_equal(block, UniformClients(5, bound=2.0, seed=3)(10, 30))
