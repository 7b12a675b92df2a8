r"""Additive secret sharing modulo :math:`2^{64}` (step 1-2 of the paper's Algorithm 1).

Client :math:`i` holds an encoded vector :math:`e_i = \operatorname{enc}(z_i + \eta_i) \in
\mathbb{Z}_{2^{64}}^D`. With :math:`M` compute nodes it draws :math:`M - 1` uniformly random
vectors :math:`r_{i,1}, \dots, r_{i,M-1}` (:class:`dpfed.dca.keystream.MaskStream`) and sets

.. math::

    r_{i,M} = -\sum_{k=1}^{M-1} r_{i,k} \bmod 2^{64}, \qquad
    m_{i,1} = e_i + r_{i,1}, \qquad m_{i,k} = r_{i,k} \ (k = 2, \dots, M),

so :math:`\sum_k m_{i,k} = e_i`. Each message alone is uniform on
:math:`\mathbb{Z}_{2^{64}}^D` whatever :math:`e_i` is (:math:`m_{i,1}` is :math:`e_i` plus an
independent uniform vector; :math:`m_{i,M}` is minus a sum of uniform vectors), and any
:math:`M - 1` of the messages are jointly uniform: only all :math:`M` together reveal
:math:`e_i`. Node :math:`k` (0-based index :math:`k - 1` in the code) receives
:math:`m_{i,k}` and publishes :math:`q_k = \sum_i m_{i,k}`; then
:math:`\sum_k q_k = \sum_i e_i \bmod 2^{64}`.

``uint64`` arithmetic in numpy wraps modulo :math:`2^{64}` for arrays, which is the intended
arithmetic here (no overflow warnings are raised for array operations). Nodes are indexed
``0 .. M-1`` in code; node 0 is the paper's Compute 1, the one that receives
:math:`e_i + r_{i,1}`.

Mask layout: the shares :math:`r_{i,k}` (:math:`k < M`) of client :math:`i` are words
:math:`[(i (M-1) + k - 1) D,\ (i (M-1) + k) D)` of the run's mask stream
(:func:`mask_words`), so a block of consecutive clients is one contiguous range of the stream.
"""

from __future__ import annotations

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.dca.keystream import MaskStream

__all__ = ["mask_offset", "mask_words", "reconstruct", "split_shares"]


def mask_offset(first_client: int, compute_nodes: int, dim: int) -> int:
    r"""Index in the mask stream of client ``first_client``'s first share word.

    .. math:: w_0(i) = i \, (M - 1) \, D
    """
    return int(first_client) * (int(compute_nodes) - 1) * int(dim)


def mask_words(
    stream: MaskStream,
    first_client: int,
    n_clients: int,
    compute_nodes: int,
    dim: int,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    r"""The random shares :math:`r_{i,k}`, :math:`k = 1..M-1`, of consecutive clients.

    Parameters
    ----------
    stream : MaskStream
        The run's mask stream.
    first_client : int
        Index of the first client.
    n_clients : int
        Number :math:`B` of consecutive clients.
    compute_nodes : int
        :math:`M \ge 1`.
    dim : int
        :math:`D`.
    out : numpy.ndarray of uint64, shape (B, M-1, D), optional
        Receives the shares (C-contiguous).

    Returns
    -------
    numpy.ndarray of uint64, shape (B, M-1, D)
        ``out[b, k - 1]`` is :math:`r_{i,k}` of client ``first_client + b``.
    """
    shape = (int(n_clients), int(compute_nodes) - 1, int(dim))
    if out is None:
        out = np.empty(shape, dtype=np.uint64)
    elif out.shape != shape:
        raise DpfedInputError(f"out must have shape {shape}. Found {out.shape}.")
    return stream.fill(out, mask_offset(first_client, compute_nodes, dim))


def split_shares(encoded: np.ndarray, masks: np.ndarray) -> np.ndarray:
    r"""The :math:`M` messages of each client from its encoded vector and random shares.

    Parameters
    ----------
    encoded : numpy.ndarray of uint64, shape (B, D)
        :math:`e_i` of :math:`B` clients.
    masks : numpy.ndarray of uint64, shape (B, M-1, D)
        Their uniformly random shares :math:`r_{i,1..M-1}` (:func:`mask_words`).

    Returns
    -------
    numpy.ndarray of uint64, shape (B, M, D)
        ``messages[b, k]`` is :math:`m_{i,k+1}`, the message for node ``k``:
        :math:`e_i + r_{i,1}`, then :math:`r_{i,2}, \dots, r_{i,M-1}`, then
        :math:`-\sum_{k<M} r_{i,k}`, all modulo :math:`2^{64}`.
    """
    e = np.asarray(encoded)
    r = np.asarray(masks)
    if e.dtype != np.uint64 or r.dtype != np.uint64:
        raise DpfedInputError(
            f"encoded and masks must be uint64 arrays. Found {e.dtype} and {r.dtype}."
        )
    if e.ndim != 2 or r.ndim != 3 or r.shape[0] != e.shape[0] or r.shape[2] != e.shape[1]:
        raise DpfedInputError(
            f"encoded must be (B, D) and masks (B, M-1, D). Found {e.shape} and {r.shape}."
        )
    b, m1, d = r.shape
    messages = np.empty((b, m1 + 1, d), dtype=np.uint64)
    if m1 == 0:  # one compute node: it receives the encoded vector itself
        messages[:, 0] = e
        return messages
    np.add(e, r[:, 0], out=messages[:, 0])
    messages[:, 1:m1] = r[:, 1:]
    np.negative(r.sum(axis=1, dtype=np.uint64), out=messages[:, m1])
    return messages


def reconstruct(messages: np.ndarray) -> np.ndarray:
    r"""Sum each client's messages over the nodes: :math:`\sum_k m_{i,k} = e_i \bmod 2^{64}`.

    Parameters
    ----------
    messages : numpy.ndarray of uint64, shape (B, M, D)

    Returns
    -------
    numpy.ndarray of uint64, shape (B, D)
    """
    m = np.asarray(messages)
    if m.dtype != np.uint64 or m.ndim != 3:
        raise DpfedInputError(
            f"messages must be a (B, M, D) uint64 array. Found {m.dtype} {m.shape}."
        )
    return m.sum(axis=1, dtype=np.uint64)
