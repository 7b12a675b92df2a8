r"""The Distributed Compute Algorithm (DCA), simulated in one process: a noisy secure sum.

Heikkilä et al. (NeurIPS 2017), Algorithm 1. :math:`N` clients hold vectors
:math:`z_i \in \mathbb{R}^D`; :math:`M` compute nodes; at most :math:`T` clients may drop
out (or collude). :func:`secure_sum` plays every party:

1. **noise and encoding** — by default (``noise="discrete"``) client :math:`i` encodes
   :math:`e_i = \operatorname{rint}(z_i 2^f) + K_i \bmod 2^{64}` with
   :math:`K_{ij} \sim \mathcal N_{\mathbb Z}(0, s^2)` drawn exactly
   (:mod:`dpfed.dca.discrete_noise`); with ``noise="gaussian"`` it draws
   :math:`\eta_i \sim \mathcal N(0, \operatorname{diag}(\sigma_j^2))` in floating point
   and encodes :math:`e_i = \operatorname{rint}((z_i + \eta_i) 2^f) \bmod 2^{64}`. Either
   noise comes from the client's own generator, derived from the run's seed and :math:`i`
   (:mod:`dpfed.dca.noise`), so it is the same whichever process computes it; values whose
   encoding could make the sum wrap are refused (:mod:`dpfed.dca.fixedpoint`);
2. **shares** — :math:`M - 1` uniform vectors :math:`r_{i,k}` from the AES-256-CTR mask
   stream (:mod:`dpfed.dca.keystream`), :math:`r_{i,M} = -\sum_{k<M} r_{i,k}`, messages
   :math:`m_{i,1} = e_i + r_{i,1}`, :math:`m_{i,k} = r_{i,k}` (:mod:`dpfed.dca.shares`),
   each optionally sealed for its node only (:mod:`dpfed.dca.envelope`);
3. **agreement** — each node reports the clients whose message it received; the nodes
   aggregate the intersection, and refuse if more than :math:`T` clients are missing
   (:mod:`dpfed.dca.agreement`);
4. **node sums** — node :math:`k` publishes :math:`q_k = \sum_{i \in I} m_{i,k}`;
5. **result** — :math:`\sum_k q_k = \sum_{i \in I} e_i \bmod 2^{64}`, decoded:
   :math:`\sum_{i \in I} (z_i + \eta_i)` up to the rounding of the encoding (with the
   discrete noise, :math:`\eta_i = K_i 2^{-f}`).

Two ways to compute the node sums, with bit-identical results (tested):

* **explicit** (``materialize=True``, always with ``encrypt=True``): every client's
  :math:`M` messages are built, (sealed and opened,) and added up at their node;
* **fast** (default): by linearity, :math:`q_1 = \sum_i e_i + \sum_i r_{i,1}`,
  :math:`q_k = \sum_i r_{i,k}` for :math:`1 < k < M` and
  :math:`q_M = \sum_i r_{i,M} = -\sum_{k<M} \sum_i r_{i,k}`, so the masks are generated
  (one 1 MiB segment of the mask stream at a time) and summed straight from the keystream
  buffer without forming per-node message arrays. Every mask word is still generated and
  added once.

Clients are processed in blocks of consecutive clients (``block_size``), streamed from the
source (:mod:`dpfed.dca.source`), so :math:`N \times D` never has to be in memory; the
work buffers are reused. With ``workers > 1`` the client range is split between worker
processes (``cryptography`` holds the GIL while generating the keystream, so threads would
not run it in parallel); each returns its partial sums, added modulo :math:`2^{64}`, which
is exact and independent of the order.

The noise protects the clients only as calibrated by :mod:`dpfed.dca.calibration`; this module
adds whatever ``noise_std`` it is given.
"""

from __future__ import annotations

