r"""The secure vertical protocol between two party processes: each party's transport-free
state machine (the runtime delivers its messages; :mod:`dpfed.protocols.vertical_secure.host`).

The steps of :func:`dpfed.protocols.vertical_secure.party.block_update`, as messages. At the
start each party sends its public CKKS context (:class:`CipherPart` ``"public"``) and releases
its Gram matrix to itself; the label holder sends its encrypted labels (``"labels"``). Round
:math:`t` then updates the label holder's block (A), then the passive party's (B):

A1. passive -> label holder: :math:`\mathrm{Enc}_P(t_P^m)`, ``"powers"`` (block 0);
A2. label holder -> passive: :math:`\mathrm{Enc}_P(X_0^\top r + \eta_0)`, ``"gradient"``;
A3. passive -> label holder: the decrypted d-vector with the passive party's exact grid noise
    (:class:`GradientRelease`); the label holder steps;
B1. label holder -> passive: :math:`\mathrm{Enc}_L(t_L^m)` (block 1);
B2. passive -> label holder: :math:`\mathrm{Enc}_L(X_1^\top r + \eta_1)`, the labels entering
    encrypted;
B3. label holder -> passive: the decrypted d-vector with the label holder's noise (if its data
    is protected); the passive party steps, and sends A1 of the next round, or after the last
    round :class:`FinalScores`, after which the label holder reports the job finished.

When the label holder keeps an exact model of its own (``protect="passive"`` or
``"parties"``), it then weighs the passive scores against it
(:mod:`dpfed.protocols.vertical_secure.weighting`): with the last B3 it sends
:math:`\mathrm{Enc}_L(r), \mathrm{Enc}_L(c)` (``"request"``); the passive party, after its
last step, returns its three noisy statistics under the label holder's key
(``"statistics"``, its round :math:`T + 1` release); the label holder decrypts them and
takes its own model as its block. Under ``"passive"`` it sends the weight
(:class:`WeightRelease`) and the passive party then sends :class:`FinalScores` with its
weighted, clipped test shares; under ``"parties"`` the weight, a function of the label
holder's protected data, stays with it: the passive party sends its plain shares right
after its statistics and the label holder weighs them (:meth:`SecureRole.peer_share`).

The label holder reports every round to the leader (vertical's
:class:`~dpfed.protocols.vertical.evaluation.RoundReport`; test figures only at the end, from
the released final blocks).

**Replays.** The runtime replays a restarted party's journal and expects the very same
messages. Everything here is a function of the inputs, the party's noise generator and its
key, except the ciphertexts: SEAL draws every encryption's randomness (and re-randomises a
product by a plaintext that encodes to zero). So every ciphertext a party sends is written to
its :class:`Outbox` before it is sent, and a replay sends those bytes again. The key pair is
the party's kept secret (the host's).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import numpy as np

from dpfed.core.losses import score_metrics
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import generator_state, restore_generator_state
from dpfed.protocols.vertical.evaluation import RoundReport
from dpfed.protocols.vertical.weighting import WeightingRequest
from dpfed.protocols.vertical_secure.messages import (
    CipherPart,
    FinalScores,
    GradientRelease,
    WeightRelease,
    cipher_parts,
)
from dpfed.protocols.vertical_secure.party import (
    SecureParty,
    encrypted_gradient,
    released_gradient,
    take_gradient,
)
from dpfed.protocols.vertical_secure.weighting import (
    WeightedPassive,
    choose_weight,
    encrypted_statistics,
    weighting_request,
)
from dpfed.runtime.messages import Message, ProtocolError
from dpfed.runtime.private_files import load_or_create_secret
from dpfed.secure import ckks

__all__ = ["Outbox", "SecureRole"]


def _cut(raw: bytes, lengths: list[int]) -> list[bytes]:
    """``raw`` cut into pieces of ``lengths``."""
    out, at = [], 0
    for v in lengths:
        out.append(raw[at:at + v])
        at += v
    return out


class Outbox:
    """Ciphertexts a party has encrypted, kept (owner-only) in ``folder`` under a name per
    message so that a replay sends the same bytes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def kept(self, name: str, make: Callable[[], list[bytes]]) -> list[bytes]:
        """The items kept under ``name``, made by ``make()`` and kept first if missing."""
        def packed() -> bytes:
            items = make()
            return len(items).to_bytes(8, "little") + b"".join(
                len(i).to_bytes(8, "little") for i in items) + b"".join(items)

        raw = load_or_create_secret(self.folder, f"{name}.bin", packed)
        count = int.from_bytes(raw[:8], "little")
        lengths = [int.from_bytes(raw[8 + 8 * k:16 + 8 * k], "little") for k in range(count)]
        return _cut(raw[8 + 8 * count:], lengths)


