r"""Private set intersection of two parties' row IDs, and the order they then agree on.

Before a vertical job, each party's rows must be matched by customer ID without a party
showing the other its customers. This module wraps OpenMined's PSI library
(``openmined.psi``, Apache-2.0: ECDH-PSI over the NIST P-256 group with hashing to the curve,
128-bit security), which does every cryptographic operation; nothing here is hand-written
cryptography.

**The two roles** (one round trip, three messages):

1. the *holder* (:class:`PsiHolder`, e.g. a passive party) encrypts its IDs under a fresh
   secret key and sends them as a *setup* message;
2. the *seeker* (:class:`PsiSeeker`, e.g. the label holder) sends its IDs encrypted under its
   own fresh key (the *request*);
3. the holder re-encrypts the request under its key (the *response*); the seeker compares
   doubly encrypted values and learns which of its own IDs the holder also has
   (:meth:`PsiSeeker.intersection`).

What each learns (semi-honest parties): the seeker, the intersection and the size of the
holder's set; the holder, only the size of the seeker's set. Neither learns the other's IDs
outside the intersection. dpfed then has the seeker tell the holder the intersection (both
parties of a vertical job must train on the same rows, so both learn it; membership in the
intersection is *not* covered by any epsilon, and the docs say so).

**The agreed order** (:func:`agreed_order`): the intersection sorted by HMAC-SHA256 under a
fresh 256-bit key the seeker draws (from the operating system's CSPRNG) and sends with it.
The order is a pseudo-random permutation: it says nothing about the IDs' values or about
either party's file order. :func:`alignment_digest` is the SHA-256 of the agreed ID list, for
ledgers and results.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from typing import Any

from dpfed._validation import DpfedInputError

__all__ = [
    "FALSE_POSITIVE_RATE",
    "PsiHolder",
    "PsiSeeker",
    "agreed_order",
    "alignment_digest",
    "intersect",
    "new_psi_key",
    "order_key",
    "order_tags",
]

#: Not used by the exact (``RAW``) setup, which has no false positives; kept for the record of
#: what the setup message is asked for.
FALSE_POSITIVE_RATE = 1e-9


def _psi() -> Any:
    try:
        import private_set_intersection.python as psi
    except ImportError:
        raise DpfedInputError(
            'private set intersection needs OpenMined\'s PSI library: pip install "dpfed[psi]"'
        ) from None
    return psi


def _ids(ids: Sequence[str], who: str) -> list[str]:
    values = [str(v) for v in ids]
    if not values:
        raise DpfedInputError(f"{who} has no IDs to intersect.")
    if len(set(values)) != len(values):
        raise DpfedInputError(f"{who}'s IDs must be unique (an ID appears twice).")
    return values


class PsiHolder:
    """The party that learns only the size of the other's set (module docstring).

    Parameters
    ----------
    ids : sequence of str
        Its row IDs, unique.
    key : bytes, optional
        Its 32-byte secret key (:func:`new_psi_key`); by default a fresh one. With the same
        key and IDs every message is the same bytes again (a restarted party replays them).
    """

    def __init__(self, ids: Sequence[str], key: bytes | None = None) -> None:
        self._psi = _psi()
        self.ids = _ids(ids, "the holder")
        self._server = (
            self._psi.server.CreateWithNewKey(True)
            if key is None
            else self._psi.server.CreateFromKey(key, True)
        )

    def setup(self, seeker_size: int) -> bytes:
        """The setup message: its IDs encrypted under its key, for a seeker of
        ``seeker_size`` IDs (a serialised ``ServerSetup``)."""
        message = self._server.CreateSetupMessage(
            FALSE_POSITIVE_RATE, int(seeker_size), self.ids, self._psi.DataStructure.RAW
        )
        return bytes(message.SerializeToString())

    def answer(self, request: bytes) -> bytes:
        """The response to the seeker's request: its values re-encrypted under this key."""
        parsed = self._psi.Request()
        parsed.ParseFromString(request)
        return bytes(self._server.ProcessRequest(parsed).SerializeToString())


class PsiSeeker:
    """The party that learns the intersection (module docstring).

    Parameters
    ----------
    ids : sequence of str
        Its row IDs, unique.
    key : bytes, optional
        Its 32-byte secret key (:func:`new_psi_key`); by default a fresh one.
    """

    def __init__(self, ids: Sequence[str], key: bytes | None = None) -> None:
        self._psi = _psi()
        self.ids = _ids(ids, "the seeker")
        self._client = (
            self._psi.client.CreateWithNewKey(True)
            if key is None
            else self._psi.client.CreateFromKey(key, True)
        )

    def request(self) -> bytes:
        """Its IDs encrypted under its key (a serialised ``Request``)."""
        return bytes(self._client.CreateRequest(self.ids).SerializeToString())

    def intersection(self, setup: bytes, response: bytes) -> list[str]:
        """The IDs both hold, in this party's order, from the holder's setup and response."""
        parsed_setup = self._psi.ServerSetup()
        parsed_setup.ParseFromString(setup)
        parsed_response = self._psi.Response()
        parsed_response.ParseFromString(response)
        rows = self._client.GetIntersection(parsed_setup, parsed_response)
        return [self.ids[i] for i in sorted(rows)]


def intersect(seeker_ids: Sequence[str], holder_ids: Sequence[str]) -> tuple[list[str], int]:
    """Both roles in one process (e.g. to test or to measure): the intersection, in the
    seeker's order, and the bytes the three messages took."""
    seeker, holder = PsiSeeker(seeker_ids), PsiHolder(holder_ids)
    setup = holder.setup(len(seeker.ids))
    request = seeker.request()
    response = holder.answer(request)
    return seeker.intersection(setup, response), len(setup) + len(request) + len(response)


def new_psi_key() -> bytes:
    """A fresh 32-byte PSI secret key (a P-256 scalar drawn by the library from the operating
    system's CSPRNG), to keep so that a restarted party sends the same messages."""
    return bytes(_psi().server.CreateWithNewKey(True).GetPrivateKeyBytes())


def order_tags(ids: Sequence[str], key: bytes) -> list[bytes]:
    """HMAC-SHA256 of each ID under ``key`` (:func:`agreed_order` sorts by them): what the
    seeker sends a holder instead of the IDs, which the holder matches against its own."""
    if not isinstance(key, bytes) or len(key) < 32:
        raise DpfedInputError("the order key must be at least 32 bytes.")
    return [hmac.new(key, str(v).encode(), hashlib.sha256).digest() for v in ids]


def order_key() -> bytes:
    """A fresh 256-bit key for :func:`agreed_order`, from the operating system's CSPRNG."""
    return secrets.token_bytes(32)


def agreed_order(ids: Sequence[str], key: bytes) -> list[str]:
    """``ids`` sorted by HMAC-SHA256 under ``key`` (:func:`order_tags`): a pseudo-random order
    both parties compute from the intersection and the key alone.

    Raises
    ------
    DpfedInputError
        If ``key`` is shorter than 32 bytes.
    """
    values = [str(v) for v in ids]
    return [v for _, v in sorted(zip(order_tags(values, key), values, strict=True))]


def alignment_digest(ids: Sequence[str]) -> str:
    """SHA-256 (hex) of the agreed ID list, in order (each ID length-prefixed)."""
    h = hashlib.sha256()
    for v in ids:
        data = str(v).encode()
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()