import math
import pickle
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from dpfed._validation import DpfedInputError, check_int
from dpfed.dca.agreement import DroppedSpec, agree_included, check_dropouts, received_reports
from dpfed.dca.discrete_noise import generators_discrete_noise, ring_sigma2
from dpfed.dca.envelope import MessageContext, NodeKeyPair, open_envelope, seal_for_nodes
from dpfed.dca.fixedpoint import (
    DEFAULT_FRACTIONAL_BITS,
    check_fractional_bits,
    decode,
    first_bad_index,
    overflow_error,
    scaled_limit,
    value_bound,
)
from dpfed.dca.keystream import MaskStream
from dpfed.dca.noise import client_noise_generator, noise_seed, resolve_noise_std
from dpfed.dca.shares import mask_offset, split_shares
from dpfed.dca.source import BlockCallable, ClientSource

__all__ = ["NOISES", "SecureSumResult", "default_block_size", "secure_sum"]

#: How the clients draw their noise: in floating point, or exactly in the ring.
NOISES = ("gaussian", "discrete")

#: Target size in bytes of one block's float64 work buffer (:func:`default_block_size`).
_BLOCK_BYTES = 1 << 20
#: Mask words generated and summed at once: one 1 MiB segment of the mask stream, so that the
#: stream's fast whole-segment path is used (:mod:`dpfed.dca.keystream`).
_MASK_WORDS = (1 << 20) // 8
#: Up to this many whole clients, a chunk is added to the accumulator client by client.
_ROW_ADD = 16


@dataclass(frozen=True, eq=False)
class SecureSumResult:
    r"""Outcome of one secure sum.

    Attributes
    ----------
    total : numpy.ndarray of float64, shape (D,)
        :math:`\sum_{i \in I} (z_i + \eta_i)`, decoded from the sum of the node sums.
    total_encoded : numpy.ndarray of uint64, shape (D,)
        :math:`\sum_k q_k \bmod 2^{64}` (the fixed-point sum before decoding).
    node_sums : numpy.ndarray of uint64, shape (M, D)
        :math:`q_k`, what each compute node publishes (each alone uniformly random).
    included : numpy.ndarray of int64
        The agreed clients :math:`I`, sorted.
    dropped : numpy.ndarray of int64
        The clients left out (their shares did not reach every node), sorted.
    received : numpy.ndarray of int64, shape (M,)
        How many clients each node reported as received.
    n_clients, dim, compute_nodes, tolerated, fractional_bits : int
        :math:`N, D, M, T, f`.
    noise_std : float or numpy.ndarray of shape (D,)
        Standard deviation of each client's noise.
    value_bound : float
        Largest :math:`|z_{ij} + \eta_{ij}|` the encoding accepted
        (:func:`dpfed.dca.fixedpoint.value_bound`).
    encrypted : bool
        Whether every message went through envelope encryption.
    materialized : bool
        Whether the messages were built explicitly (the explicit path).
    workers : int
        Processes that computed the sums.
    noise : str
        ``"gaussian"`` (continuous, then rounded) or ``"discrete"`` (exact, in the ring).
    timing : dict of str to float
        Seconds per phase, summed over workers: ``values`` (reading or synthesising the
        client vectors), ``noise_seeding`` (building the per-client generators),
        ``noise_sampling``, ``encode`` (adding the noise, scaling, rounding, range check),
        ``masks`` (AES keystream), ``sums`` (node sums), ``shares``, ``encrypt``,
        ``decrypt`` (explicit path), ``agreement``, ``decode``; and ``wall``, the elapsed
        seconds of the whole call.
    """

    total: np.ndarray
    total_encoded: np.ndarray
    node_sums: np.ndarray
    included: np.ndarray
    dropped: np.ndarray
    received: np.ndarray
    n_clients: int
    dim: int
    compute_nodes: int
    tolerated: int
    fractional_bits: int
    noise_std: float | np.ndarray
    value_bound: float
    encrypted: bool
    materialized: bool
    workers: int
    timing: dict[str, float] = field(default_factory=dict)
    noise: str = "discrete"


@dataclass(frozen=True)
class _Plan:
    """Everything a worker needs besides the source, the mask stream and the node keys."""

    n_clients: int
    dim: int
    compute_nodes: int
    fractional_bits: int
    seed: int | None
    noise_scalar: float | None
    noise_per_dim: np.ndarray | None
    block_size: int
    explicit: bool
    encrypt: bool
    job_id: str
    round_index: int
    discrete_sigma2: int | None = None


@dataclass
class _Partial:
    encoded_sum: np.ndarray
    mask_sums: np.ndarray
    node_sums: np.ndarray | None
    clients: int
    timing: dict[str, float]


