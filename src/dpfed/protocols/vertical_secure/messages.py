"""The messages of a networked secure vertical job (:mod:`dpfed.protocols.vertical_secure.
roles`): ciphertexts in parts, the released gradients, the passive party's test scores.

Nothing computed from one party's rows crosses to the other in the clear but the released
d-vectors (:class:`GradientRelease`, carrying the key holder's noise and, for a protected
evaluator, its own) and, at the end, the passive party's test scores of its final block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpfed.runtime.messages import Message, ProtocolError, bytes_as_words, words_as_bytes
from dpfed.runtime.wire import register_message

#: What a :class:`CipherPart` carries.
CIPHER_KINDS = ("public", "labels", "powers", "gradient", "request", "statistics")


@register_message
@dataclass(frozen=True)
class CipherPart(Message):
    r"""Part ``part`` of ``parts`` of a set of serialised CKKS ciphertexts (or the sender's
    public context, ``kind = "public"``).

    ``kind``: one of :data:`CIPHER_KINDS` (``"request"`` and ``"statistics"``: the label
    holder's :math:`\mathrm{Enc}_L(r), \mathrm{Enc}_L(c)` and the passive party's three
    noisy statistics, :mod:`dpfed.protocols.vertical_secure.weighting`); ``block``: the
    evaluator of the block update it belongs to (``round`` is the Gauss-Seidel round).
    ``lengths`` (int64, one per item) and ``nbytes`` describe ``blob``, the items' bytes
    one after another as int64 words (:func:`dpfed.runtime.messages.bytes_as_words`).
    """

    kind: str
    block: int
    part: int
    parts: int
    lengths: np.ndarray
    blob: np.ndarray
    nbytes: int

    def items(self) -> list[bytes]:
        """The serialised items of this part.

        Raises
        ------
        ProtocolError
            If the lengths do not add up to the bytes carried.
        """
        raw = words_as_bytes(self.blob, self.nbytes)
        lengths = [int(v) for v in np.asarray(self.lengths).reshape(-1)]
        if any(v < 0 for v in lengths) or sum(lengths) != len(raw):
            raise ProtocolError(f"a {self.kind} part's lengths do not add up to its bytes")
        out, at = [], 0
        for v in lengths:
            out.append(raw[at : at + v])
            at += v
        return out


def cipher_parts(
    sender: str,
    recipient: str,
    round: int,
    kind: str,
    block: int,
    items: Sequence[bytes],
    *,
    max_bytes: int,
) -> list[CipherPart]:
    """``items`` cut into parts of at most about half of ``max_bytes`` each (an item larger
    than that travels alone)."""
    limit = max(1, max_bytes // 2)
    groups: list[list[bytes]] = [[]]
    for item in items:
        if groups[-1] and sum(map(len, groups[-1])) + len(item) > limit:
            groups.append([])
        groups[-1].append(item)
    return [
        CipherPart(
            sender,
            recipient,
            round,
            kind,
            block,
            k,
            len(groups),
            np.array([len(i) for i in group], dtype=np.int64),
            bytes_as_words(b"".join(group)),
            sum(map(len, group)),
        )
        for k, group in enumerate(groups)
    ]


@register_message
@dataclass(frozen=True)
class GradientRelease(Message):
    """Key holder -> evaluator: the decrypted gradient of block ``block`` in ``round`` with
    the key holder's noise (shape ``(d_block,)``)."""

    block: int
    values: np.ndarray


@register_message
@dataclass(frozen=True)
class WeightRelease(Message):
    """Label holder -> passive party, after the statistics: the weight :math:`\beta` of the
    passive party's clipped score shares (:mod:`dpfed.protocols.vertical_secure.weighting`)."""

    weight: float


@register_message
@dataclass(frozen=True)
class FinalScores(Message):
    """Passive party -> label holder, after its last step (and the weight, if any): its
    final shares of its test rows (shape ``(N_test,)``, empty without test rows or
    evaluation) and the bytes it sent (no time: a replayed message must be the same bytes)."""

    test_scores: np.ndarray
    bytes_sent: int
