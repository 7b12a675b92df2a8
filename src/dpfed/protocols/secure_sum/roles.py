r"""Roles of the networked DCA secure sum (paper 004, Algorithm 1).

:class:`SecureSumClient` ``i`` holds :math:`z_i \in \mathbb R^D`. Once it has every compute
node's public key it encodes :math:`z_i + \eta_i` in fixed point modulo :math:`2^{64}`, splits
it into :math:`M` additive shares (:func:`dpfed.dca.shares.split_shares`, masks from an AES
keystream), seals share :math:`k` for node :math:`k` only (X25519 + HKDF + AES-GCM, bound to
job, client, node and round) and sends it.

:class:`ComputeNode` ``k`` sends its public key to every client, opens the envelopes it
receives and, once it holds every client's share or is told that the submission deadline has
passed (:meth:`ComputeNode.close`), tells the other nodes which clients it has; when every node
has reported it sums the shares of the clients that *all* nodes received
(:func:`dpfed.dca.agreement`). It refuses to close or sum when more than :math:`T` clients are
missing, and ignores a share that arrives after it closed. The sum over the nodes' sums is
:math:`\sum_{i \in I} (z_i + \eta_i)`; a single node's sum is uniformly distributed.

Both roles are deterministic given their secrets (a client's secret seeds its masks,
ephemeral key and nonces; a node's key pair is fixed), so a restarted party replays its inputs
and sends the very same bytes again.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.dca.agreement import agree_included
from dpfed.dca.envelope import Envelope, MessageContext, NodeKeyPair, open_envelope, seal_for_nodes
from dpfed.dca.fixedpoint import encode
from dpfed.dca.keystream import MaskStream
from dpfed.dca.shares import split_shares
from dpfed.protocols.secure_sum.messages import NodeKey, ReceivedReport, SealedShare
from dpfed.runtime.messages import Message, ProtocolError, bytes_as_words, words_as_bytes

#: The round every message of the one-shot secure sum belongs to.
ROUND = 1


def derive_secret(secret: bytes, label: str, length: int = 32) -> bytes:
    """``length`` bytes of HMAC-SHA256(secret, label || counter): independent sub-secrets."""
    out = b""
    counter = 0
    while len(out) < length:
        out += hmac.new(secret, f"{label}/{counter}".encode(), hashlib.sha256).digest()
        counter += 1
    return out[:length]


class SecureSumClient:
    """Client ``index`` of ``n_clients``: shares ``value + noise`` among ``nodes``.

    Parameters
    ----------
    name : str
    index : int
        The client's position in the job's client order (binds its envelopes, seeds nothing).
    value : numpy.ndarray, shape (D,)
        :math:`z_i + \\eta_i`, the noisy vector (the caller adds the noise).
    nodes : list of str
        The compute nodes, in the job's order.
    n_clients : int
        :math:`N`, which bounds the encoded values so the modular sum cannot wrap.
    job_id : str
    secret : bytes
        At least 32 secret bytes of this client (masks, ephemeral key and nonces derive from
        them).
    fractional_bits : int
    """

    def __init__(
        self,
        name: str,
        index: int,
        value: np.ndarray,
        *,
        nodes: list[str],
        n_clients: int,
        job_id: str,
        secret: bytes,
        fractional_bits: int,
    ) -> None:
        if len(secret) < 32:
            raise DpfedInputError(f"a client secret has at least 32 bytes. Found {len(secret)}.")
        self.name, self.index, self.nodes, self.job_id = name, index, list(nodes), job_id
        # encoding now refuses a value that could overflow, before anything is sent
        self.encoded = encode(
            np.asarray(value, dtype=np.float64).reshape(1, -1),
            n_clients,
            fractional_bits,
            name=f"{name}'s value + noise",
        )
        self.secret = bytes(secret)
        self.keys: dict[str, bytes] = {}
        self.sent = False

    @property
    def round(self) -> int:
        return ROUND if self.sent else 0

    @property
    def finished(self) -> bool:
        return self.sent

    def start(self) -> list[Message]:
        return []

    def handle(self, message: Message) -> list[Message]:
        if not isinstance(message, NodeKey) or message.sender not in self.nodes:
            raise ProtocolError(
                f"{self.name} expects node keys from {self.nodes}. Found "
                f"{type(message).__name__} from {message.sender!r}"
            )
        if message.round != ROUND or message.sender in self.keys:
            raise ProtocolError(
                f"{self.name} already holds {message.sender}'s key or the "
                f"round {message.round} is not {ROUND}"
            )
        if message.public_key.shape != (4,):
            raise ProtocolError(f"a node key has 4 words. Found shape {message.public_key.shape}")
        self.keys[message.sender] = np.ascontiguousarray(message.public_key, "<i8").tobytes()
        if len(self.keys) < len(self.nodes):
            return []
        return self._shares()

    def _shares(self) -> list[Message]:
        m, d = len(self.nodes), self.encoded.shape[1]
        masks = MaskStream(derive_secret(self.secret, "masks")).words((m - 1) * d)
        messages = split_shares(self.encoded, masks.reshape(1, m - 1, d))[0]
        contexts = [MessageContext(self.job_id, self.index, k, ROUND) for k in range(m)]
        envelopes = seal_for_nodes(
            [row.tobytes() for row in messages],
            [self.keys[n] for n in self.nodes],
            contexts,
            ephemeral_private=derive_secret(self.secret, "ephemeral"),
            nonces=[derive_secret(self.secret, f"nonce/{k}", 12) for k in range(m)],
        )
        self.sent = True
        out: list[Message] = []
        for node, env in zip(self.nodes, envelopes, strict=True):
            raw = env.to_bytes()
            out.append(SealedShare(self.name, node, ROUND, bytes_as_words(raw), len(raw)))
        return out

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return {}, {"keys": {n: k.hex() for n, k in self.keys.items()}, "sent": self.sent}

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.keys = {n: bytes.fromhex(k) for n, k in meta["keys"].items()}
        self.sent = bool(meta["sent"])


class ComputeNode:
    """Compute node ``index`` of ``nodes``: receives one sealed share from every client.

    Parameters
    ----------
    name : str
    clients : list of str
        The clients, in the job's order (their index binds the envelopes).
    nodes : list of str
        Every compute node, in the job's order (this one included).
    dim : int
        :math:`D`.
    job_id : str
    key : NodeKeyPair
        This node's X25519 key pair.
    tolerated : int
        :math:`T`: at most this many clients may be missing from the sum.
    """

    def __init__(
        self,
        name: str,
        *,
        clients: list[str],
        nodes: list[str],
        dim: int,
        job_id: str,
        key: NodeKeyPair,
        tolerated: int,
    ) -> None:
        self.name, self.clients, self.nodes = name, list(clients), list(nodes)
        self.index = self.nodes.index(name)
        self.dim, self.job_id, self.key, self.tolerated = dim, job_id, key, tolerated
        n = len(self.clients)
        self.shares = np.zeros((n, dim), dtype=np.uint64)
        self.received = np.zeros(n, dtype=bool)
        self.reports: dict[str, np.ndarray] = {}
        self.included: np.ndarray | None = None
        self.sum: np.ndarray | None = None

    @property
    def round(self) -> int:
        return ROUND if self.sum is not None else 0

    @property
    def finished(self) -> bool:
        return self.sum is not None

    def start(self) -> list[Message]:
        words = bytes_as_words(self.key.public_bytes)
        return [NodeKey(self.name, c, ROUND, words) for c in self.clients]

    def handle(self, message: Message) -> list[Message]:
        if message.round != ROUND:
            raise ProtocolError(f"{self.name} expects round {ROUND}. Found {message.round}")
        if isinstance(message, SealedShare) and message.sender in self.clients:
            return self._share(message)
        if isinstance(message, ReceivedReport) and message.sender in self.nodes:
            if message.sender in self.reports or message.sender == self.name:
                raise ProtocolError(f"{self.name} already holds {message.sender}'s report")
            if message.received.shape != self.received.shape or message.received.dtype != bool:
                raise ProtocolError(f"a report holds {len(self.clients)} booleans")
            self._agreed(self.reports | {message.sender: message.received})  # refuses first
            self.reports[message.sender] = message.received.copy()
            return self._maybe_sum()
        raise ProtocolError(
            f"{self.name} does not expect {type(message).__name__} from {message.sender!r}"
        )

    @property
    def closed(self) -> bool:
        """Whether this node has declared its received set final (:meth:`close`)."""
        return self.name in self.reports

    def _share(self, message: SealedShare) -> list[Message]:
        if self.closed:
            # too late: the set is final and reported. Acknowledged and ignored, not refused
            # (a refusal would stop the job over a client that merely came late)
            return []
        i = self.clients.index(message.sender)
        if self.received[i]:
            raise ProtocolError(f"{self.name} already holds {message.sender}'s share")
        raw = words_as_bytes(message.envelope, message.length)
        context = MessageContext(self.job_id, i, self.index, ROUND)
        try:
            plain = open_envelope(Envelope.from_bytes(raw), self.key, context)
        except DpfedInputError as exc:  # forged, tampered with, or sealed for another node
            raise ProtocolError(str(exc)) from None
        if len(plain) != 8 * self.dim:
            raise ProtocolError(
                f"{message.sender}'s share has {len(plain)} bytes; expected {8 * self.dim}"
            )
        self.shares[i] = np.frombuffer(plain, dtype="<u8")
        self.received[i] = True
        if not self.received.all():
            return []
        return self.close()  # every share is here

    def close(self) -> list[Message]:
        """Declare the clients received so far final: report them to the other nodes, and sum
        once every node has reported.

        Called when every share has arrived, or when the submission deadline has passed
        (the missing clients dropped out). Closing again returns nothing; a share arriving
        after the close is ignored.

        Returns
        -------
        list of Message
            This node's :class:`ReceivedReport` to every other node (none when closed before).

        Raises
        ------
        DpfedInputError
            If more than ``tolerated`` clients are missing from this node's received set, or
            from the set all nodes' reports agree on; nothing changes.
        """
        if self.closed:
            return []
        self._check_missing(self.received, f"{self.name} holds the shares of")
        self._agreed(self.reports | {self.name: self.received})  # refuses before any change
        self.reports[self.name] = self.received.copy()
        out: list[Message] = [
            ReceivedReport(self.name, n, ROUND, self.received.copy())
            for n in self.nodes
            if n != self.name
        ]
        return out + self._maybe_sum()

    def _agreed(self, reports: dict[str, np.ndarray]) -> np.ndarray | None:
        """The clients every node received, shape (N,), once ``reports`` holds every node's
        report (None before); refuses more than ``tolerated`` missing."""
        if len(reports) < len(self.nodes):
            return None
        included = agree_included(np.stack([reports[n] for n in self.nodes]))
        self._check_missing(included, "every compute node holds the shares of only")
        return included

    def _check_missing(self, held: np.ndarray, what: str) -> None:
        """Refuse a set of clients, bool of shape (N,), that misses more than ``tolerated``,
        naming how many it holds (``what`` says whose set it is), which are missing (the first
        10) and :math:`T`."""
        missing = [c for c, ok in zip(self.clients, held, strict=True) if not ok]
        if len(missing) <= self.tolerated:
            return
        shown = ", ".join(missing[:10]) + (
            f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        )
        raise DpfedInputError(
            f"{what} {len(self.clients) - len(missing)} of {len(self.clients)} clients; "
            f"{len(missing)} are missing ({shown}), but at most tolerated = {self.tolerated} "
            "may be dropped: the noise would not cover the sum. Refusing to aggregate."
        )

    def _maybe_sum(self) -> list[Message]:
        included = self._agreed(self.reports)
        if included is None:
            return []
        self.included = included
        self.sum = self.shares[included].sum(axis=0, dtype=np.uint64)
        return []

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"shares": self.shares, "received": self.received}
        arrays |= {f"report/{n}": r for n, r in self.reports.items()}
        if self.sum is not None:
            arrays["sum"] = self.sum
        return arrays, {"reports": sorted(self.reports)}

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.shares = np.array(arrays["shares"], dtype=np.uint64)
        self.received = np.array(arrays["received"], dtype=bool)
        self.reports = {n: np.array(arrays[f"report/{n}"], dtype=bool) for n in meta["reports"]}
        if "sum" in arrays:
            self.sum = np.array(arrays["sum"], dtype=np.uint64)
            self.included = agree_included(np.stack([self.reports[n] for n in self.nodes]))
