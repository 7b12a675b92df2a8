r"""The secure vertical protocol between party processes: each party's transport-free state
machine (the runtime delivers its messages; :mod:`dpfed.protocols.vertical_secure.host`).

The steps of :func:`dpfed.protocols.vertical_secure.party.block_update`, as messages. At the
start the key holders (:data:`~dpfed.protocols.vertical_secure.party.KEY_HOLDERS`: the label
holder and the first passive party) send their public CKKS contexts to every other party
(:class:`CipherPart` ``"public"``, in pieces below the message limit), the label holder its
encrypted labels to every passive party (``"labels"``), and each party releases its Gram
matrix to itself. Round :math:`t` then updates the blocks in order, ``0, 1, ..., K - 1``;
block ``j``'s key holder ``k`` is party 1 for block 0 and the label holder for every other
(:func:`~dpfed.protocols.vertical_secure.party.exchange_order`):

1. ``k`` -> the first party of the route: :math:`\mathrm{Enc}_k(t_k^m)`, ``"powers"``; each
   other party ``f`` on the route (every party but ``j`` and ``k``, in order) folds its own
   scores in, :math:`\mathrm{Enc}_k((s + t_f)^m)`, and passes them on, the last to ``j``;
2. ``j`` -> ``k``: :math:`\mathrm{Enc}_k(X_j^\top r + \eta_j)`, ``"gradient"`` (for
   ``j >= 1`` the labels entering encrypted);
3. ``k`` -> ``j``: the decrypted d-vector with ``k``'s exact grid noise
   (:class:`GradientRelease`) when ``k``'s data or a folder's is protected; ``j`` steps.

The label holder sends the powers of block ``j + 1`` as soon as it has released block ``j``'s
gradient (and block 1's after its own step); party 1 sends block 0's of the next round after
its own step. A party folds (or evaluates) powers only when Gauss-Seidel has its own block
where the round needs it (stepped in the round if its block comes first), and keeps them
waiting until then, so the order in which messages of different links arrive does not matter.
With two parties there is no fold: party 1's powers go to the label holder and back, then
the label holder's to party 1. A passive party's last word is :class:`FinalScores`, after its
last step or its last fold; the label holder reports the job finished once every passive
party's is in.

When the label holder keeps an exact model of its own (``protect="passive"`` or
``"parties"``), it then weighs the passive scores against it
(:mod:`dpfed.protocols.vertical_secure.role_weighting`).

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

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from dpfed.core.losses import score_metrics
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.vertical.evaluation import RoundReport
from dpfed.protocols.vertical_secure.messages import (
    CipherPart,
    FinalScores,
    GradientRelease,
    WeightRelease,
    cipher_parts,
)
from dpfed.protocols.vertical_secure.party import (
    KEY_HOLDERS,
    SecureParty,
    encrypted_gradient,
    exchange_order,
    needs_rotations,
    released_gradient,
    take_gradient,
)
from dpfed.protocols.vertical_secure.role_state import CheckpointedRole, cut
from dpfed.protocols.vertical_secure.role_weighting import WeighingSteps
from dpfed.protocols.vertical_secure.weighting import WeightedPassive
from dpfed.runtime.messages import Message, ProtocolError
from dpfed.runtime.private_files import load_or_create_secret
from dpfed.secure import ckks

__all__ = ["Outbox", "SecureRole"]


class Outbox:
    """Ciphertexts a party has encrypted, kept (owner-only) in ``folder`` under a name per
    message so that a replay sends the same bytes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def kept(self, name: str, make: Callable[[], list[bytes]]) -> list[bytes]:
        """The items kept under ``name``, made by ``make()`` and kept first if missing."""

        def packed() -> bytes:
            items = make()
            return (
                len(items).to_bytes(8, "little")
                + b"".join(len(i).to_bytes(8, "little") for i in items)
                + b"".join(items)
            )

        raw = load_or_create_secret(self.folder, f"{name}.bin", packed)
        count = int.from_bytes(raw[:8], "little")
        lengths = [int.from_bytes(raw[8 + 8 * k : 16 + 8 * k], "little") for k in range(count)]
        return cut(raw[8 + 8 * count :], lengths)


class MemoryOutbox:
    """An outbox that keeps nothing: for a job run once on an engine (no journal, so no
    replay to send the same bytes again)."""

    def kept(self, name: str, make: Callable[[], list[bytes]]) -> list[bytes]:
        """The items ``make()`` returns."""
        return make()


