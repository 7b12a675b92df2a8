r"""Secure vertical logistic regression in one process: two parties exchanging real CKKS
ciphertexts (as bytes) through :func:`dpfed.protocols.vertical_secure.party.block_update`.

The job: each party releases its noisy Gram matrix to itself (its preconditioner), the label
holder sends its encrypted labels once (and, when its own data is not protected, starts from
its own model), then :math:`T` Gauss-Seidel rounds update the label holder's block and then
the passive party's. Only the final model blocks and the
per-round costs leave the parties.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError, check_same_rows
from dpfed.engines import Engine
from dpfed.protocols.vertical_secure.on_engine import run_secure_roles
from dpfed.protocols.vertical_secure.party import (
    KEY_HOLDERS,
    RoundCost,
    SecureParty,
    block_update,
    bounded_rows,
    exchange_order,
    needs_rotations,
)
from dpfed.protocols.vertical_secure.setup import SecureSetup
from dpfed.protocols.vertical_secure.weighting import (
    WeightedPassive,
    choose_weight,
    encrypted_request,
    encrypted_statistics,
    plain_statistics,
    split_request,
    weighting_request,
)
from dpfed.secure import ckks

Matrix: TypeAlias = np.ndarray | sp.csr_matrix


@dataclass
class SecureVerticalResult:
    """The model and what it cost.

    Attributes
    ----------
    blocks : list of numpy.ndarray
        Each party's weights (the label holder's without the intercept).
    intercept : float
        The intercept on the original scale (0.0 without one).
    setup : SecureSetup
    costs : list of RoundCost
        One per block update, in order.
    setup_bytes : int
        Public contexts and encrypted labels sent before the rounds.
    seconds : float
        Wall time of the whole job.
    backend : str
        ``"ckks"`` (the protocol) or ``"plain"`` (its simulation with the same noise).
    weighting : WeightedPassive or None
        Under ``protect="passive"`` or ``"parties"``: the weight of the passive party's
        clipped scores, the label holder's block being its own model (:mod:`.weighting`);
        None (``"all"``): both blocks as trained.
    engine : dict or None
        Where the parties' roles ran, when not in this process (the engine's report).
    """

    blocks: list[np.ndarray]
    intercept: float
    setup: SecureSetup
    costs: list[RoundCost]
    setup_bytes: int
    seconds: float
    backend: str = "ckks"
    weighting: WeightedPassive | None = None
    engine: dict[str, Any] | None = None

    def decision_function(self, blocks: list[Matrix]) -> np.ndarray:
        """Scores of rows split like the training rows (each block bounded as in training)."""
        if len(blocks) != len(self.blocks):
            raise DpfedInputError(
                f"the model has {len(self.blocks)} blocks; found {len(blocks)} blocks of rows."
            )
        total = np.full(blocks[0].shape[0], self.intercept)
        for j, (X, w) in enumerate(zip(blocks, self.blocks, strict=True)):
            share = np.asarray(bounded_rows(X, self.setup.row_scaling) @ w).ravel()
            total += share if j == 0 or self.weighting is None else self.weighting.share(share)
        return total

    def privacy(self) -> dict[str, Any]:
        """What the job spent and how (JSON-able)."""
        s = self.setup
        return {
            "mechanism": "secure vertical (CKKS products, Gaussian on d-vectors)",
            "backend": self.backend,
            "protect": s.protect,
            "epsilon": s.epsilon_spent(),
            "accountant": "pld",
            "epsilon_target": s.epsilon,
            "delta": s.delta,
            "noise_multiplier": s.noise_multiplier,
            "releases": s.release_count,
            "rounds": s.rounds,
            "gradient_sigma": s.gradient_sigma,
            "polynomial_degree": s.degree,
            "score_bound": s.polynomial.half_width,
            "residual_bound": s.polynomial.residual_bound,
            "polynomial_max_error": s.polynomial.max_error,
            "ridge": s.ridge_strength,
            "sampler": "key holder: exact grid Gaussian; evaluator: float Gaussian inside CKKS",
            **({} if self.weighting is None else {"passive_weighting": self.weighting.as_dict()}),
        }

    def cost_summary(self) -> dict[str, float]:
        """Mean seconds and bytes per round (both block updates; on an engine, each party's
        seconds and bytes over the whole job, divided by the rounds)."""
        rounds = max(1, self.setup.rounds)
        return {
            "seconds_per_round": sum(c.seconds for c in self.costs) / rounds,
            "bytes_per_round": sum(c.bytes_sent for c in self.costs) / rounds,
            "setup_bytes": float(self.setup_bytes),
            "seconds": self.seconds,
        }


@dataclass
class OpenedParties:
    """The parties ready for their rounds (:func:`open_parties`), the label holder first."""

    parties: tuple[SecureParty, ...]
    inverses: list[np.ndarray]
    encrypted_labels: list[bytes] | None
    setup_bytes: int


def open_parties(
    blocks: list[Matrix],
    y01: np.ndarray,
    setup: SecureSetup,
    rngs: list[np.random.Generator],
    backend: str,
) -> OpenedParties:
    """Create the parties, send the key holders' public contexts (the label holder's and the
    first passive party's, :func:`~dpfed.protocols.vertical_secure.party.exchange_order`) to
    every other party and the encrypted labels to every passive party, warm-start an
    unprotected label holder and release each party's Gram matrix into its preconditioner.

    Parameters
    ----------
    blocks : matrices of shapes (N, d_0), (N, d_1), ...
        The label holder's columns first.
    y01 : numpy.ndarray, shape (N,)
        Labels in {0, 1}.
    setup : SecureSetup
    rngs : numpy.random.Generator, one per party
        The parties' noise generators, the label holder's first.
    backend : str
    """
    parties = tuple(
        SecureParty(j, X, setup, rngs[j], y=y01 if j == 0 else None, backend=backend)
        for j, X in enumerate(blocks)
    )
    label = parties[0]
    setup_bytes = 0
    encrypted_labels = None
    if backend == "ckks":
        for holder in (parties[k] for k in KEY_HOLDERS):
            assert holder.keys is not None
            full, folding = holder.keys.public_bytes(), holder.keys.public_bytes(False)
            for me in parties:
                if me is not holder:
                    data = (
                        full if needs_rotations(me.index, holder.index, len(parties)) else folding
                    )
                    setup_bytes += len(data)
                    me.publics[holder.index] = ckks.PublicContext.from_bytes(data)
        assert label.keys is not None
        encrypted_labels = label.keys.encrypt(y01)
        setup_bytes += (len(parties) - 1) * sum(len(c) for c in encrypted_labels)
    if not label.protected:
        label.warm_start()  # its own model: free when its data is not protected
    inverses = [p.preconditioner(p.gram_release()) for p in parties]
    return OpenedParties(parties, inverses, encrypted_labels, setup_bytes)


def train_secure_vertical(
    blocks: list[Matrix],
    y: np.ndarray,
    setup: SecureSetup,
    *,
    seed: int | None = None,
    backend: str = "ckks",
    progress: Callable[[int, RoundCost | None], None] | None = None,
    rngs: list[np.random.Generator] | None = None,
    engine: str | Engine | None = None,
) -> SecureVerticalResult:
    r"""Fit a logistic regression on column blocks held by two or more parties, securely.

    Parameters
    ----------
    blocks : list of matrices, shapes (N, d_0), (N, d_1), ...
        The label holder's columns, then each passive party's (at most
        :data:`~dpfed.protocols.vertical_secure.setup.MAX_PARTIES` blocks).
    y : numpy.ndarray, shape (N,)
        Labels in {-1, 1} or {0, 1}.
    setup : SecureSetup
        Its ``n_samples`` and ``widths`` must match the blocks.
    seed : int or None
        Seeds both parties' noise generators (independent streams); ``None`` draws fresh
        entropy. The CKKS keys and encryption randomness are SEAL's own CSPRNG's either way,
        so a seeded CKKS run draws the same noise every time but its model varies with the
        encryption's rounding (by about 1e-6 on a9a); the plaintext backend is bit for bit.
    backend : str
        ``"ckks"`` (the protocol) or ``"plain"`` (the same noise, products in the clear: a
        simulation for experiments).
    progress : callable or None
        Called with the round index and the cost of each block update (on an ``engine``:
        with ``None`` as each round ends; the costs are known per party at the end).
    rngs : numpy.random.Generator, one per party, or None
        The parties' noise generators, the label holder's first (as a networked job's
        parties draw from their secrets); None: one stream per party spawned from ``seed``.
    engine : str or Engine or None
        None: the block updates called in turn in this process. Else the parties' networked
        roles run on this engine (``"inprocess"``, ``"ray"`` or an instance; CKKS only;
        :mod:`dpfed.protocols.vertical_secure.on_engine`): the same noise, and the model up
        to CKKS's rounding.

    Returns
    -------
    SecureVerticalResult
    """
    names = ["label holder rows", *(f"party {j} rows" for j in range(1, len(blocks))), "labels"]
    n = check_same_rows(names, [*(X.shape[0] for X in blocks), len(y)])
    widths = tuple(int(X.shape[1]) for X in blocks)
    if n != setup.n_samples or widths != setup.widths:
        raise DpfedInputError(
            f"the set-up is for {setup.n_samples} rows and widths {setup.widths}; the data "
            f"has {n} rows and widths {widths}."
        )
    labels = np.asarray(y, dtype=np.float64)
    if not np.all(np.isin(labels, (-1.0, 0.0, 1.0))) or (
        np.any(labels == 0) and np.any(labels == -1)
    ):
        raise DpfedInputError("labels must be in {-1, 1} or in {0, 1}.")
    y01 = (labels > 0).astype(np.float64)
    start = time.perf_counter()
    k = len(blocks)
    if rngs is None:
        rngs = np.random.default_rng(seed).spawn(k)
    elif len(rngs) != k:
        raise DpfedInputError(f"{k} noise generators, one per party; found {len(rngs)}.")
    if engine is not None:
        if backend != "ckks":
            raise DpfedInputError(
                f"an engine runs the parties' CKKS roles; found backend "
                f"{backend!r} (the plaintext simulation runs in process only)."
            )
        on_engine = tuple(
            SecureParty(j, X, setup, rngs[j], y=y01 if j == 0 else None, backend=backend)
            for j, X in enumerate(blocks)
        )
        ran = run_secure_roles(on_engine, setup, engine, progress)
        return _result(
            on_engine,
            setup,
            ran.costs,
            ran.setup_bytes,
            time.perf_counter() - start,
            backend,
            ran.weighting,
            ran.engine,
        )
    opened = open_parties(blocks, y01, setup, rngs, backend)
    parties = opened.parties
    costs = []
    for t in range(setup.rounds):
        for j, evaluator in enumerate(parties):
            holder, folders = exchange_order(j, k)
            enc = opened.encrypted_labels if holder == 0 else None
            cost = block_update(
                evaluator, parties[holder], opened.inverses[j], enc, [parties[f] for f in folders]
            ).cost
            costs.append(cost)
            if progress is not None:
                progress(t, cost)
    weighting = None
    if setup.weighted:
        weighting = weigh_passive(parties[0], parties[1:])
        assert parties[0].own_model is not None
        parties[0].w = parties[0].own_model.copy()
    return _result(
        parties,
        setup,
        costs,
        opened.setup_bytes,
        time.perf_counter() - start,
        backend,
        weighting,
        None,
    )


def _result(
    parties: tuple[SecureParty, ...],
    setup: SecureSetup,
    costs: list[RoundCost],
    setup_bytes: int,
    seconds: float,
    backend: str,
    weighting: WeightedPassive | None,
    engine: dict[str, Any] | None,
) -> SecureVerticalResult:
    """The parties' final blocks as a result (the intercept split off the label holder's)."""
    w0 = parties[0].w
    intercept = 0.0
    if setup.fit_intercept:
        intercept = float(w0[-1]) * setup.intercept_scale
        w0 = w0[:-1]
    blocks = [w0.copy(), *(p.w.copy() for p in parties[1:])]
    return SecureVerticalResult(
        blocks, intercept, setup, costs, setup_bytes, seconds, backend, weighting, engine
    )


def weigh_passive(label: SecureParty, passives: Sequence[SecureParty]) -> WeightedPassive:
    """After the last round: the label holder's request at its own model's scores, every
    passive party's statistics of its final scores (under the label holder's key, or in the
    clear for the plaintext backend) and the label holder's weight (:mod:`.weighting`)."""
    setup = label.setup
    if label.own_model is None:  # protect="parties": fitted only now, after every release
        label.fit_own_model()
    assert label.own_model is not None and label.y is not None
    own_scores = np.asarray(label.rows @ label.own_model).ravel()
    request = weighting_request(own_scores, label.y, setup.weighting_reach)
    release = setup.statistics_release()
    encrypted = None
    if label.backend == "ckks":
        assert label.keys is not None
        encrypted = split_request(
            encrypted_request(label.keys, request), setup.n_samples, label.keys.slots
        )
    released = []
    for passive in passives:
        noise = release.noise(passive.rng)
        scores = np.asarray(passive.rows @ passive.w).ravel()
        if encrypted is not None:
            assert label.keys is not None
            released.append(
                label.keys.decrypt_sums(
                    encrypted_statistics(release, passive.publics[0], encrypted, scores, noise)
                )
            )
        else:
            released.append(plain_statistics(release, scores, request, noise))
    return choose_weight(release, request, released)
