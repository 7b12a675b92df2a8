"""One party's side of a prediction by ID: the rows to score are agreed by private set
intersection with the recipient, as an aligned job's rows are, then each party scores its
columns of them.

The recipient (the party that receives the scores) seeks, every other party holds
(:class:`~dpfed.protocols.psi_align.roles.AlignmentSeeker`, :class:`~dpfed.protocols.
psi_align.roles.AlignmentHolder`, with fresh keys from the operating system's CSPRNG for each
prediction): the rows scored are the recipient's IDs that every party holds, in an HMAC order
under a fresh key. **What each party learns**: the recipient, which of its IDs each other
party holds; every other party, which of its own IDs are scored (the intersection with all)
and how many IDs the recipient asked about. The leader learns how many rows were scored.

Private set intersection rather than the recipient's list of IDs: a list would tell every
party which customers the recipient asks about, also those it does not hold; here a party
learns only the customers it shares with all. IDs missing at a party are not scored; the
recipient's file counts them per party and lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpfed.data.psi import new_psi_key, order_key
from dpfed.protocols.psi_align.messages import ALIGNMENT_MESSAGES
from dpfed.protocols.psi_align.roles import AlignmentHolder, AlignmentSeeker
from dpfed.runtime.hosting import PartyShare
from dpfed.runtime.messages import Message, ProtocolError

__all__ = ["PREDICTION_MESSAGES", "RowsById"]

#: The messages of a prediction by ID (besides the shares): the alignment job's three.
PREDICTION_MESSAGES = ALIGNMENT_MESSAGES


class RowsById:
    """Party ``name``'s side of prediction ``request`` by ID
    (:class:`dpfed.runtime.hosting.PredictionById`).

    Parameters
    ----------
    name : str
    request : str
        The prediction's id (the ``part`` of its messages).
    data : str
        The rows' file as the leader named it (for messages).
    recipient : str
        The party that receives the scores (the seeker).
    parties : sequence of str
        Every party of the job, in job-file order.
    ids : sequence of str
        This party's IDs of the rows, in its file's order.
    score : callable
        Its share of the scores of the rows with the given IDs, in that order, shape
        ``(n,)``.
    training_ids : frozenset of str
        Its training rows' IDs: a scored row among them is flagged (:class:`PartyShare`).
    """

    def __init__(
        self,
        name: str,
        request: str,
        data: str,
        recipient: str,
        parties: Sequence[str],
        ids: Sequence[str],
        *,
        score: Callable[[list[str]], np.ndarray],
        training_ids: frozenset[str],
    ) -> None:
        self.name, self.request, self.recipient = name, request, recipient
        self.ids = list(ids)
        self.score, self.training_ids = score, training_ids
        self.role: AlignmentSeeker | AlignmentHolder
        if name == recipient:
            self.role = AlignmentSeeker(
                name,
                [p for p in parties if p != recipient],
                {request: self.ids},
                width=0,
                columns=[],
                psi_key=new_psi_key(),
                order_key=order_key(),
                min_rows=1,
                described={request: f"rows of {data!r}"},
            )
        else:
            self.role = AlignmentHolder(
                name, recipient, {request: self.ids}, width=0, columns=[], psi_key=new_psi_key()
            )

    @property
    def finished(self) -> bool:
        return self.role.finished

    @property
    def refusal(self) -> str:
        return self.role.refusal

    def start(self) -> list[Message]:
        return self.role.start()

    def handle(self, message: Message) -> list[Message]:
        if getattr(message, "part", None) != self.request:
            raise ProtocolError(
                f"a message of prediction {getattr(message, 'part', None)!r};"
                f" this prediction is {self.request!r}"
            )
        return self.role.handle(message)

    @property
    def agreed(self) -> list[str]:
        """The rows to score, in the agreed order (empty until agreed)."""
        return list(self.role.orders.get(self.request, []))

    def share(self) -> PartyShare:
        if not self.finished or self.refusal:
            raise ProtocolError(f"prediction {self.request!r} has no agreed rows")
        rows = self.agreed
        scores = np.asarray(self.score(rows), dtype=np.float64).reshape(-1)
        training = np.array([i in self.training_ids for i in rows], dtype=bool)
        return PartyShare(scores, training)

    def listing(self) -> dict[str, Any]:
        """The rows in the recipient's file order: ``order`` (positions among the agreed
        rows), ``ids``, and ``not_scored``: how many of its IDs were not scored, how many
        each other party lacks, and which."""
        if not isinstance(self.role, AlignmentSeeker):
            raise ProtocolError(f"{self.name} is not the recipient of {self.request!r}")
        at = {row: k for k, row in enumerate(self.agreed)}
        ids = [i for i in self.ids if i in at]
        missing = [i for i in self.ids if i not in at]
        held = self.role.held[self.request]
        return {
            "order": [at[i] for i in ids],
            "ids": ids,
            "not_scored": {
                "rows": len(missing),
                "missing_at": {p: len(self.ids) - n for p, n in held.items()},
                "ids": missing,
            },
        }
