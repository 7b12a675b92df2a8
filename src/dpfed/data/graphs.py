"""Communication graphs for decentralized learning: nodes ``0 .. n-1``, always connected.

:func:`make_graph` builds one of the standard topologies of :data:`GRAPHS`,
:func:`graph_from_edges` takes an explicit edge list, and :func:`neighbours` gives the
neighbour lists ``N_p`` a node works with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from dpfed._lazy import lazy_module
from dpfed._validation import DpfedInputError, check_int, check_positive

if TYPE_CHECKING:
    import networkx as nx
else:  # a tenth of a second to import: on first use (dpfed._lazy)
    nx = lazy_module("networkx")

#: The kinds :func:`make_graph` builds.
GRAPHS: tuple[str, ...] = ("ring", "grid", "complete", "erdos-renyi", "geometric")

#: Target expected number of isolated nodes for the default Erdos-Renyi edge probability.
_ISOLATED = 0.01


def _check_graph_args(kind: str, n_nodes: int, p: float | None, radius: float | None) -> int:
    """Check ``kind``, the number of nodes and that ``p`` / ``radius`` suit the kind; ``n``."""
    if not isinstance(kind, str) or kind not in GRAPHS:
        raise DpfedInputError(f"kind must be one of {', '.join(GRAPHS)}. Found {kind!r}.")
    n = check_int("n_nodes", n_nodes, minimum=2)
    if p is not None and kind != "erdos-renyi":
        raise DpfedInputError(
            f"p is only used by the 'erdos-renyi' graph. Found p={p!r} with kind {kind!r}."
        )
    if radius is not None and kind != "geometric":
        raise DpfedInputError(
            f"radius is only used by the 'geometric' graph. Found radius={radius!r} with kind "
            f"{kind!r}."
        )
    return n


def _build_graph(
    kind: str, n: int, generator: np.random.Generator, p: float | None, radius: float | None
) -> nx.Graph:
    """The graph of ``kind`` on ``n`` nodes (a random kind draws its seed from
    ``generator``), with its ``kind``, ``shape``, ``p`` or ``radius`` attributes."""
    if kind == "ring":
        if n < 3:
            raise DpfedInputError(
                f"a ring needs n_nodes >= 3 (on 2 nodes it would be a single edge; use "
                f"'complete'). Found {n}."
            )
        graph = nx.cycle_graph(n)
    elif kind == "grid":
        rows = max(k for k in range(1, math.isqrt(n) + 1) if n % k == 0)
        cols = n // rows
        grid = nx.grid_2d_graph(rows, cols)
        graph = nx.relabel_nodes(grid, {(r, c): r * cols + c for r, c in grid.nodes})
        graph.graph["shape"] = (rows, cols)
    elif kind == "complete":
        graph = nx.complete_graph(n)
    elif kind == "erdos-renyi":
        prob = _default_p(n) if p is None else _check_probability(p)
        graph = nx.gnp_random_graph(n, prob, seed=_seed(generator))
        graph.graph["p"] = prob
    else:
        if radius is None:
            r = _default_radius(n)
        else:
            r = check_positive("radius", radius, allow_zero=True)
        graph = nx.random_geometric_graph(n, r, seed=_seed(generator))
        graph.graph["radius"] = r
    graph.graph["kind"] = kind
    return graph


def _check_connected(graph: nx.Graph, kind: str, n: int) -> None:
    """Refuse a disconnected random graph, naming its ``p`` or ``radius``."""
    components = nx.number_connected_components(graph)
    if components > 1:
        if kind == "erdos-renyi":
            what, fix = f"p={graph.graph['p']:.6g}", "a larger p"
        else:
            what, fix = f"radius={graph.graph['radius']:.6g}", "a larger radius"
        raise DpfedInputError(
            f"the {kind!r} graph on {n} nodes with {what} is disconnected ({components} "
            f"connected components); decentralized learning needs a connected graph. Use "
            f"{fix} or another seed (rng)."
        )


def make_graph(
    kind: str,
    n_nodes: int,
    *,
    rng: np.random.Generator | int | None = None,
    p: float | None = None,
    radius: float | None = None,
) -> nx.Graph:
    """Build a connected undirected graph on the nodes ``0 .. n_nodes - 1``.

    Parameters
    ----------
    kind : str
        One of :data:`GRAPHS`:

        * ``"ring"``: the cycle ``0 - 1 - ... - (n-1) - 0``; every node has degree 2.
          Needs ``n_nodes >= 3``.
        * ``"grid"``: the most square 2-D grid with exactly ``n_nodes`` nodes, ``rows x cols``
          with ``rows`` the largest divisor of ``n_nodes`` that is ``<= sqrt(n_nodes)``;
          node ``r * cols + c`` sits in row ``r``, column ``c`` and is joined to its
          horizontal and vertical neighbours. A prime ``n_nodes`` gives a ``1 x n`` grid,
          which is a path.
        * ``"complete"``: every pair of nodes joined; degree ``n_nodes - 1``.
        * ``"erdos-renyi"``: every pair joined independently with probability ``p``.
        * ``"geometric"``: random geometric graph: nodes placed uniformly in the unit
          square (node attribute ``"pos"``), joined when their distance is ``<= radius``.
    n_nodes : int
        Number of nodes, >= 2 (>= 3 for a ring).
    rng : numpy.random.Generator or int or None, default None
        Randomness of ``"erdos-renyi"`` and ``"geometric"`` (ignored by the other kinds):
        one integer seed for networkx is drawn from it. A generator is used and advanced,
        an integer seeds ``numpy.random.default_rng`` (same seed, same graph), ``None``
        draws from a fresh unseeded generator.
    p : float, optional
        Edge probability of ``"erdos-renyi"``, in [0, 1]. Default: the smallest ``p`` with
        an expected number of isolated nodes ``n (1 - p)^(n - 1)`` of 0.01, so the graph is
        connected with probability about 0.99 (about ``(ln n + ln 100) / n`` for large n;
        0.54 for 10 nodes, 0.089 for 100).
    radius : float, optional
        Connection radius of ``"geometric"``, >= 0. Default:
        ``min(sqrt(2), sqrt((ln n + ln 100) / n))`` (0.83 for 10 nodes, 0.30 for 100),
        which gave a connected graph in over 99 % of seeds for every n from 2 to 500.

    Returns
    -------
    networkx.Graph
        Undirected, connected, without self loops, nodes ``0 .. n_nodes - 1``;
        ``graph.graph["kind"]`` holds ``kind``, ``graph.graph["shape"]`` the
        ``(rows, cols)`` of a grid, and ``graph.graph["p"]`` or ``graph.graph["radius"]``
        the value used for the random kinds.

    Raises
    ------
    DpfedInputError
        If ``kind`` is unknown, ``n_nodes`` is too small, ``p`` or ``radius`` is out of
        range or given for a kind that does not use it, ``rng`` is not a generator, an
        integer seed or ``None``, or the random graph drawn is disconnected (the message
        gives the number of components and suggests a larger ``p`` / ``radius`` or another
        seed).
    """
    n = _check_graph_args(kind, n_nodes, p, radius)
    generator = _as_generator(rng)
    out = _sorted_copy(_build_graph(kind, n, generator, p, radius), n)
    _check_connected(out, kind, n)
    return out


def graph_from_edges(n_nodes: int, edges: Iterable[tuple[int, int]]) -> nx.Graph:
    """A connected undirected graph on ``0 .. n_nodes - 1`` from an edge list.

    Parameters
    ----------
    n_nodes : int
        Number of nodes, >= 2.
    edges : iterable of (int, int), or numpy.ndarray of shape (n_edges, 2)
        Undirected edges ``(u, v)`` with ``0 <= u, v < n_nodes`` and ``u != v``. An edge
        given twice (also as ``(v, u)``) counts once.

    Returns
    -------
    networkx.Graph
        Nodes ``0 .. n_nodes - 1`` (in that order) and the given edges.

    Raises
    ------
    DpfedInputError
        If ``n_nodes`` is not an integer >= 2, an edge is not a pair of integers, names an
        unknown node or is a self loop, or the graph is disconnected (the message names the
        number of components and a node that cannot be reached from node 0).
    """
    n = check_int("n_nodes", n_nodes, minimum=2)
    if isinstance(edges, str | bytes) or not isinstance(edges, Iterable | np.ndarray):
        raise DpfedInputError(f"edges must be an iterable of (u, v) pairs. Found {edges!r}.")
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    for k, edge in enumerate(edges):
        pair = _check_edge(k, edge, n)
        graph.add_edge(*pair)
    components = nx.number_connected_components(graph)
    if components > 1:
        reached = nx.node_connected_component(graph, 0)
        lost = min(set(range(n)) - reached)
        raise DpfedInputError(
            f"the graph on {n} nodes with {graph.number_of_edges()} edges is disconnected "
            f"({components} connected components; node {lost} cannot be reached from node 0). "
            "Decentralized learning needs a connected graph; add edges."
        )
    return graph


def neighbours(graph: nx.Graph) -> dict[int, list[int]]:
    """The sorted neighbour list of every node.

    Parameters
    ----------
    graph : networkx.Graph
        Undirected graph with integer nodes (as built by :func:`make_graph` or
        :func:`graph_from_edges`).

    Returns
    -------
    dict of int to list of int
        ``{node: sorted neighbours}`` for every node in increasing order; a self loop, if
        any, is left out. Symmetric: ``v in result[u]`` exactly when ``u in result[v]``.

    Raises
    ------
    DpfedInputError
        If ``graph`` is not an undirected networkx graph or a node is not an integer.
    """
    if not isinstance(graph, nx.Graph) or graph.is_directed():
        raise DpfedInputError(
            f"graph must be an undirected networkx.Graph. Found {type(graph).__name__}."
        )
    for node in graph.nodes:
        if isinstance(node, bool) or not isinstance(node, int | np.integer):
            raise DpfedInputError(f"graph nodes must be integers. Found node {node!r}.")
    return {
        int(u): sorted(int(v) for v in graph.neighbors(u) if v != u) for u in sorted(graph.nodes)
    }


def _as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, int | np.integer) and not isinstance(rng, bool):
        if rng < 0:
            raise DpfedInputError(f"rng must be a seed >= 0 when given as an integer. Found {rng}.")
        return np.random.default_rng(int(rng))
    raise DpfedInputError(
        f"rng must be a numpy.random.Generator, an integer seed or None. Found {rng!r}."
    )


def _seed(generator: np.random.Generator) -> int:
    return int(generator.integers(2**32))


def _default_p(n: int) -> float:
    """Smallest p with ``n (1 - p)^(n - 1) == _ISOLATED`` (expected isolated nodes)."""
    return 1.0 - (_ISOLATED / n) ** (1.0 / (n - 1))


def _default_radius(n: int) -> float:
    return min(math.sqrt(2.0), math.sqrt((math.log(n) + math.log(1.0 / _ISOLATED)) / n))


def _check_probability(p: float) -> float:
    try:
        value = float(p)
    except (TypeError, ValueError):
        raise DpfedInputError(f"p must be a number in [0, 1]. Found {p!r}.") from None
    if isinstance(p, bool) or not 0.0 <= value <= 1.0:
        raise DpfedInputError(f"p must be a number in [0, 1]. Found {p!r}.")
    return value


def _sorted_copy(graph: nx.Graph, n: int) -> nx.Graph:
    """Copy of ``graph`` with nodes inserted in the order ``0 .. n - 1``."""
    out = nx.Graph(**graph.graph)
    out.add_nodes_from((v, graph.nodes[v]) for v in range(n))
    out.add_edges_from(graph.edges)
    return out


def _check_edge(k: int, edge: object, n: int) -> tuple[int, int]:
    try:
        pair = tuple(edge)  # type: ignore[call-overload]
    except TypeError:
        pair = ()
    if len(pair) != 2 or any(
        isinstance(v, bool) or not isinstance(v, int | np.integer) for v in pair
    ):
        raise DpfedInputError(
            f"edges[{k}] must be a pair of integer node ids (u, v). Found {edge!r}."
        )
    u, v = int(pair[0]), int(pair[1])
    for node in (u, v):
        if not 0 <= node < n:
            raise DpfedInputError(
                f"edges[{k}] = ({u}, {v}) names node {node}, which does not exist. Expected "
                f"nodes 0 .. {n - 1}."
            )
    if u == v:
        raise DpfedInputError(
            f"edges[{k}] = ({u}, {v}) is a self loop. Expected two different nodes."
        )
    return u, v