def default_block_size(dim: int, n_clients: int) -> int:
    """Clients per block: about 1 MiB of float64 work buffer, at least 1, at most N."""
    return max(1, min(int(n_clients), _BLOCK_BYTES // (8 * int(dim))))


def _noisy_scaled(
    plan: _Plan, z: np.ndarray, clients: Sequence[int], x: np.ndarray, timing: dict[str, float]
) -> None:
    r"""Write :math:`\operatorname{rint}((z_i + \eta_i) 2^f)` (or, with the discrete noise,
    :math:`\operatorname{rint}(z_i 2^f) + K_i`) of ``clients`` into ``x``."""
    clock = time.perf_counter
    if plan.seed is not None and plan.discrete_sigma2 is not None:
        t0 = clock()
        np.multiply(z, math.ldexp(1.0, plan.fractional_bits), out=x)
        np.rint(x, out=x)
        timing["encode"] += clock() - t0
        t0 = clock()
        generators = [client_noise_generator(plan.seed, i) for i in clients]
        t1 = clock()
        # exact integers, far below 2^53: the sum is exact
        x += generators_discrete_noise(generators, plan.dim, plan.discrete_sigma2)
        timing["noise_seeding"] += t1 - t0
        timing["noise_sampling"] += clock() - t1
        return
    if plan.seed is not None:
        seeding = sampling = 0.0
        for j, i in enumerate(clients):
            t0 = clock()
            gen = client_noise_generator(plan.seed, i)
            t1 = clock()
            gen.standard_normal(out=x[j])
            seeding += t1 - t0
            sampling += clock() - t1
        timing["noise_seeding"] += seeding
        timing["noise_sampling"] += sampling
        t0 = clock()
        x *= plan.noise_scalar if plan.noise_scalar is not None else plan.noise_per_dim
        x += z
    else:
        t0 = clock()
        np.copyto(x, z)
    x *= math.ldexp(1.0, plan.fractional_bits)
    np.rint(x, out=x)
    timing["encode"] += clock() - t0


def _encode_checked(
    plan: _Plan,
    x: np.ndarray,
    out: np.ndarray,
    clients: Sequence[int],
    limit: float,
    timing: dict[str, float],
) -> None:
    """Range-check the scaled values and store them as uint64 (see fixedpoint)."""
    t0 = time.perf_counter()
    hi = x.max()
    lo = x.min()
    if not (hi <= limit and -lo <= limit):  # also false for NaN
        row, col = first_bad_index(x, limit)
        value = math.ldexp(float(x[row, col]), -plan.fractional_bits)
        raise overflow_error(
            value, (clients[row], col), plan.n_clients, plan.fractional_bits, "values + noise"
        )
    np.copyto(out.view(np.int64), x, casting="unsafe")
    timing["encode"] += time.perf_counter() - t0


def _run_range(
    plan: _Plan,
    source: ClientSource,
    stream: MaskStream,
    included: np.ndarray,
    start: int,
    stop: int,
    node_keys: Sequence | None,
) -> _Partial:
    """Clients ``start .. stop - 1``: noise, encoding, shares and their node sums."""
    clock = time.perf_counter
    timing: dict[str, float] = defaultdict(float)
    m, d = plan.compute_nodes, plan.dim
    b_max = min(plan.block_size, max(1, stop - start))
    encoded_sum = np.zeros(d, dtype=np.uint64)
    mask_sums = np.zeros((max(0, m - 1), d), dtype=np.uint64)
    node_sums = np.zeros((m, d), dtype=np.uint64) if plan.explicit else None
    work = np.empty((b_max, d))
    encoded = np.empty((b_max, d), dtype=np.uint64)
    masks = np.empty((b_max, m - 1, d), dtype=np.uint64) if plan.explicit else None
    limit = scaled_limit(plan.n_clients)
    publics = [k.public_bytes for k in node_keys] if node_keys is not None else None
    done = 0
    t = clock()
    for first, z in source.blocks(plan.block_size, start, stop):
        now = clock()
        timing["values"] += now - t
        b = z.shape[0]
        keep = included[first : first + b]
        rows = None if keep.all() else np.flatnonzero(keep)
        if rows is not None and rows.size == 0:
            t = clock()
            continue
        zk = z if rows is None else z[rows]
        clients = range(first, first + b) if rows is None else (first + rows).tolist()
        n = zk.shape[0]
        _noisy_scaled(plan, zk, clients, work[:n], timing)
        _encode_checked(plan, work[:n], encoded[:n], clients, limit, timing)
        e = encoded[:n]
        if plan.explicit:
            _explicit_block(
                plan,
                stream,
                first,
                b,
                rows,
                clients,
                e,
                masks,
                node_sums,
                publics,
                node_keys,
                timing,
            )
        else:
            t0 = clock()
            encoded_sum += e.sum(axis=0, dtype=np.uint64)
            timing["sums"] += clock() - t0
        done += n
        t = clock()
    if not plan.explicit and m > 1 and done:
        _mask_range(plan, stream, included, start, stop, mask_sums, timing)
    return _Partial(encoded_sum, mask_sums, node_sums, done, dict(timing))


def _add_rows(acc: np.ndarray, rows: np.ndarray) -> None:
    """``acc += rows.sum(axis=0)`` modulo 2^64, without a temporary when there are few rows."""
    if rows.shape[0] <= _ROW_ADD:
        for row in rows:
            np.add(acc, row, out=acc)
    else:
        acc += rows.sum(axis=0, dtype=np.uint64)


def _mask_range(
    plan: _Plan,
    stream: MaskStream,
    included: np.ndarray,
    start: int,
    stop: int,
    mask_sums: np.ndarray,
    timing: dict[str, float],
) -> None:
    r"""Add :math:`r_{i,k}` of the included clients ``start .. stop - 1`` to ``mask_sums[k]``.

    Client :math:`i`'s shares are stream words :math:`[iL, (i+1)L)`, :math:`L = (M-1)D`
    (:func:`dpfed.dca.shares.mask_offset`); the words are generated one 1 MiB stream segment
    at a time and each is added to its place in the flattened ``(M-1, D)`` accumulator.
    """
    clock = time.perf_counter
    width = (plan.compute_nodes - 1) * plan.dim  # L, words per client
    acc = mask_sums.reshape(-1)
    lo, hi = start * width, stop * width
    buf = np.empty(min(_MASK_WORDS, hi - lo), dtype=np.uint64)
    w0 = lo
    while w0 < hi:
        w1 = min(hi, (w0 // _MASK_WORDS + 1) * _MASK_WORDS)  # up to the next segment start
        chunk = buf[: w1 - w0]
        t0 = clock()
        stream.fill(chunk, w0)
        t1 = clock()
        pos = w0
        if pos % width:  # the rest of a client begun in an earlier chunk (or all of the chunk)
            c = pos // width
            end = min(w1, (c + 1) * width)
            if included[c]:
                part = acc[pos % width : pos % width + end - pos]
                np.add(part, chunk[: end - pos], out=part)
            pos = end
        whole = (w1 - pos) // width  # clients lying entirely in the chunk
        if whole:
            c = pos // width
            rows = chunk[pos - w0 : pos - w0 + whole * width].reshape(whole, width)
            keep = included[c : c + whole]
            _add_rows(acc, rows if keep.all() else rows[keep])
            pos += whole * width
        if pos < w1 and included[pos // width]:  # the start of a client continued later
            np.add(acc[: w1 - pos], chunk[pos - w0 :], out=acc[: w1 - pos])
        timing["masks"] += t1 - t0
        timing["sums"] += clock() - t1
        w0 = w1


def _explicit_block(
    plan: _Plan,
    stream: MaskStream,
    first: int,
    b: int,
    rows: np.ndarray | None,
    clients: Sequence[int],
    e: np.ndarray,
    masks: np.ndarray,
    node_sums: np.ndarray,
    publics: list[bytes] | None,
    node_keys: Sequence | None,
    timing: dict[str, float],
) -> None:
    """Build every message of the block, optionally seal and open it, add it at its node."""

    clock = time.perf_counter
    m, d = plan.compute_nodes, plan.dim
    t0 = clock()
    block_masks = masks[:b]
    stream.fill(block_masks, mask_offset(first, m, d))
    t1 = clock()
    kept = block_masks if rows is None else block_masks[rows]
    messages = split_shares(e, kept)
    t2 = clock()
    timing["masks"] += t1 - t0
    timing["shares"] += t2 - t1
    if not plan.encrypt:
        node_sums += messages.sum(axis=0, dtype=np.uint64)
        timing["sums"] += clock() - t2
        return
    for j, i in enumerate(clients):
        contexts = [MessageContext(plan.job_id, i, k, plan.round_index) for k in range(m)]
        t0 = clock()
        envelopes = seal_for_nodes([messages[j, k].tobytes() for k in range(m)], publics, contexts)
        t1 = clock()
        for k in range(m):
            plain = open_envelope(envelopes[k], node_keys[k], contexts[k])
            node_sums[k] += np.frombuffer(plain, dtype=np.uint64)
        timing["encrypt"] += t1 - t0
        timing["decrypt"] += clock() - t1


def _ranges(n: int, parts: int, align: int) -> list[tuple[int, int]]:
    """Split ``0 .. n-1`` into about ``parts`` contiguous ranges, multiples of ``align``."""
    step = max(align, -(-n // parts))
    step = -(-step // align) * align
    return [(a, min(a + step, n)) for a in range(0, n, step)]


def _run_workers(
    plan: _Plan,
    source: ClientSource,
    stream: MaskStream,
    included: np.ndarray,
    node_keys: Sequence | None,
    workers: int,
    executor: Executor | None = None,
) -> list[_Partial]:
    """The client ranges on ``workers`` processes: a pool of its own, or ``executor``."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if not source.partitionable:
        raise DpfedInputError(
            "workers > 1 needs values as an (N, D) array or a block callable; an iterable of "
            "blocks can only be read in one process. Use workers = 1."
        )
    if source.kind == "callable":
        try:
            pickle.dumps(source)
        except Exception as exc:
            raise DpfedInputError(
                "workers > 1 sends the values callable to worker processes, so it must be "
                f"picklable (a module-level function or class instance). It is not: {exc}"
            ) from None
    ranges = _ranges(plan.n_clients, 4 * workers, plan.block_size)

    def run(pool: Executor) -> list[_Partial]:
        futures = [
            pool.submit(_run_range, plan, source.part(a, b), stream, included, a, b, node_keys)
            for a, b in ranges
        ]
        return [f.result() for f in futures]

    if executor is not None:
        return run(executor)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(ranges)), mp_context=context) as pool:
        return run(pool)


@dataclass(frozen=True)
class _Setup:
    """The checked arguments of :func:`secure_sum`: the plan and what runs it."""

    plan: _Plan
    tolerated: int
    workers: int
    stream: MaskStream
    keys: list | None
    noise: str


@dataclass(frozen=True)
class _Agreement:
    """The nodes' reports, the clients they agreed on, those left out, and the seconds."""

    reports: np.ndarray
    included: np.ndarray
    dropped: np.ndarray
    seconds: float


def _noise_settings(
    noise_std: float | np.ndarray, rng: int | np.random.Generator | None, noise: str, d: int, f: int
) -> tuple[float | None, np.ndarray, int | None, int | None]:
    """Check the noise arguments: ``(scalar std, per-coordinate stds, seed, ring sigma^2)``.

    Draws the seed from ``rng`` (only when there is noise), before checking ``noise``.
    """
    scalar, per_dim = resolve_noise_std(noise_std, d)
    has_noise = bool(np.any(per_dim > 0))
    if has_noise and rng is None:
        raise DpfedInputError(
            "rng (a numpy Generator or an integer seed) is needed to draw the clients' noise."
        )
    seed = noise_seed(rng) if has_noise else None
    if noise not in NOISES:
        raise DpfedInputError(f"noise must be one of {NOISES}. Found {noise!r}.")
    discrete_sigma2 = None
    if noise == "discrete" and has_noise:
        if scalar is None:
            raise DpfedInputError(
                "noise='discrete' (the default) takes one noise_std for every coordinate. "
                f"Found {noise_std!r}; pass noise='gaussian' for per-coordinate standard "
                "deviations (drawn in floating point)."
            )
        discrete_sigma2 = ring_sigma2(scalar, f)
    return scalar, per_dim, seed, discrete_sigma2


def _node_keys(encrypt: bool, node_keys: Sequence | None, m: int) -> list | None:
    """The nodes' key pairs for ``encrypt`` (given, or fresh ones), else ``None``."""
    if not encrypt:
        return None
    keys = list(node_keys) if node_keys is not None else [NodeKeyPair.generate() for _ in range(m)]
    if len(keys) != m or not all(isinstance(k, NodeKeyPair) for k in keys):
        raise DpfedInputError(
            f"node_keys must be {m} NodeKeyPair objects, one per compute node. Found "
            f"{len(keys)} items."
        )
    return keys


def _setup(
    source: ClientSource,
    *,
    noise_std: float | np.ndarray,
    rng: int | np.random.Generator | None,
    compute_nodes: int,
    tolerated: int,
    fractional_bits: int,
    block_size: int | None,
    encrypt: bool,
    materialize: bool,
    workers: int,
    mask_stream: MaskStream | None,
    node_keys: Sequence | None,
    job_id: str,
    round_index: int,
    noise: str,
) -> _Setup:
    """Check the arguments of :func:`secure_sum` (in its order) and build the plan."""
    n, d = source.n_clients, source.dim
    m = check_int("compute_nodes", compute_nodes, minimum=1)
    t = check_int("tolerated", tolerated, minimum=0)
    if t > n - 1:
        raise DpfedInputError(
            f"tolerated must be at most N - 1 = {n - 1} (one client must remain). Found {t}."
        )
    f = check_fractional_bits(fractional_bits)
    scalar, per_dim, seed, discrete_sigma2 = _noise_settings(noise_std, rng, noise, d, f)
    b = default_block_size(d, n) if block_size is None else check_int("block_size", block_size)
    w = check_int("workers", workers, minimum=1)
    if not isinstance(job_id, str):
        raise DpfedInputError(f"job_id must be a string. Found {job_id!r}.")
    rnd = check_int("round_index", round_index, minimum=0)
    stream = MaskStream() if mask_stream is None else mask_stream
    if not isinstance(stream, MaskStream):
        raise DpfedInputError(f"mask_stream must be a MaskStream. Found {mask_stream!r}.")
    keys = _node_keys(encrypt, node_keys, m)
    plan = _Plan(
        n_clients=n,
        dim=d,
        compute_nodes=m,
        fractional_bits=f,
        seed=seed,
        noise_scalar=scalar,
        noise_per_dim=None if scalar is not None else per_dim,
        block_size=b,
        explicit=bool(encrypt or materialize),
        encrypt=bool(encrypt),
        job_id=job_id,
        round_index=rnd,
        discrete_sigma2=discrete_sigma2,
    )
    return _Setup(plan, t, w, stream, keys, noise)


def _agree(plan: _Plan, dropped: DroppedSpec, tolerated: int) -> _Agreement:
    """The nodes' reports and their agreement on the included clients (timed)."""
    t0 = time.perf_counter()
    reports = received_reports(plan.n_clients, plan.compute_nodes, dropped)
    included = agree_included(reports)
    dropped_idx = check_dropouts(included, tolerated)
    return _Agreement(reports, included, dropped_idx, time.perf_counter() - t0)


def _partials(
    setup: _Setup, source: ClientSource, included: np.ndarray, executor: Executor | None
) -> list[_Partial]:
    """The partial sums of every client range: here in one range, or on workers."""
    plan = setup.plan
    if setup.workers == 1 and executor is None:
        return [_run_range(plan, source, setup.stream, included, 0, plan.n_clients, setup.keys)]
    return _run_workers(plan, source, setup.stream, included, setup.keys, setup.workers, executor)


def _node_sums(plan: _Plan, partials: Sequence[_Partial]) -> np.ndarray:
    r"""The node sums :math:`q_k` from the partials (explicit, or from the encoded and mask
    sums of the fast path)."""
    m, d = plan.compute_nodes, plan.dim
    if plan.explicit:
        node_sums = np.zeros((m, d), dtype=np.uint64)
        for p in partials:
            node_sums += p.node_sums
        return node_sums
    encoded_sum = np.zeros(d, dtype=np.uint64)
    mask_sums = np.zeros((m - 1, d), dtype=np.uint64)
    for p in partials:
        encoded_sum += p.encoded_sum
        mask_sums += p.mask_sums
    node_sums = np.empty((m, d), dtype=np.uint64)
    if m == 1:
        node_sums[0] = encoded_sum
    else:
        np.add(encoded_sum, mask_sums[0], out=node_sums[0])
        node_sums[1 : m - 1] = mask_sums[1:]
        np.negative(mask_sums.sum(axis=0, dtype=np.uint64), out=node_sums[m - 1])
    return node_sums


def _result(
    setup: _Setup, agreement: _Agreement, partials: Sequence[_Partial], wall0: float
) -> SecureSumResult:
    """Add up the partials, decode the total and gather the result and its timing."""
    plan = setup.plan
    t0 = time.perf_counter()
    timing: dict[str, float] = defaultdict(float)
    for p in partials:
        for key, value in p.timing.items():
            timing[key] += value
    node_sums = _node_sums(plan, partials)
    total_encoded = node_sums.sum(axis=0, dtype=np.uint64)
    total = decode(total_encoded, plan.fractional_bits)
    timing["decode"] += time.perf_counter() - t0
    timing["agreement"] += agreement.seconds
    included = agreement.included
    if sum(p.clients for p in partials) != int(included.sum()):  # a bug, not bad input
        raise RuntimeError("the secure sum did not process every included client.")
    timing["wall"] = time.perf_counter() - wall0
    return SecureSumResult(
        total=total,
        total_encoded=total_encoded,
        node_sums=node_sums,
        included=np.flatnonzero(included).astype(np.int64),
        dropped=agreement.dropped,
        received=agreement.reports.sum(axis=1).astype(np.int64),
        n_clients=plan.n_clients,
        dim=plan.dim,
        compute_nodes=plan.compute_nodes,
        tolerated=setup.tolerated,
        fractional_bits=plan.fractional_bits,
        noise_std=plan.noise_scalar if plan.noise_scalar is not None else plan.noise_per_dim,
        value_bound=value_bound(plan.n_clients, plan.fractional_bits),
        encrypted=plan.encrypt,
        materialized=plan.explicit,
        workers=setup.workers,
        timing=dict(timing),
        noise=setup.noise,
    )


def secure_sum(
    values: np.ndarray | BlockCallable | Iterable[np.ndarray],
    *,
    noise_std: float | np.ndarray,
    rng: int | np.random.Generator | None = None,
    compute_nodes: int = 10,
    tolerated: int = 0,
    dropped: DroppedSpec = None,
    fractional_bits: int = DEFAULT_FRACTIONAL_BITS,
    block_size: int | None = None,
    encrypt: bool = False,
    materialize: bool = False,
    n_clients: int | None = None,
    dim: int | None = None,
    workers: int = 1,
    mask_stream: MaskStream | None = None,
    node_keys: Sequence | None = None,
    job_id: str = "dca",
    round_index: int = 0,
    executor: Executor | None = None,
    noise: str = "discrete",
) -> SecureSumResult:
    r"""Sum the clients' noisy vectors with the DCA secure sum (simulated in-process).

    Returns :math:`\sum_{i \in I} (z_i + \eta_i)` where :math:`\eta_i \sim \mathcal N(0,
    \operatorname{diag}(\sigma^2))` is drawn by client :math:`i` and :math:`I` is the set of
    clients whose shares reached every compute node. See the module docstring for the steps.

    Parameters
    ----------
    values : numpy.ndarray of shape (N, D), block callable, or iterable of (b, D) arrays
        The clients' vectors :math:`z_i` (:mod:`dpfed.dca.source`). A callable
        ``f(start, stop)`` or an iterable keeps memory bounded for any :math:`N \times D`.
    noise_std : float or numpy.ndarray of shape (D,)
        :math:`\sigma`, the standard deviation of each client's noise (0: no noise). For a
        DP guarantee take it from :func:`dpfed.dca.calibration.calibrate_dca`.
    rng : int or numpy.random.Generator, optional
        Seed of the noise (needed unless ``noise_std`` is 0): client :math:`i`'s noise
        generator is derived from it and :math:`i` (:mod:`dpfed.dca.noise`). The masks and
        keys do not use it; they come from the operating system's CSPRNG.
    compute_nodes : int, default 10
        :math:`M \ge 1` (with :math:`M = 1` the single node sees every encoded vector).
    tolerated : int, default 0
        :math:`T`: at most this many clients may drop out; more is refused.
    dropped : iterable of int, or mapping of int to iterable of int, optional
        Clients whose shares did not all arrive (:func:`dpfed.dca.agreement.received_reports`):
        indices (no node received them) or ``{client: nodes that missed it}``.
    fractional_bits : int, default 24
        :math:`f` of the fixed-point encoding.
    noise : {"discrete", "gaussian"}, default "discrete"
        ``"discrete"``: each client rounds :math:`z_i 2^f` and adds exact discrete Gaussian
        noise :math:`\mathcal N_{\mathbb Z}(0, s^2)`, :math:`s^2 = \lceil(\sigma 2^f)^2\rceil`
        (:mod:`dpfed.dca.discrete_noise`), accounted by
        :func:`dpfed.dca.calibration.dca_discrete_epsilon` (calibrate ``noise_std`` with
        :func:`dpfed.dca.calibration.calibrate_dca_discrete`); one ``noise_std`` for every
        coordinate (or 0: no noise). About 450 us per client of dimension 1,000
        (docs/privacy.md, "Samplers"). ``"gaussian"``: each client adds :math:`\eta_i` drawn
        in floating point, then rounds; the float-attack caveat of docs/privacy.md applies, and
        it is the only choice for per-coordinate standard deviations.
    block_size : int, optional
        Clients per block (default :func:`default_block_size`, about 1 MiB of float64).
    encrypt : bool, default False
        Seal every message for its node (X25519 + HKDF + AES-GCM) and open it there; implies
        the explicit path. Much slower.
    materialize : bool, default False
        Build every client's :math:`M` messages explicitly (the explicit path).
    n_clients, dim : int, optional
        :math:`N` and :math:`D` for a callable (both) or an iterable (``n_clients``).
    workers : int, default 1
        Worker processes (``spawn`` start method; startup costs about half a second each).
        ``values`` must then be an array or a picklable callable, and a calling script must
        guard its entry point with ``if __name__ == "__main__":`` (as for any use of
        :mod:`multiprocessing` with ``spawn``).
    mask_stream : MaskStream, optional
        Source of the masks (default: a fresh key from :func:`os.urandom`). Pass one with a
        fixed key only to make tests reproducible.
    node_keys : sequence of NodeKeyPair, optional
        The nodes' key pairs for ``encrypt`` (default: fresh ones).
    job_id : str, default "dca"
    round_index : int, default 0
        Bound into every envelope's associated data.
    executor : concurrent.futures.Executor, optional
        Runs the client ranges instead of worker processes of this machine, e.g. a
        :class:`dpfed.engines.tasks.RayExecutor` over a cluster (``workers`` then sets the
        ranges: four per worker). The masks' key travels to the executor's workers with the
        ranges: this is a simulation, whose workers are as trusted as this process. The sum
        is the same bit for bit on any executor (sums modulo :math:`2^{64}`).

    Returns
    -------
    SecureSumResult

    Raises
    ------
    DpfedInputError
        On bad arguments, a value (plus noise) too large for the encoding, or more than
        ``tolerated`` dropped clients.
    """
    wall0 = time.perf_counter()
    source = ClientSource(values, n_clients, dim)
    setup = _setup(
        source,
        noise_std=noise_std,
        rng=rng,
        compute_nodes=compute_nodes,
        tolerated=tolerated,
        fractional_bits=fractional_bits,
        block_size=block_size,
        encrypt=encrypt,
        materialize=materialize,
        workers=workers,
        mask_stream=mask_stream,
        node_keys=node_keys,
        job_id=job_id,
        round_index=round_index,
        noise=noise,
    )
    agreement = _agree(setup.plan, dropped, setup.tolerated)
    partials = _partials(setup, source, agreement.included, executor)
    return _result(setup, agreement, partials, wall0)