class SecureRole(WeighingSteps, CheckpointedRole):
    """Party ``party.index`` (0: the label holder) of a networked secure job.

    Parameters
    ----------
    party : SecureParty
        Its rows, labels (the label holder), set-up and noise generator; its ``keys`` are its
        kept key pair (the key holders', :data:`~.party.KEY_HOLDERS`; the other passive
        parties hold none).
    names : tuple of str
        The parties' names, the label holder's first, in block order.
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

    def __init__(
        self,
        party: SecureParty,
        names: tuple[str, ...],
        leader: str,
        *,
        outbox: Outbox | MemoryOutbox,
        max_bytes: int,
        test_rows: Any = None,
        test_labels: np.ndarray | None = None,
    ) -> None:
        if party.keys is None and party.index in KEY_HOLDERS:
            raise ProtocolError("a networked secure key holder needs its key pair")
        if len(names) != party.setup.parties:
            raise ProtocolError(
                f"a secure job of {party.setup.parties} parties; found the names {list(names)}"
            )
        self.party, self.names, self.leader = party, tuple(names), leader
        self.index = party.index
        self.name = names[self.index]
        self.k = len(names)
        self.outbox, self.max_bytes = outbox, max_bytes
        self.test_rows, self.test_labels = test_rows, test_labels
        self.setup = party.setup
        self.inverse: np.ndarray | None = None
        self.publics: dict[int, bytes] = {}  # the key holders' public contexts
        self._contexts: dict[int, ckks.PublicContext] = {}
        self.labels: list[bytes] | None = None  # the label holder's, under its key
        self.parts: dict[str, dict[int, list[bytes]]] = {}
        self.waiting: dict[str, list[bytes]] = {}  # powers it cannot fold or evaluate yet
        self.own_noise: np.ndarray | None = None
        self.round = 0  # the Gauss-Seidel round under way (its own block's)
        self.events: list[PrivacyEvent] = []
        self.bytes_sent = 0
        self.seconds = 0.0
        self.finished = False
        self.started = False
        self.peer_costs: dict[str, float] = {}  # the passive parties' bytes, summed
        self.request: list[bytes] | None = None  # a passive party's copy of Enc_L(r, c)
        self.statistics: dict[int, list[bytes]] = {}  # the label holder's, by passive party
        self.final_scores: dict[int, np.ndarray] = {}  # the label holder's, by passive party
        self.weighting: WeightedPassive | None = None
        self.weight: float | None = None  # a passive party's copy of the weight

    # -- helpers ----------------------------------------------------------------------------
    def _parts(
        self, to: int, kind: str, block: int, round: int, items: list[bytes]
    ) -> list[Message]:
        out = cipher_parts(
            self.name, self.names[to], round, kind, block, items, max_bytes=self.max_bytes
        )
        self.bytes_sent += sum(p.nbytes for p in out)
        return list(out)

    def _context(self, holder: int) -> ckks.PublicContext:
        """Key holder ``holder``'s public context, loaded once."""
        if holder not in self._contexts:
            self._contexts[holder] = ckks.PublicContext.from_bytes(self.publics[holder])
        return self._contexts[holder]

    def _route(self, block: int) -> tuple[int, ...]:
        """Who the powers of ``block``'s update pass through after its key holder: the
        folders in order, then the evaluator."""
        return (*exchange_order(block, self.k)[1], block)

    def _powers(self, round: int, block: int) -> list[Message]:
        """Its scaled scores' powers under its own key, for the update of ``block``, to the
        first party of the block's route."""
        keys = self.party.keys
        assert keys is not None
        t = self.party.scaled_scores()
        items = self.outbox.kept(
            f"powers-{round}-{block}",
            lambda: [c for m in range(1, self.setup.degree + 1) for c in keys.encrypt(t**m)],
        )
        return self._parts(self._route(block)[0], "powers", block, round, items)

    def _event(self, round: int, label: str, sensitivity: float, coordinates: int) -> None:
        z = self.setup.noise_multiplier
        self.events.append(
            PrivacyEvent(
                party=self.name,
                round=round,
                mechanism="gaussian",
                noise_multiplier=z,
                l2_sensitivity=sensitivity,
                sigma=z * sensitivity,
                label=label,
                coordinates=coordinates,
            )
        )

    def _round_event(self, round: int) -> None:
        """The round's release of its data (one a round: every party's view of a round is one
        Gaussian release of multiplier ``z``, docs/privacy.md), if it is protected."""
        if self.party.protected:
            self._event(round + 1, "secure gradient", self.setup.gradient_sensitivity, 0)

    def _expect(self, message: Message, index: int, what: str) -> None:
        if message.sender != self.names[index]:
            raise ProtocolError(
                f"{what} comes from {self.names[index]}; found one from {message.sender}"
            )

    # -- the protocol -----------------------------------------------------------------------
    def start(self) -> list[Message]:
        """A key holder's public context to every other party (and the label holder's
        encrypted labels to every passive party), its Gram release, and the first passive
        party's first powers."""
        if self.started:
            raise ProtocolError(f"{self.name} has started already")
        self.started = True
        begun = time.perf_counter()
        party, keys = self.party, self.party.keys
        out: list[Message] = []
        if keys is not None:  # in pieces: 118 MB at N = 16384, above a message's limit
            piece = max(1, self.max_bytes // 4)
            for other in range(self.k):
                if other == self.index:
                    continue
                rotations = needs_rotations(other, self.index, self.k)  # else: a folder's
                name = "public" if rotations else "public-folding"
                whole = self.outbox.kept(name, lambda r=rotations: [keys.public_bytes(r)])[0]
                public = [whole[at : at + piece] for at in range(0, len(whole), piece)]
                out += self._parts(other, "public", self.index, 0, public)
        if self.index == 0:
            assert party.y is not None and keys is not None
            y = party.y
            labels = self.outbox.kept("labels", lambda: keys.encrypt(y))
            for passive in self.passives:
                out += self._parts(passive, "labels", 0, 0, labels)
        self.inverse = party.preconditioner(party.gram_release())
        if party.protected:  # every grid coordinate of the job is counted on this release
            self._event(0, "secure Gram", self.setup.gram_sensitivity, self.setup.coordinates)
        if self.index == 0 and not party.protected:
            party.warm_start()
        if self.index == exchange_order(0, self.k)[0]:
            out += self._powers(0, 0)
        self.seconds += time.perf_counter() - begun
        return out

    def handle(self, message: Message) -> list[Message]:
        if message.sender not in self.names or message.sender == self.name:
            raise ProtocolError(
                f"{self.name} takes messages from the other parties "
                f"{[n for n in self.names if n != self.name]} only; found one "
                f"from {message.sender}"
            )
        if self.finished:
            raise ProtocolError(f"{self.name} has finished; found {type(message).__name__}")
        begun = time.perf_counter()
        try:
            out = self._dispatch(message)
            return out + self._drain()
        finally:
            self.seconds += time.perf_counter() - begun

    def _dispatch(self, message: Message) -> list[Message]:
        if isinstance(message, CipherPart):
            return self._take_part(message)
        if isinstance(message, GradientRelease):
            self._expect(
                message,
                exchange_order(message.block, self.k)[0],
                f"a released gradient of block {message.block}",
            )
            return self._step(message)
        if isinstance(message, FinalScores) and self.index == 0:
            return self._final(message)
        if isinstance(message, WeightRelease) and self.index != 0:
            self._expect(message, 0, "the weight")
            return self._take_weight(message)
        raise ProtocolError(f"{self.name} cannot take {type(message).__name__}")

    def _take_part(self, message: CipherPart) -> list[Message]:
        key = f"{message.sender}|{message.kind}-{message.round}-{message.block}"
        got = self.parts.setdefault(key, {})
        if message.part in got or not 0 <= message.part < message.parts:
            raise ProtocolError(f"part {message.part} of {key} again or out of range")
        got[message.part] = message.items()
        if len(got) < message.parts:
            return []
        items = [i for k in range(message.parts) for i in got[k]]
        del self.parts[key]
        return self._take_items(message, items)

    def _take_items(self, message: CipherPart, items: list[bytes]) -> list[Message]:
        kind, round, block = message.kind, message.round, message.block
        if kind == "public" and block in KEY_HOLDERS and block != self.index:
            self._expect(message, block, "a key holder's public context")
            if block in self.publics:
                raise ProtocolError(f"{self.name} has {message.sender}'s context already")
            self.publics[block] = b"".join(items)
            return []
        if kind == "labels" and self.index != 0:
            self._expect(message, 0, "the encrypted labels")
            self.labels = items
            return []
        if kind == "powers" and self.index in self._route(block):
            route = (exchange_order(block, self.k)[0], *self._route(block))
            self._expect(
                message, route[route.index(self.index) - 1], f"the powers of block {block}"
            )
            key = f"{round}-{block}"
            if key in self.waiting or not 0 <= block < self.k:
                raise ProtocolError(
                    f"{self.name} has the powers of block {block} in round {round} already"
                )
            self.waiting[key] = items  # folded or evaluated when it is ready (_drain)
            return []
        if kind == "gradient":
            self._expect(message, block, f"the gradient of block {block}")
            return self._release(round, block, items)
        if kind == "request" and self.index != 0 and self.setup.weighted:
            self._expect(message, 0, "the weighting request")
            if self.request is not None:
                raise ProtocolError(f"{self.name} has the weighting request already")
            self.request = items
            return self._statistics()
        if kind == "statistics" and self.index == 0 and self.setup.weighted:
            self._expect(message, block, f"party {block}'s statistics")
            return self._take_statistics(block, items)
        raise ProtocolError(f"{self.name} cannot take {kind!r} ciphertexts")

    def _ready(self, round: int, block: int) -> bool:
        """Whether it can fold (or, its own block, evaluate) the powers of ``block`` in
        ``round``: it has the key holder's context (and the labels), and its own block is
        where Gauss-Seidel has it then (stepped in ``round`` if it comes before ``block``)."""
        holder = exchange_order(block, self.k)[0]
        if holder not in self.publics:
            return False
        if block != self.index:
            return self.round == (round + 1 if self.index < block else round)
        if self.index != 0 and self.labels is None:
            return False
        return round == self.round and self.own_noise is None

    def _drain(self) -> list[Message]:
        """Fold or evaluate every waiting set of powers that has become ready."""
        out: list[Message] = []
        progressed = True
        while progressed:
            progressed = False
            for key in sorted(self.waiting, key=lambda k: tuple(int(v) for v in k.split("-"))):
                round, block = (int(v) for v in key.split("-"))
                if self._ready(round, block):
                    items = self.waiting.pop(key)
                    out += (
                        self._evaluate(round, block, items)
                        if block == self.index
                        else self._fold(round, block, items)
                    )
                    progressed = True
                    break
        return out

    def _powers_of(self, items: list[bytes], holder: int) -> list[list[bytes]]:
        """The powers' ciphertexts by power (``slots`` values a ciphertext: the key holder's
        ring, larger with more parties)."""
        chunks = ckks.chunk_count(self.setup.n_samples, self._context(holder).slots)
        if len(items) != chunks * self.setup.degree:
            raise ProtocolError(
                f"expected {chunks * self.setup.degree} ciphertexts of powers; found {len(items)}"
            )
        return [items[m * chunks : (m + 1) * chunks] for m in range(self.setup.degree)]

    def _fold(self, round: int, block: int, items: list[bytes]) -> list[Message]:
        """A folder's step: its own scores folded into the powers, passed on along the
        route."""
        holder = exchange_order(block, self.k)[0]
        public = self._context(holder)
        powers = self._powers_of(items, holder)
        scores = self.party.scaled_scores()

        def folded() -> list[bytes]:
            out = ckks.fold_powers([public.load(m) for m in powers], scores)
            return [bytes(c.serialize()) for chunks in out for c in chunks]

        kept = self.outbox.kept(f"fold-{round}-{block}", folded)
        route = self._route(block)
        out = self._parts(route[route.index(self.index) + 1], "powers", block, round, kept)
        last = (self.setup.rounds - 1, self.k - 1)
        if (round, block) == last and not self.setup.weighted:  # its last part in the job
            out += self._finish()
        return out

    def _evaluate(self, round: int, block: int, items: list[bytes]) -> list[Message]:
        """Step 2 of its own block's update: the encrypted gradient with its noise inside."""
        holder = exchange_order(block, self.k)[0]
        powers = self._powers_of(items, holder)
        party = self.party
        # numpy's stubs take the size (an int typed Any) for None: an array of shape (d_j,)
        own_noise = cast(
            np.ndarray, party.rng.normal(0.0, party.round_release.sigma, party.w.shape[0])
        )
        self.own_noise = own_noise
        if self.index not in KEY_HOLDERS:  # a folder's round event: it holds no key
            self._round_event(round)
        public = self._context(holder)
        # kept too: SEAL re-randomises a product by a plaintext that encodes to zero (a
        # column's all-zero chunk), so recomputing would not give the same bytes
        products = self.outbox.kept(
            f"gradient-{round}-{block}",
            lambda: encrypted_gradient(party, public, powers, self.labels, own_noise),
        )
        return self._parts(holder, "gradient", block, round, products)

    def _release(self, round: int, block: int, items: list[bytes]) -> list[Message]:
        """Step 3 as key holder: decrypt, add its noise, return the d-vector; the label
        holder then sends the powers of the next block, or ends its round."""
        keys = self.party.keys
        holder, folders = exchange_order(block, self.k)
        if keys is None or holder != self.index or len(items) != self.setup.block_widths[block]:
            raise ProtocolError(
                f"{self.name} did not expect a gradient of block {block} with {len(items)} columns"
            )
        released = released_gradient(self.party, keys.decrypt_sums(items), bool(folders))
        # the round's release of this party's data: its noise on the first gradient it
        # returns in a round (the first passive party's: block 0; the label holder's: 1)
        if block == min(b for b in range(self.k) if exchange_order(b, self.k)[0] == holder):
            self._round_event(round)
        self.bytes_sent += 8 * released.shape[0]
        out: list[Message] = [GradientRelease(self.name, self.names[block], round, block, released)]
        if self.index == 0 and block + 1 < self.k:
            out += self._powers(round, block + 1)
        elif self.index == 0:  # the last block: the round is over for the label holder
            self.round += 1
            if self.round < self.setup.rounds:  # the last one is reported with the figures
                out.append(self._report(self.round, finished=False))
            elif self.setup.weighted:
                out += self._request()
            else:
                out += self._maybe_finish()  # every passive party may have finished already
        return out

    def _finish(self) -> list[Message]:
        """A passive party's last word: its test shares and its bytes."""
        self.finished = True
        scores = (
            np.zeros(0)
            if self.test_rows is None
            else self.share(np.asarray(self.party.prepared(self.test_rows) @ self.party.w).ravel())
        )
        return [FinalScores(self.name, self.names[0], self.round, scores, self.bytes_sent)]

    def _step(self, message: GradientRelease) -> list[Message]:
        """Step 4 of its own block's update, then what follows it."""
        if message.block != self.index or message.round != self.round or self.own_noise is None:
            raise ProtocolError(
                f"{self.name} did not expect a gradient of block "
                f"{message.block} in round {message.round}"
            )
        values = np.asarray(message.values, dtype=np.float64).reshape(-1)
        if values.shape != self.party.w.shape or not np.all(np.isfinite(values)):
            raise ProtocolError(
                f"a released gradient of shape {values.shape}; expected "
                f"{self.party.w.shape}, finite"
            )
        assert self.inverse is not None
        take_gradient(self.party, values, self.own_noise, self.inverse)
        self.own_noise = None
        if self.index == 0:
            return self._powers(self.round, 1)  # the label holder holds block 1's key
        self.round += 1
        out: list[Message] = []
        if self.round < self.setup.rounds:
            if self.index == exchange_order(0, self.k)[0]:
                out += self._powers(self.round, 0)  # block 0 of the next round
            return out
        if self.setup.weighted:
            return self._statistics()  # if the request is in; else when it comes
        if self.index == self.k - 1:  # else it folds the last block's powers first
            return self._finish()
        return []

    def _final(self, message: FinalScores) -> list[Message]:
        """A passive party's last word; the label holder reports the job finished once every
        passive party's is in."""
        passive = self.names.index(message.sender)
        if passive in self.final_scores or (
            self.setup.weighted and self.weighting is None and self.setup.protect == "passive"
        ):
            raise ProtocolError(f"{message.sender} finished before the last round")
        self.final_scores[passive] = np.asarray(message.test_scores, dtype=np.float64).reshape(-1)
        self.peer_costs[message.sender] = float(message.bytes_sent)
        return self._maybe_finish()

    def _maybe_finish(self) -> list[Message]:
        if (
            self.round != self.setup.rounds
            or len(self.final_scores) < self.k - 1
            or (self.setup.weighted and self.weighting is None)
        ):
            return []
        figures: dict[str, float] = {}
        theirs = [self.final_scores[m] for m in self.passives]
        # under "parties" its block is its exact model: figures of it stay with it
        if (
            self.test_rows is not None
            and self.test_labels is not None
            and all(s.size for s in theirs)
            and self.setup.protect != "parties"
        ):
            own = np.asarray(self.party.prepared(self.test_rows) @ self.party.w).ravel()
            if any(s.shape != own.shape for s in theirs):
                raise ProtocolError(
                    f"the passive parties scored {[s.size for s in theirs]} "
                    f"test rows; the label holder holds {own.size}"
                )
            total = own + sum((self.peer_share(s) for s in theirs), np.zeros_like(own))
            figures = score_metrics(total, self.test_labels)
        self.finished = True
        return [self._report(self.setup.rounds, finished=True, **figures)]

    def _report(
        self,
        round: int,
        *,
        finished: bool,
        test_log_loss: float | None = None,
        test_accuracy: float | None = None,
    ) -> RoundReport:
        return RoundReport(
            self.name,
            self.leader,
            round,
            None,
            test_log_loss,
            test_accuracy,
            None,
            0.0,
            None,
            None,
            finished,
        )
