"""The alignment job's two roles, transport-free: the label holder seeks, every other party
holds (:mod:`dpfed.data.psi`).

1. The label holder sends each party its request for each part (``train``, and ``test``
   when the job has test tables), its IDs under its PSI key.
2. Each party answers with its setup and its response (one :class:`PsiAnswer` per part),
   its width and the hashes of its declared column names.
3. With every answer in, the label holder intersects its IDs with each party's, keeps those
   every party holds, orders them by HMAC-SHA256 under a fresh order key
   (:func:`dpfed.data.psi.agreed_order`) and sends each party the tags in that order, the
   key, the digest and the widths; each party keeps its own IDs whose tags are listed.

Both roles draw their keys from their owners' kept secrets, so a restarted party sends the
very same bytes again (the runtime drops the repeats).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpfed.data.psi import (
    PsiHolder,
    PsiSeeker,
    agreed_order,
    alignment_digest,
    order_tags,
)
from dpfed.protocols.psi_align.messages import PsiAnswer, PsiOrder, PsiRequest
from dpfed.runtime.messages import Message, ProtocolError, bytes_as_words, words_as_bytes

__all__ = ["AlignmentHolder", "AlignmentSeeker", "column_hashes"]

ROUND = 0


def column_hashes(job_id: str, names: Sequence[str]) -> list[str]:
    """SHA-256 of each declared column name, salted by the job id."""
    return [hashlib.sha256(f"{job_id}\x00{n}".encode()).hexdigest() for n in names]


class AlignmentSeeker:
    """The label holder's side.

    Parameters
    ----------
    name : str
    holders : sequence of str
        The other parties, in job-file order.
    ids : dict of str to list of str
        Its IDs per part (``"train"``, and ``"test"`` if the job has test tables).
    width : int
        Its encoded width.
    columns : list of str
        :func:`column_hashes` of its declared columns (the label's included).
    psi_key, order_key : bytes
        Its PSI key and the order key (kept secrets).
    min_rows : int
        The fewest shared training rows accepted.
    described : dict of str to str, optional
        How a refusal names each part's rows (default ``"<part> tables"``).
    """

    def __init__(
        self,
        name: str,
        holders: Sequence[str],
        ids: dict[str, list[str]],
        *,
        width: int,
        columns: list[str],
        psi_key: bytes,
        order_key: bytes,
        min_rows: int,
        described: dict[str, str] | None = None,
    ) -> None:
        self.name, self.holders = name, list(holders)
        self.ids, self.width, self.columns = ids, width, columns
        self.psi_key, self.order_key, self.min_rows = psi_key, order_key, min_rows
        self.described = described or {}
        self.answers: dict[str, dict[str, PsiAnswer]] = {part: {} for part in ids}
        #: how many of its IDs of each part each other party holds
        self.held: dict[str, dict[str, int]] = {part: {} for part in ids}
        self.orders: dict[str, list[str]] = {}
        self.refusal = ""
        self.widths: list[int] = []
        self.finished = False

    @property
    def round(self) -> int:
        return 1 if self.finished else 0

    def start(self) -> list[Message]:
        out: list[Message] = []
        for part, ids in self.ids.items():
            request = PsiSeeker(ids, self.psi_key).request()
            words = bytes_as_words(request)
            out += [
                PsiRequest(self.name, h, ROUND, part, len(ids), words, len(request))
                for h in self.holders
            ]
        return out

    def handle(self, message: Message) -> list[Message]:
        if not isinstance(message, PsiAnswer) or message.sender not in self.holders:
            raise ProtocolError(
                f"{self.name} takes PSI answers from {self.holders} only. "
                f"Found {type(message).__name__} from {message.sender}"
            )
        if message.part not in self.answers or message.sender in self.answers[message.part]:
            raise ProtocolError(
                f"an unexpected answer for part {message.part!r} from {message.sender}"
            )
        self.answers[message.part][message.sender] = message
        if any(len(got) < len(self.holders) for got in self.answers.values()):
            return []
        return self._order()

    def _shared(self, part: str) -> list[str]:
        seeker = PsiSeeker(self.ids[part], self.psi_key)
        shared = set(self.ids[part])
        for h in self.holders:
            a = self.answers[part][h]
            theirs = set(
                seeker.intersection(
                    words_as_bytes(a.setup, a.setup_nbytes),
                    words_as_bytes(a.response, a.response_nbytes),
                )
            )
            self.held[part][h] = len(theirs)
            shared &= theirs
        return [i for i in self.ids[part] if i in shared]

    def _check(self, part: str, order: list[str]) -> str:
        owner: dict[str, str] = {c: self.name for c in self.columns}
        for h in self.holders:
            for c in json.loads(self.answers[part][h].columns):
                if c in owner:
                    return (
                        f"parties {owner[c]!r} and {h!r} both declare a column of the same "
                        "name: each column belongs to one party (rename one, or leave it "
                        "out of one schema)"
                    )
                owner[c] = h
        if part == "train" and len(order) < self.min_rows:
            return (
                f"the parties share {len(order)} IDs, fewer than [job].min_rows = {self.min_rows}"
            )
        if not order:
            return f"the parties' {self.described.get(part, part + ' tables')} share no ID"
        return ""

    def _order(self) -> list[Message]:
        first = next(iter(self.ids))  # every answer states the same width
        widths = json.dumps([self.width] + [self.answers[first][h].width for h in self.holders])
        orders = {part: agreed_order(self._shared(part), self.order_key) for part in self.ids}
        self.refusal = next((r for r in (self._check(p, o) for p, o in orders.items()) if r), "")
        out: list[Message] = []
        for part, order in orders.items():
            kept = [] if self.refusal else order
            tags = bytes_as_words(b"".join(order_tags(kept, self.order_key)))
            out += [
                PsiOrder(
                    self.name,
                    h,
                    ROUND,
                    part,
                    self.order_key.hex(),
                    tags,
                    len(kept),
                    alignment_digest(kept),
                    widths,
                    self.refusal,
                )
                for h in self.holders
            ]
        self.orders = {} if self.refusal else orders
        self.widths = json.loads(widths)
        self.finished = True
        return out

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays: dict[str, np.ndarray] = {}
        answers: dict[str, dict[str, Any]] = {}
        for part, got in self.answers.items():
            answers[part] = {}
            for h, a in got.items():
                arrays[f"{part}|{h}|setup"], arrays[f"{part}|{h}|response"] = a.setup, a.response
                answers[part][h] = {
                    "width": a.width,
                    "columns": a.columns,
                    "setup_nbytes": a.setup_nbytes,
                    "response_nbytes": a.response_nbytes,
                }
        return arrays, {
            "answers": answers,
            "finished": self.finished,
            "orders": self.orders,
            "refusal": self.refusal,
            "widths": self.widths,
        }

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.answers = {part: {} for part in self.ids}
        for part, got in meta["answers"].items():
            for h, a in got.items():
                self.answers[part][h] = PsiAnswer(
                    h,
                    self.name,
                    ROUND,
                    part,
                    int(a["width"]),
                    a["columns"],
                    arrays[f"{part}|{h}|setup"],
                    int(a["setup_nbytes"]),
                    arrays[f"{part}|{h}|response"],
                    int(a["response_nbytes"]),
                )
        self.finished, self.refusal = bool(meta["finished"]), meta["refusal"]
        self.orders, self.widths = dict(meta["orders"]), list(meta["widths"])


class AlignmentHolder:
    """Every other party's side (parameters as :class:`AlignmentSeeker`'s, its label holder
    ``seeker`` in place of the holders, no order key)."""

    def __init__(
        self,
        name: str,
        seeker: str,
        ids: dict[str, list[str]],
        *,
        width: int,
        columns: list[str],
        psi_key: bytes,
    ) -> None:
        self.name, self.seeker = name, seeker
        self.ids, self.width, self.columns, self.psi_key = ids, width, columns, psi_key
        self.orders: dict[str, list[str]] = {}
        self.digests: dict[str, str] = {}
        self.widths: list[int] = []
        self.refusal = ""

    @property
    def finished(self) -> bool:
        return len(self.digests) == len(self.ids)

    @property
    def round(self) -> int:
        return 1 if self.finished else 0

    def start(self) -> list[Message]:
        return []

    def handle(self, message: Message) -> list[Message]:
        if message.sender != self.seeker:
            raise ProtocolError(
                f"{self.name} aligns with {self.seeker} only. Found a message from {message.sender}"
            )
        if isinstance(message, PsiRequest) and message.part in self.ids:
            holder = PsiHolder(self.ids[message.part], self.psi_key)
            setup = holder.setup(message.size)
            response = holder.answer(words_as_bytes(message.blob, message.nbytes))
            return [
                PsiAnswer(
                    self.name,
                    self.seeker,
                    ROUND,
                    message.part,
                    self.width,
                    json.dumps(self.columns),
                    bytes_as_words(setup),
                    len(setup),
                    bytes_as_words(response),
                    len(response),
                )
            ]
        if isinstance(message, PsiOrder) and message.part in self.ids:
            return self._take(message)
        raise ProtocolError(
            f"{self.name} cannot take {type(message).__name__} for part "
            f"{getattr(message, 'part', None)!r}"
        )

    def _take(self, message: PsiOrder) -> list[Message]:
        key = bytes.fromhex(message.key)
        raw = words_as_bytes(message.tags, 32 * message.n)
        wanted = [raw[32 * i : 32 * (i + 1)] for i in range(message.n)]
        mine = dict(
            zip(order_tags(self.ids[message.part], key), self.ids[message.part], strict=True)
        )
        missing = sum(t not in mine for t in wanted)
        if missing:
            raise ProtocolError(f"the label holder lists {missing} rows {self.name} does not hold")
        order = [mine[t] for t in wanted]
        if alignment_digest(order) != message.digest:
            raise ProtocolError("the agreed rows' digest differs from the label holder's")
        self.orders[message.part] = order
        self.digests[message.part] = message.digest
        self.widths = json.loads(message.widths)
        self.refusal = message.refusal
        return []

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return {}, {
            "orders": self.orders,
            "digests": self.digests,
            "widths": self.widths,
            "refusal": self.refusal,
        }

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.orders, self.digests = dict(meta["orders"]), dict(meta["digests"])
        self.widths, self.refusal = list(meta["widths"]), meta["refusal"]
