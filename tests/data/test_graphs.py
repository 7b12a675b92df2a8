"""Communication graphs: make_graph, graph_from_edges, neighbours."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.data import GRAPHS, graph_from_edges, make_graph, neighbours


@pytest.mark.parametrize("kind", GRAPHS)
@pytest.mark.parametrize("n", [3, 4, 7, 12, 30])
def test_every_kind_is_connected_on_0_to_n(kind: str, n: int) -> None:
    graph = make_graph(kind, n, rng=0)
    assert list(graph.nodes) == list(range(n))
    assert nx.is_connected(graph) and not graph.is_directed()
    assert nx.number_of_selfloops(graph) == 0
    assert graph.graph["kind"] == kind


@pytest.mark.parametrize("kind", ["grid", "complete", "erdos-renyi", "geometric"])
def test_two_nodes(kind: str) -> None:
    graph = make_graph(kind, 2, rng=1)
    assert sorted(graph.edges) == [(0, 1)]


def test_ring_and_complete_degrees() -> None:
    ring = make_graph("ring", 9)
    assert all(d == 2 for _, d in ring.degree)
    assert neighbours(ring)[0] == [1, 8]
    complete = make_graph("complete", 6)
    assert all(d == 5 for _, d in complete.degree)
    assert complete.number_of_edges() == 15


@pytest.mark.parametrize(("n", "shape"), [(12, (3, 4)), (16, (4, 4)), (7, (1, 7)), (18, (3, 6))])
def test_grid_shape(n: int, shape: tuple[int, int]) -> None:
    graph = make_graph("grid", n)
    rows, cols = shape
    assert graph.graph["shape"] == shape
    assert graph.number_of_edges() == rows * (cols - 1) + cols * (rows - 1)
    if rows > 1:  # node r * cols + c is joined to the node below it
        assert graph.has_edge(0, cols) and graph.has_edge(cols - 1, cols - 1 + cols)
    assert not graph.has_edge(cols - 1, cols)  # rows do not wrap around


def test_neighbours_symmetric_and_sorted() -> None:
    graph = make_graph("erdos-renyi", 25, rng=3)
    nbrs = neighbours(graph)
    assert list(nbrs) == list(range(25))
    for u, vs in nbrs.items():
        assert vs == sorted(vs) and u not in vs
        assert all(u in nbrs[v] for v in vs)
    assert sum(len(vs) for vs in nbrs.values()) == 2 * graph.number_of_edges()


@pytest.mark.parametrize("kind", ["erdos-renyi", "geometric"])
def test_random_kinds_are_reproducible(kind: str) -> None:
    a, b = make_graph(kind, 20, rng=5), make_graph(kind, 20, rng=np.random.default_rng(5))
    assert sorted(a.edges) == sorted(b.edges)
    others = [sorted(make_graph(kind, 20, rng=s).edges) for s in range(6, 9)]
    assert any(edges != sorted(a.edges) for edges in others)
    gen = np.random.default_rng(0)
    first, second = make_graph(kind, 20, rng=gen), make_graph(kind, 20, rng=gen)
    assert sorted(first.edges) != sorted(second.edges)  # the generator advances


def test_defaults_and_parameters_recorded() -> None:
    er = make_graph("erdos-renyi", 100, rng=0)
    assert er.graph["p"] == pytest.approx(0.089, abs=0.001)
    geo = make_graph("geometric", 100, rng=0)
    assert geo.graph["radius"] == pytest.approx(0.303, abs=0.001)
    assert len(geo.nodes[0]["pos"]) == 2
    assert make_graph("erdos-renyi", 10, rng=0, p=1.0).number_of_edges() == 45


@pytest.mark.parametrize(
    ("kind", "kwargs", "match"),
    [
        ("erdos-renyi", {"p": 0.0}, r"'erdos-renyi' graph on 10 nodes with p=0 .*10 connected "),
        ("geometric", {"radius": 0.01}, r"radius=0.01 is disconnected .*larger radius"),
    ],
)
def test_disconnected_graphs_refused(kind: str, kwargs: dict, match: str) -> None:
    with pytest.raises(DpfedInputError, match=match) as info:
        make_graph(kind, 10, rng=0, **kwargs)
    assert "seed" in str(info.value)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("star", 5), {}, r"kind must be one of ring, grid, complete.*'star'"),
        (("ring", 2), {}, r"ring needs n_nodes >= 3.*Found 2"),
        (("complete", 1), {}, r"n_nodes must be an integer >= 2"),
        (("ring", 5), {"p": 0.5}, r"p is only used by the 'erdos-renyi'"),
        (("complete", 5), {"radius": 0.5}, r"radius is only used by the 'geometric'"),
        (("erdos-renyi", 5), {"p": 1.5}, r"p must be a number in \[0, 1\]. Found 1.5"),
        (("geometric", 5), {"radius": -1}, r"radius must be a finite number >= 0"),
        (("erdos-renyi", 5), {"rng": "seed"}, r"rng must be a numpy.random.Generator"),
        (("erdos-renyi", 5), {"rng": -3}, r"rng must be a seed >= 0"),
    ],
)
def test_make_graph_errors(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(DpfedInputError, match=match):
        make_graph(*args, **kwargs)


def test_graph_from_edges() -> None:
    graph = graph_from_edges(4, [(0, 1), (2, 1), (3, 2), (1, 0)])
    assert list(graph.nodes) == [0, 1, 2, 3] and graph.number_of_edges() == 3
    assert neighbours(graph) == {0: [1], 1: [0, 2], 2: [1, 3], 3: [2]}
    same = graph_from_edges(4, np.array([[0, 1], [1, 2], [2, 3]]))
    assert sorted(same.edges) == sorted(graph.edges)


@pytest.mark.parametrize(
    ("n", "edges", "match"),
    [
        (4, [(0, 1), (2, 3)], r"disconnected \(2 connected components; node 2 cannot be reached"),
        (3, [(0, 1), (1, 1), (1, 2)], r"edges\[1\] = \(1, 1\) is a self loop"),
        (3, [(0, 1), (1, 3)], r"edges\[1\] = \(1, 3\) names node 3.*nodes 0 \.\. 2"),
        (3, [(0, -1)], r"names node -1"),
        (3, [(0, 1, 2)], r"edges\[0\] must be a pair"),
        (3, [(0, 1.5)], r"edges\[0\] must be a pair of integer"),
        (3, [7], r"edges\[0\] must be a pair"),
        (3, "01", r"edges must be an iterable"),
        (1, [], r"n_nodes must be an integer >= 2"),
    ],
)
def test_graph_from_edges_errors(n: int, edges: object, match: str) -> None:
    with pytest.raises(DpfedInputError, match=match):
        graph_from_edges(n, edges)  # type: ignore[arg-type]


def test_neighbours_rejects_non_graphs() -> None:
    with pytest.raises(DpfedInputError, match=r"undirected networkx\.Graph"):
        neighbours(nx.DiGraph([(0, 1)]))
    with pytest.raises(DpfedInputError, match=r"undirected networkx\.Graph"):
        neighbours({0: [1]})  # type: ignore[arg-type]
    with pytest.raises(DpfedInputError, match="nodes must be integers"):
        neighbours(nx.Graph([("a", "b")]))
