r"""Encryption of a client's message for one compute node only.

A message :math:`m_{i,k}` must be readable by compute node :math:`k` alone: if another node
read it, that node would hold two shares of client :math:`i`. Each message travels in an
*envelope*, an ECIES-style hybrid construction from ``cryptography``:

1. the client draws an ephemeral X25519 key pair :math:`(a, A = aG)`;
2. with node :math:`k`'s static public key :math:`B_k` it computes the shared secret
   :math:`S = X25519(a, B_k)` (the node computes the same from :math:`(b_k, A)`);
3. :math:`K = \mathrm{HKDF\text{-}SHA256}(S,\ \mathrm{salt} = A \| B_k,\
   \mathrm{info} = \texttt{label} \| \mathrm{ad})`, a 256-bit key;
4. the message is sealed with AES-256-GCM under :math:`K`, a random 96-bit nonce and the
   associated data :math:`\mathrm{ad}`.

The associated data (:meth:`MessageContext.associated_data`) encodes the job id, the client,
the node and the round, so an envelope opens only for the node it was sealed for, in the job
and round it was sealed in: replaying it to another node, job, round, or passing it off as
another client's fails authentication (and the key derivation differs as well). A failure is
reported as :class:`EnvelopeError` naming the client and the node.

Node keys are raw 32-byte X25519 keys (:class:`NodeKeyPair`); the public half is what clients
need. The envelope bytes are ``A (32) || nonce (12) || ciphertext and tag``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from dpfed._validation import DpfedInputError, check_int

__all__ = [
    "Envelope",
    "EnvelopeError",
    "MessageContext",
    "NodeKeyPair",
    "open_envelope",
    "seal",
    "seal_for_nodes",
]

_LABEL = b"dpfed dca envelope v1"
_KEY_BYTES = 32
_NONCE_BYTES = 12
_TAG_BYTES = 16
_RAW = serialization.Encoding.Raw


class EnvelopeError(DpfedInputError):
    """An envelope could not be opened (altered, or sealed for another node, job or round)."""


@dataclass(frozen=True)
class MessageContext:
    """What an envelope is bound to: job, sending client, receiving node and round.

    Attributes
    ----------
    job_id : str
    client : int
        Index of the sending client (>= 0).
    node : int
        Index of the receiving compute node (>= 0).
    round : int, default 0
        Round of the job (>= 0).
    """

    job_id: str
    client: int
    node: int
    round: int = 0

    def associated_data(self) -> bytes:
        """Canonical encoding: label, length-prefixed UTF-8 job id, client, node, round.

        Returns
        -------
        bytes
            ``label || 0x00 || len(job) (4 bytes, big endian) || job || client || node ||
            round`` (8-byte big-endian unsigned integers).
        """
        if not isinstance(self.job_id, str):
            raise DpfedInputError(f"job_id must be a string. Found {self.job_id!r}.")
        job = self.job_id.encode("utf-8")
        client = check_int("client", self.client, minimum=0)
        node = check_int("node", self.node, minimum=0)
        rnd = check_int("round", self.round, minimum=0)
        return (
            _LABEL
            + b"\x00"
            + struct.pack(">I", len(job))
            + job
            + struct.pack(">QQQ", client, node, rnd)
        )


class NodeKeyPair:
    """A compute node's static X25519 key pair.

    Parameters
    ----------
    private_key : cryptography's X25519PrivateKey
        Use :meth:`generate` or :meth:`from_private_bytes` rather than this constructor.
    """

    __slots__ = ("_private", "public_bytes")

    def __init__(self, private_key: X25519PrivateKey) -> None:
        self._private = private_key
        #: The raw 32-byte public key, to give to clients.
        self.public_bytes: bytes = private_key.public_key().public_bytes(
            _RAW, serialization.PublicFormat.Raw
        )

    @classmethod
    def generate(cls) -> NodeKeyPair:
        """A fresh key pair (the private key from the operating system's CSPRNG)."""
        return cls(X25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> NodeKeyPair:
        """The key pair of a raw 32-byte private key (as written by :meth:`private_bytes`)."""
        if not isinstance(raw, bytes | bytearray) or len(raw) != _KEY_BYTES:
            shown = f"{len(raw)} bytes" if isinstance(raw, bytes | bytearray) else repr(raw)
            raise DpfedInputError(f"a private key must be {_KEY_BYTES} raw bytes. Found {shown}.")
        return cls(X25519PrivateKey.from_private_bytes(bytes(raw)))

    def private_bytes(self) -> bytes:
        """The raw 32-byte private key (a secret: store it readable by the node only)."""
        return self._private.private_bytes(
            _RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )

    def exchange(self, peer_public: bytes) -> bytes:
        """X25519 shared secret with a peer's raw public key."""
        return self._private.exchange(_public_key(peer_public, "peer public key"))

    def __repr__(self) -> str:
        return f"NodeKeyPair(public={self.public_bytes.hex()[:16]}...)"

    def __reduce__(self):
        return (NodeKeyPair.from_private_bytes, (self.private_bytes(),))


@dataclass(frozen=True)
class Envelope:
    """A sealed message: ephemeral public key, nonce and AES-GCM ciphertext (with tag)."""

    ephemeral_public: bytes
    nonce: bytes
    ciphertext: bytes

    def to_bytes(self) -> bytes:
        """``ephemeral_public (32) || nonce (12) || ciphertext``."""
        return self.ephemeral_public + self.nonce + self.ciphertext

    @classmethod
    def from_bytes(cls, data: bytes) -> Envelope:
        """Parse :meth:`to_bytes` output.

        Raises
        ------
        EnvelopeError
            If ``data`` is too short to hold a key, a nonce and a tag.
        """
        minimum = _KEY_BYTES + _NONCE_BYTES + _TAG_BYTES
        if not isinstance(data, bytes | bytearray | memoryview) or len(data) < minimum:
            size = len(data) if isinstance(data, bytes | bytearray | memoryview) else data
            raise EnvelopeError(f"an envelope has at least {minimum} bytes. Found {size!r}.")
        raw = bytes(data)
        return cls(
            raw[:_KEY_BYTES],
            raw[_KEY_BYTES : _KEY_BYTES + _NONCE_BYTES],
            raw[_KEY_BYTES + _NONCE_BYTES :],
        )


def _public_key(raw: bytes, what: str) -> X25519PublicKey:
    if not isinstance(raw, bytes | bytearray) or len(raw) != _KEY_BYTES:
        shown = f"{len(raw)} bytes" if isinstance(raw, bytes | bytearray) else repr(raw)
        raise DpfedInputError(f"{what} must be {_KEY_BYTES} raw bytes. Found {shown}.")
    return X25519PublicKey.from_public_bytes(bytes(raw))


def _derive(shared: bytes, ephemeral_public: bytes, node_public: bytes, ad: bytes) -> AESGCM:
    key = HKDF(
        algorithm=hashes.SHA256(),
        length=_KEY_BYTES,
        salt=ephemeral_public + node_public,
        info=_LABEL + b"\x00" + ad,
    ).derive(shared)
    return AESGCM(key)


def seal(plaintext: bytes, node_public: bytes, context: MessageContext) -> Envelope:
    """Encrypt ``plaintext`` for the node whose raw public key is ``node_public``.

    Parameters
    ----------
    plaintext : bytes-like
        The message (e.g. ``m_ik.tobytes()``).
    node_public : bytes
        The receiving node's raw 32-byte X25519 public key.
    context : MessageContext
        Job, client, node and round the envelope is bound to.

    Returns
    -------
    Envelope
    """
    return seal_for_nodes([plaintext], [node_public], [context])[0]


def seal_for_nodes(
    plaintexts: Sequence[bytes],
    node_publics: Sequence[bytes],
    contexts: Sequence[MessageContext],
    *,
    ephemeral_private: bytes | None = None,
    nonces: Sequence[bytes] | None = None,
) -> list[Envelope]:
    """Seal one client's messages, one per node, with one ephemeral key pair.

    The ephemeral key is shared by the client's envelopes of one round, but every envelope
    has its own shared secret (the node keys differ) and its own associated data, hence its
    own AES key.

    Parameters
    ----------
    plaintexts : sequence of bytes-like
        Message ``k`` is for node ``k`` of ``node_publics``.
    node_publics : sequence of bytes
        Raw 32-byte public keys of the receiving nodes.
    contexts : sequence of MessageContext
        The binding of each envelope.
    ephemeral_private : bytes, optional
        The raw 32-byte ephemeral X25519 private key (default: a fresh one from the
        operating system's CSPRNG). A client that must be able to send the very same envelopes
        again after a restart derives it from a secret it keeps; it must be secret and used for
        one round only.
    nonces : sequence of bytes, optional
        One 12-byte nonce per envelope (default: random). Every envelope has its own AES key
        (its own shared secret and associated data), so a nonce is never reused under a key
        as long as the ephemeral key serves one round only.

    Returns
    -------
    list of Envelope
    """
    if nonces is not None and (
        len(nonces) != len(plaintexts)
        or not all(isinstance(n, bytes) and len(n) == _NONCE_BYTES for n in nonces)
    ):
        raise DpfedInputError(
            f"nonces must be {len(plaintexts)} byte strings of {_NONCE_BYTES} bytes."
        )
    if not (len(plaintexts) == len(node_publics) == len(contexts)):
        raise DpfedInputError(
            "plaintexts, node_publics and contexts must have the same length. Found "
            f"{len(plaintexts)}, {len(node_publics)} and {len(contexts)}."
        )
    if ephemeral_private is None:
        ephemeral = X25519PrivateKey.generate()
    else:
        if not isinstance(ephemeral_private, bytes) or len(ephemeral_private) != _KEY_BYTES:
            raise DpfedInputError(f"ephemeral_private must be {_KEY_BYTES} raw bytes.")
        ephemeral = X25519PrivateKey.from_private_bytes(ephemeral_private)
    eph_public = ephemeral.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    out = []
    for k, (plaintext, node_public, context) in enumerate(
        zip(plaintexts, node_publics, contexts, strict=True)
    ):
        ad = context.associated_data()
        shared = ephemeral.exchange(_public_key(node_public, "node_public"))
        aead = _derive(shared, eph_public, bytes(node_public), ad)
        nonce = os.urandom(_NONCE_BYTES) if nonces is None else nonces[k]
        out.append(Envelope(eph_public, nonce, aead.encrypt(nonce, bytes(plaintext), ad)))
    return out


def open_envelope(envelope: Envelope, node_key: NodeKeyPair, context: MessageContext) -> bytes:
    """Decrypt an envelope at the node it was sealed for.

    Parameters
    ----------
    envelope : Envelope
    node_key : NodeKeyPair
        The receiving node's key pair.
    context : MessageContext
        What the node expects: its job, the sender, itself and the round.

    Returns
    -------
    bytes
        The plaintext.

    Raises
    ------
    EnvelopeError
        If authentication fails (the envelope was altered, or sealed for another node, job,
        client or round), naming the client and the node.
    """
    ad = context.associated_data()
    where = (
        f"the message from client {context.client} to compute node {context.node} "
        f"(job {context.job_id!r}, round {context.round})"
    )
    try:
        shared = node_key.exchange(envelope.ephemeral_public)
        aead = _derive(shared, envelope.ephemeral_public, node_key.public_bytes, ad)
        return aead.decrypt(envelope.nonce, envelope.ciphertext, ad)
    except (InvalidTag, ValueError, DpfedInputError) as exc:
        raise EnvelopeError(
            f"{where} could not be opened: authentication failed, so it was altered or sealed "
            "for another node, job, client or round."
        ) from exc