class MemoryOutbox:
    """An outbox that keeps nothing: for a job run once on an engine (no journal, so no
    replay to send the same bytes again)."""

    def kept(self, name: str, make: Callable[[], list[bytes]]) -> list[bytes]:
        """The items ``make()`` returns."""
        return make()


class SecureRole:
    """Party ``party.index`` (0: the label holder) of a networked secure job.

    Parameters
    ----------
    party : SecureParty
        Its rows, labels (the label holder), set-up and noise generator; its ``keys`` are its
        kept key pair.
    names : tuple of str
        The label holder's and the passive party's names.
    leader : str
        Who receives the round reports.
    outbox : Outbox or MemoryOutbox
    max_bytes : int
        The job's message limit (ciphertexts are sent in parts below it).
    test_rows : matrix or None, shape (N_test, d_j)
        Its test rows (evaluated once, with the final blocks).
    test_labels : numpy.ndarray or None
        The label holder's test labels in {-1, 1}.
    """

    def __init__(self, party: SecureParty, names: tuple[str, str], leader: str, *,
                 outbox: Outbox | MemoryOutbox, max_bytes: int, test_rows: Any = None,
                 test_labels: np.ndarray | None = None) -> None:
        if party.keys is None:
            raise ProtocolError("a networked secure party needs its key pair")
        self.party, self.names, self.leader = party, names, leader
        self.index = party.index
        self.name, self.peer = names[self.index], names[1 - self.index]
        self.outbox, self.max_bytes = outbox, max_bytes
        self.test_rows, self.test_labels = test_rows, test_labels
        self.setup = party.setup
        self.inverse: np.ndarray | None = None
        self.peer_public: bytes | None = None
        self.labels: list[bytes] | None = None  # the label holder's, under its key
        self.parts: dict[str, dict[int, list[bytes]]] = {}
        self.own_noise: np.ndarray | None = None
        self.round = 0  # the Gauss-Seidel round under way
        self.events: list[PrivacyEvent] = []
        self.bytes_sent = 0
        self.seconds = 0.0
        self.finished = False
        self.started = False
        self.peer_costs: dict[str, float] = {}
        self.request: list[bytes] | None = None  # the passive party's copy of Enc_L(r, c)
        self.weighting: WeightedPassive | None = None
        self.weight: float | None = None  # the passive party's copy of the weight

    # -- helpers ----------------------------------------------------------------------------
    def _parts(self, kind: str, block: int, round: int, items: list[bytes]) -> list[Message]:
        out = cipher_parts(self.name, self.peer, round, kind, block, items,
                           max_bytes=self.max_bytes)
        self.bytes_sent += sum(p.nbytes for p in out)
        return list(out)

    def _powers(self, round: int, block: int) -> list[Message]:
        """Its scaled scores' powers under its own key, for the peer's update of ``block``."""
        keys = self.party.keys
        assert keys is not None
        t = self.party.scaled_scores()
        items = self.outbox.kept(
            f"powers-{round}-{block}",
            lambda: [c for m in range(1, self.setup.degree + 1) for c in keys.encrypt(t**m)])
        return self._parts("powers", block, round, items)

    def _event(self, round: int, label: str, sensitivity: float, coordinates: int) -> None:
        z = self.setup.noise_multiplier
        self.events.append(PrivacyEvent(
            party=self.name, round=round, mechanism="gaussian", noise_multiplier=z,
            l2_sensitivity=sensitivity, sigma=z * sensitivity, label=label,
            coordinates=coordinates))

    # -- the protocol -----------------------------------------------------------------------
    def start(self) -> list[Message]:
        """Its public context (and the label holder's encrypted labels), its Gram release,
        and the passive party's first powers."""
        if self.started:
            raise ProtocolError(f"{self.name} has started already")
        self.started = True
        begun = time.perf_counter()
        party, keys = self.party, self.party.keys
        assert keys is not None
        out = self._parts("public", self.index, 0,
                          self.outbox.kept("public", lambda: [keys.public_bytes()]))
        if self.index == 0:
            assert party.y is not None
            labels = party.y
            out += self._parts("labels", 0, 0,
                               self.outbox.kept("labels", lambda: keys.encrypt(labels)))
        self.inverse = party.preconditioner(party.gram_release())
        if party.protected:  # every grid coordinate of the job is counted on this release
            self._event(0, "secure Gram", self.setup.gram_sensitivity, self.setup.coordinates)
        if self.index == 0 and not party.protected:
            party.warm_start()
        if self.index == 1:
            out += self._powers(0, 0)
        self.seconds += time.perf_counter() - begun
        return out

    def handle(self, message: Message) -> list[Message]:
        if message.sender != self.peer:
            raise ProtocolError(f"{self.name} takes messages from {self.peer} only; found one "
                                f"from {message.sender}")
        if self.finished:
            raise ProtocolError(f"{self.name} has finished; found {type(message).__name__}")
        begun = time.perf_counter()
        try:
            if isinstance(message, CipherPart):
                return self._take_part(message)
            if isinstance(message, GradientRelease):
                return self._step(message)
            if isinstance(message, FinalScores) and self.index == 0:
                return self._final(message)
            if isinstance(message, WeightRelease) and self.index == 1:
                return self._take_weight(message)
            raise ProtocolError(f"{self.name} cannot take {type(message).__name__}")
        finally:
            self.seconds += time.perf_counter() - begun

    def _take_part(self, message: CipherPart) -> list[Message]:
        key = f"{message.kind}-{message.round}-{message.block}"
        got = self.parts.setdefault(key, {})
        if message.part in got or not 0 <= message.part < message.parts:
            raise ProtocolError(f"part {message.part} of {key} again or out of range")
        got[message.part] = message.items()
        if len(got) < message.parts:
            return []
        items = [i for k in range(message.parts) for i in got[k]]
        del self.parts[key]
        if message.kind == "public":
            self.peer_public = items[0]
            return []
        if message.kind == "labels" and self.index == 1:
            self.labels = items
            return []
        if message.kind == "powers":
            return self._evaluate(message.round, message.block, items)
        if message.kind == "gradient":
            return self._release(message.round, message.block, items)
        if message.kind == "request" and self.index == 1 and self.setup.weighted:
            if self.request is not None:
                raise ProtocolError(f"{self.name} has the weighting request already")
            self.request = items
            return self._statistics()
        if message.kind == "statistics" and self.index == 0 and self.setup.weighted:
            return self._weigh(items)
        raise ProtocolError(f"{self.name} cannot take {message.kind!r} ciphertexts")

    def _evaluate(self, round: int, block: int, items: list[bytes]) -> list[Message]:
        """Step 2 of its own block's update: the encrypted gradient with its noise inside."""
        if block != self.index or round != self.round or self.own_noise is not None:
            raise ProtocolError(f"{self.name} did not expect powers for block {block} in round "
                                f"{round}")
        if self.peer_public is None or (self.index == 1 and self.labels is None):
            raise ProtocolError(f"{self.name} has not received {self.peer}'s context and labels")
        chunks = ckks.chunk_count(self.setup.n_samples)
        if len(items) != chunks * self.setup.degree:
            raise ProtocolError(f"expected {chunks * self.setup.degree} ciphertexts of powers; "
                                f"found {len(items)}")
        powers = [items[m * chunks:(m + 1) * chunks] for m in range(self.setup.degree)]
        party = self.party
        # numpy's stubs take the size (an int typed Any) for None: an array of shape (d_j,)
        own_noise = cast(np.ndarray,
                         party.rng.normal(0.0, party.round_release.sigma, party.w.shape[0]))
        self.own_noise = own_noise
        public = self.peer_public
        # kept too: SEAL re-randomises a product by a plaintext that encodes to zero (a
        # column's all-zero chunk), so recomputing would not give the same bytes
        products = self.outbox.kept(
            f"gradient-{round}-{block}",
            lambda: encrypted_gradient(party, ckks.PublicContext.from_bytes(public), powers,
                                       self.labels, own_noise))
        return self._parts("gradient", block, round, products)

    def _release(self, round: int, block: int, items: list[bytes]) -> list[Message]:
        """Step 3 as key holder: decrypt, add its noise, return the d-vector."""
        keys = self.party.keys
        assert keys is not None
        if block == self.index or len(items) != self.setup.block_widths[block]:
            raise ProtocolError(f"{self.name} did not expect a gradient of block {block} with "
                                f"{len(items)} columns")
        released = released_gradient(self.party, keys.decrypt_sums(items))
        # the round's release of this party's data: its noise on the peer's gradient (the
        # passive party in A, the label holder in B)
        if self.party.protected:
            self._event(round + 1, "secure gradient", self.setup.gradient_sensitivity, 0)
        self.bytes_sent += 8 * released.shape[0]
        out: list[Message] = [GradientRelease(self.name, self.peer, round, block, released)]
        if self.index == 0:  # B3: the round is over for the label holder
            self.round += 1
            if self.round < self.setup.rounds:  # the last one is reported with the figures
                out.append(self._report(self.round, finished=False))
            elif self.setup.weighted:
                out += self._request()
        return out

    # -- the weighting (protect="passive") --------------------------------------------------
    def _own_request(self) -> WeightingRequest:
        party = self.party
        if party.own_model is None:  # protect="parties": fitted only after every release
            party.fit_own_model()
        assert party.own_model is not None and party.y is not None
        return weighting_request(np.asarray(party.rows @ party.own_model).ravel(), party.y)

    def _request(self) -> list[Message]:
        r"""The label holder's :math:`\mathrm{Enc}_L(r), \mathrm{Enc}_L(c)` at its own model."""
        keys = self.party.keys
        assert keys is not None
        request = self._own_request()
        items = self.outbox.kept("request", lambda: keys.encrypt(request.gradient)
                                 + keys.encrypt(request.curvature))
        return self._parts("request", 1, self.setup.rounds, items)

    def _statistics(self) -> list[Message]:
        """The passive party's noisy statistics under the label holder's key, once it has both
        the request and its final block."""
        if self.request is None or self.round != self.setup.rounds or self.weight is not None:
            return []
        if self.peer_public is None:
            raise ProtocolError(f"{self.name} has not received {self.peer}'s context")
        chunks = ckks.chunk_count(self.setup.n_samples)
        if len(self.request) != 2 * chunks:
            raise ProtocolError(f"expected {2 * chunks} ciphertexts of the weighting request; "
                                f"found {len(self.request)}")
        release = self.setup.statistics_release()
        noise = release.noise(self.party.rng)
        scores = np.asarray(self.party.rows @ self.party.w).ravel()
        public, request = self.peer_public, self.request
        items = self.outbox.kept("statistics", lambda: encrypted_statistics(
            release, ckks.PublicContext.from_bytes(public),
            [request[:chunks], request[chunks:]], scores, noise))
        self._event(self.setup.rounds + 1, "secure weighting statistics", 1.0, 0)
        self.request = None  # answered; nothing else waits for it
        out = self._parts("statistics", 1, self.setup.rounds, items)
        if self.setup.protect == "parties":  # the weight stays with the label holder
            out += self._finish()
        return out

    def _weigh(self, items: list[bytes]) -> list[Message]:
        """The label holder's weight from the decrypted statistics; its own model becomes its
        block."""
        keys, party = self.party.keys, self.party
        assert keys is not None
        if self.round != self.setup.rounds or self.weighting is not None or len(items) != 3:
            raise ProtocolError(f"{self.name} did not expect {len(items)} statistics now")
        released = keys.decrypt_sums(items)
        if not np.all(np.isfinite(released)):
            raise ProtocolError("the weighting statistics are not finite")
        self.weighting = choose_weight(self.setup.statistics_release(), self._own_request(),
                                       released)
        assert party.own_model is not None
        party.w = party.own_model.copy()
        if self.setup.protect == "parties":  # a function of its protected data: kept
            return []
        return [WeightRelease(self.name, self.peer, self.setup.rounds, self.weighting.beta)]

    def _take_weight(self, message: WeightRelease) -> list[Message]:
        weight = float(message.weight)
        if self.weight is not None or self.round != self.setup.rounds or not 0.0 <= weight <= 1:
            raise ProtocolError(f"{self.name} did not expect the weight {weight} now")
        self.weight = weight
        return self._finish()

    def share(self, scores: np.ndarray) -> np.ndarray:
        """Its share of a prediction from its rows' ``scores``: the passive party's clipped
        and weighted when the label holder told it the weight, else the scores."""
        if self.index == 1 and self.weight is not None:
            bound = self.setup.passive_score_bound
            return cast(np.ndarray, self.weight * np.clip(scores, -bound, bound))
        return scores

    def peer_share(self, scores: np.ndarray) -> np.ndarray:
        """What the label holder makes of the passive party's share under
        ``protect="parties"``, where the weight stays with it: clipped and weighted; else the
        share as sent."""
        if self.index == 0 and self.setup.protect == "parties" and self.weighting is not None:
            return self.weighting.share(scores)
        return scores

    def _finish(self) -> list[Message]:
        """The passive party's last word: its test shares and its bytes."""
        self.finished = True
        scores = (np.zeros(0) if self.test_rows is None else self.share(
            np.asarray(self.party.prepared(self.test_rows) @ self.party.w).ravel()))
        return [FinalScores(self.name, self.peer, self.round, scores, self.bytes_sent)]

    def _step(self, message: GradientRelease) -> list[Message]:
        """Step 4 of its own block's update, then what follows it."""
        if message.block != self.index or message.round != self.round or self.own_noise is None:
            raise ProtocolError(f"{self.name} did not expect a gradient of block "
                                f"{message.block} in round {message.round}")
        values = np.asarray(message.values, dtype=np.float64).reshape(-1)
        if values.shape != self.party.w.shape or not np.all(np.isfinite(values)):
            raise ProtocolError(f"a released gradient of shape {values.shape}; expected "
                                f"{self.party.w.shape}, finite")
        assert self.inverse is not None
        take_gradient(self.party, values, self.own_noise, self.inverse)
        self.own_noise = None
        if self.index == 0:
            return self._powers(self.round, 1)  # B1
        self.round += 1
        if self.round < self.setup.rounds:
            return self._powers(self.round, 0)  # A1 of the next round
        if self.setup.weighted:
            return self._statistics()  # if the request is in; else when it comes
        return self._finish()

    def _final(self, message: FinalScores) -> list[Message]:
        """The passive party's last word: the label holder reports the job finished."""
        if (self.round != self.setup.rounds or self.own_noise is not None
                or (self.setup.weighted and self.weighting is None)):
            raise ProtocolError("the passive party finished before the last round")
        self.peer_costs = {"bytes_sent": int(message.bytes_sent)}
        figures: dict[str, float] = {}
        theirs = np.asarray(message.test_scores, dtype=np.float64).reshape(-1)
        # under "parties" its block is its exact model: figures of it stay with it
        if (self.test_rows is not None and self.test_labels is not None and theirs.size
                and self.setup.protect != "parties"):
            own = np.asarray(self.party.prepared(self.test_rows) @ self.party.w).ravel()
            if own.shape != theirs.shape:
                raise ProtocolError(f"the passive party scored {theirs.size} test rows; the "
                                    f"label holder holds {own.size}")
            figures = score_metrics(own + self.peer_share(theirs), self.test_labels)
        self.finished = True
        return [self._report(self.setup.rounds, finished=True, **figures)]

    def _report(self, round: int, *, finished: bool, test_log_loss: float | None = None,
                test_accuracy: float | None = None) -> RoundReport:
        return RoundReport(self.name, self.leader, round, None, test_log_loss, test_accuracy,
                           None, 0.0, None, None, finished)

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays: dict[str, np.ndarray] = {"w": self.party.w.copy()}
        if self.inverse is not None:
            arrays["inverse"] = self.inverse
        if self.own_noise is not None:
            arrays["own_noise"] = self.own_noise
        if self.peer_public is not None:
            arrays["peer_public"] = np.frombuffer(self.peer_public, dtype=np.uint8).copy()
        if self.labels is not None:
            arrays["labels"] = np.frombuffer(b"".join(self.labels), dtype=np.uint8).copy()
        if self.request is not None:
            arrays["request"] = np.frombuffer(b"".join(self.request), dtype=np.uint8).copy()
        if self.party.own_model is not None:
            arrays["own_model"] = self.party.own_model.copy()
        parts = {}
        for key, got in self.parts.items():
            parts[key] = {str(k): [len(i) for i in items] for k, items in got.items()}
            for k, items in got.items():
                arrays[f"part|{key}|{k}"] = np.frombuffer(b"".join(items), dtype=np.uint8).copy()
        meta = {
            "round": self.round, "finished": self.finished, "started": self.started,
            "rng": generator_state(self.party.rng), "bytes_sent": self.bytes_sent,
            "seconds": self.seconds, "events": [asdict(e) for e in self.events],
            "labels": None if self.labels is None else [len(i) for i in self.labels],
            "parts": json.dumps(parts), "peer_costs": self.peer_costs,
            "request": None if self.request is None else [len(i) for i in self.request],
            "weight": self.weight,
            "weighting": None if self.weighting is None else self.weighting.as_dict(),
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        cut = _cut
        self.party.w = np.asarray(arrays["w"], dtype=np.float64).copy()
        self.inverse = arrays.get("inverse")
        self.own_noise = arrays.get("own_noise")
        self.peer_public = arrays["peer_public"].tobytes() if "peer_public" in arrays else None
        self.labels = (None if meta["labels"] is None
                       else cut(arrays["labels"].tobytes(), meta["labels"]))
        self.parts = {
            key: {int(k): cut(arrays[f"part|{key}|{k}"].tobytes(), lengths)
                  for k, lengths in got.items()}
            for key, got in json.loads(meta["parts"]).items()
        }
        self.round, self.finished = int(meta["round"]), bool(meta["finished"])
        self.started = bool(meta["started"])
        restore_generator_state(self.party.rng, meta["rng"])
        self.bytes_sent, self.seconds = int(meta["bytes_sent"]), float(meta["seconds"])
        self.peer_costs = dict(meta.get("peer_costs", {}))
        self.events = [PrivacyEvent(**e) for e in meta["events"]]
        self.request = (None if meta.get("request") is None
                        else cut(arrays["request"].tobytes(), meta["request"]))
        if "own_model" in arrays:
            self.party.own_model = np.asarray(arrays["own_model"], dtype=np.float64).copy()
        self.weight = meta.get("weight")
        chosen = meta.get("weighting")
        self.weighting = None if chosen is None else WeightedPassive.from_dict(chosen)
