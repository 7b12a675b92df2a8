r"""Which clients to aggregate: the compute nodes' agreement after dropouts.

The masks cancel only if every compute node sums over the **same** set of clients: if node 1
includes client :math:`i` and node 2 does not, :math:`r_{i,2}` is missing from the total and
the result is uniformly random garbage. Before summing, each node reports the set of clients
whose message it received (:func:`received_reports` simulates the reports), and the nodes
aggregate the intersection (:func:`agree_included`): the clients whose shares reached **all**
nodes. A client whose message reached only some nodes is dropped everywhere.

The privacy guarantee of the distributed Gaussian mechanism allows at most :math:`T`
clients to drop or collude (:mod:`dpfed.dca.calibration`), so :func:`check_dropouts` refuses to
continue when more than :math:`T` clients are missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from dpfed._validation import DpfedInputError, check_int

__all__ = ["DroppedSpec", "agree_included", "check_dropouts", "received_reports"]

#: Which clients' messages did not arrive: client indices (lost at every node), or a mapping
#: from client index to the nodes (0-based) that did not receive its message.
DroppedSpec = Iterable[int] | Mapping[int, Iterable[int]] | None


def _index(name: str, value, upper: int) -> int:
    i = check_int(name, value, minimum=0)
    if i >= upper:
        raise DpfedInputError(f"{name} must be < {upper}. Found {value!r}.")
    return i


def received_reports(n_clients: int, compute_nodes: int, dropped: DroppedSpec) -> np.ndarray:
    r"""Each node's report of the clients whose message it received (simulated arrivals).

    Parameters
    ----------
    n_clients : int
        :math:`N`.
    compute_nodes : int
        :math:`M`.
    dropped : iterable of int, mapping of int to iterable of int, or None
        Clients whose messages did not all arrive. A plain collection of client indices means
        their messages reached no node; a mapping ``{client: nodes}`` lists the (0-based)
        nodes that missed the client's message, the others received it. ``None``: every
        message arrived.

    Returns
    -------
    numpy.ndarray of bool, shape (M, N)
        ``reports[k, i]`` is True if node ``k`` received client ``i``'s message.

    Raises
    ------
    DpfedInputError
        If a client or node index is out of range.
    """
    n = check_int("n_clients", n_clients, minimum=1)
    m = check_int("compute_nodes", compute_nodes, minimum=1)
    reports = np.ones((m, n), dtype=bool)
    if dropped is None:
        return reports
    if isinstance(dropped, Mapping):
        for client, nodes in dropped.items():
            i = _index("dropped client", client, n)
            missing = [_index(f"node missing client {i}", k, m) for k in nodes]
            if not missing:
                raise DpfedInputError(
                    f"dropped[{i}] must list at least one node that missed the message. Found none."
                )
            reports[missing, i] = False
        return reports
    if isinstance(dropped, str | bytes):
        raise DpfedInputError(f"dropped must hold client indices. Found {dropped!r}.")
    for client in dropped:
        reports[:, _index("dropped client", client, n)] = False
    return reports


def agree_included(reports: np.ndarray) -> np.ndarray:
    r"""The agreed set of clients: those every node reports as received.

    .. math:: I = \bigcap_{k=1}^{M} R_k

    Parameters
    ----------
    reports : numpy.ndarray of bool, shape (M, N)
        Node ``k``'s report ``R_k`` as a mask over the clients.

    Returns
    -------
    numpy.ndarray of bool, shape (N,)
        True for the clients every node aggregates.
    """
    r = np.asarray(reports, dtype=bool)
    if r.ndim != 2 or r.shape[0] == 0:
        raise DpfedInputError(f"reports must be an (M, N) boolean array. Found shape {r.shape}.")
    return np.logical_and.reduce(r, axis=0)


def check_dropouts(included: np.ndarray, tolerated: int) -> np.ndarray:
    r"""Refuse the run if more than ``tolerated`` clients are missing from the agreed set.

    Parameters
    ----------
    included : numpy.ndarray of bool, shape (N,)
        The agreed set (:func:`agree_included`).
    tolerated : int
        :math:`T`, the number of dropped (or colluding) clients the noise calibration allows.

    Returns
    -------
    numpy.ndarray of int64
        The dropped client indices, sorted.

    Raises
    ------
    DpfedInputError
        If more than :math:`T` clients dropped, naming them (the first 10).
    """
    t = check_int("tolerated", tolerated, minimum=0)
    dropped = np.flatnonzero(~np.asarray(included, dtype=bool))
    if dropped.size > t:
        shown = ", ".join(str(int(i)) for i in dropped[:10])
        more = f" and {dropped.size - 10} more" if dropped.size > 10 else ""
        raise DpfedInputError(
            f"{dropped.size} clients' shares did not reach every compute node (clients "
            f"{shown}{more}), but the noise is calibrated for at most tolerated = {t} dropped "
            "or colluding clients: the released sum would not carry enough noise. Refusing "
            "to aggregate."
        )
    return dropped.astype(np.int64)
