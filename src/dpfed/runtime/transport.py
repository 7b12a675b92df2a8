"""gRPC between the processes of a job, over TLS with client certificates on every connection.

Every process serves one service, ``dpfed.Node``, with two unary methods whose requests and
replies are opaque bytes (no generated code):

``Deliver``
    a protocol message in the wire format of :mod:`dpfed.runtime.wire`; the reply is an
    acknowledgement, sent once the message has been handled and checkpointed.
``Control``
    a JSON request from the job's leader (open, begin, status, finish, suspend, abort).

There is no plaintext port. The server demands a client certificate issued by the job's CA and
hands the handler the peer's name (the certificate's common name); a client checks that the
server's certificate names the party it meant to reach (``grpc.ssl_target_name_override``), so
neither side can be impersonated by a process holding another party's certificate.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from dpfed._validation import DpfedInputError
from dpfed.runtime.certs import TlsIdentity, verify_peer_certificate

SERVICE = "dpfed.Node"
DELIVER = "Deliver"
CONTROL = "Control"

Handler = Callable[[bytes, str], bytes]


class Refused(Exception):
    """A request the handler refuses; the caller sees ``code`` and the message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _options(max_bytes: int) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_receive_message_length", int(max_bytes)),
        ("grpc.max_send_message_length", int(max_bytes)),
        # reconnect quickly to a restarted party (the default backoff grows to two minutes)
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]


def peer_name(context: grpc.ServicerContext, ca_pem: bytes) -> str:
    """The verified name of the client behind ``context`` (its certificate's common name)."""
    auth = context.auth_context()
    if auth.get("transport_security_type") != [b"ssl"] or not auth.get("x509_pem_cert"):
        raise Refused(grpc.StatusCode.UNAUTHENTICATED, "a client certificate is required")
    try:
        return verify_peer_certificate(auth["x509_pem_cert"][0], ca_pem)
    except DpfedInputError as exc:
        raise Refused(grpc.StatusCode.UNAUTHENTICATED, str(exc)) from None


#: Seconds a connection may take to complete its TLS handshake before the server drops it
#: (gRPC's default is 120: a flood of idle connections would hold memory that long).
HANDSHAKE_TIMEOUT = 3.0
#: Fewest concurrent incoming connections a server accepts (:func:`connection_limit`).
MIN_CONNECTIONS = 512


def connection_limit(n_processes: int) -> int:
    """Concurrent incoming connections a process of a job with ``n_processes`` processes
    accepts: ``max(512, 4 n)`` (every peer's channel, with room for reconnections)."""
    return max(MIN_CONNECTIONS, 4 * int(n_processes))


def serve(
    identity: TlsIdentity,
    address: str,
    handlers: Mapping[str, Handler],
    *,
    max_bytes: int,
    max_connections: int = MIN_CONNECTIONS,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
    workers: int = 8,
) -> grpc.Server:
    """Start a server on ``address`` that accepts mutually authenticated TLS only.

    Each handler gets the request bytes and the verified peer name and returns the reply
    bytes; raising :class:`Refused` answers with that status and message. At most
    ``max_connections`` incoming connections are held at once, and one that has not completed
    its handshake within ``handshake_timeout`` seconds is dropped, so a flood of idle or
    unauthenticated connections neither holds memory nor starves the job for long.
    """

    def wrap(handler: Handler) -> Any:
        def method(request: bytes, context: grpc.ServicerContext) -> bytes:
            try:
                return handler(request, peer_name(context, identity.ca_pem))
            except Refused as exc:
                context.abort(exc.code, str(exc))  # raises: gRPC ends the call here
                raise  # pragma: no cover - abort never returns

        return grpc.unary_unary_rpc_method_handler(method)

    credentials = grpc.ssl_server_credentials(
        [(identity.key_pem, identity.certificate_pem)],
        root_certificates=identity.ca_pem,
        require_client_auth=True,
    )
    limits = [
        ("grpc.server_handshake_timeout_ms", int(handshake_timeout * 1000)),
        ("grpc.max_allowed_incoming_connections", int(max_connections)),
        # gRPC shares a port between processes by default (SO_REUSEPORT): a second party
        # on the same address would silently take half of the first one's connections
        ("grpc.so_reuseport", 0),
    ]
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers), options=_options(max_bytes) + limits
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                SERVICE, {name: wrap(h) for name, h in handlers.items()}
            ),
        )
    )
    try:
        port = server.add_secure_port(address, credentials)
    except RuntimeError:
        port = 0
    if port == 0:
        raise DpfedInputError(f"cannot listen on {address!r} (in use, or not a local address).")
    server.start()
    return server


class RemoteError(RuntimeError):
    """A call to another process failed: ``code`` is the gRPC status."""

    def __init__(self, peer: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{peer}: {details} ({code.name})")
        self.peer = peer
        self.code = code
        self.details = details

    @property
    def retryable(self) -> bool:
        """Whether the peer may simply be down, slow or stopping (as opposed to refusing).

        A server that stops (Ctrl-C, shutdown) cancels the calls in flight: CANCELLED is a
        peer going down, never a refusal (refusals carry their own codes)."""
        return self.code in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.CANCELLED,
        )


def tls_failure(name: str, address: str, details: str) -> str | None:
    """What a failed connection's gRPC ``details`` say about the TLS identities, or None when
    they say nothing of them (e.g. the peer is not serving yet).

    * the peer's certificate is not signed by this side's CA: ``CERTIFICATE_VERIFY_FAILED``;
    * it is signed, but for another name than ``name``: the host-name check failed.

    (A peer that refuses *this* side's certificate just closes the connection during the
    handshake; see :data:`HANDSHAKE_CLOSED`.)
    """
    if "CERTIFICATE_VERIFY_FAILED" in details or "TSI_PROTOCOL_FAILURE" in details:
        return (
            f"{name} at {address} presented a certificate not signed by this job's CA "
            "(its TLS handshake failed: CERTIFICATE_VERIFY_FAILED); check [tls].ca and "
            f"{name}'s certificate in the job file"
        )
    if "Hostname Verification Check failed" in details:
        return (
            f"the process at {address} presented a certificate of this job's CA, but not "
            f"for the name {name!r}: another party listens there, or its certificate "
            "names someone else"
        )
    return None


#: What gRPC says when the peer closed the connection during the handshake: a peer that does
#: not accept this side's certificate (or one going down).
HANDSHAKE_CLOSED = "Socket closed"


class Connection:
    """A client channel to one named process, authenticated both ways."""

    def __init__(self, identity: TlsIdentity, name: str, address: str, *, max_bytes: int) -> None:
        self.name = name
        credentials = grpc.ssl_channel_credentials(
            root_certificates=identity.ca_pem,
            private_key=identity.key_pem,
            certificate_chain=identity.certificate_pem,
        )
        options = [*_options(max_bytes), ("grpc.ssl_target_name_override", name)]
        self.channel = grpc.secure_channel(address, credentials, options=options)
        self._deliver = self.channel.unary_unary(f"/{SERVICE}/{DELIVER}")
        self._control = self.channel.unary_unary(f"/{SERVICE}/{CONTROL}")

    def _call(self, method: Callable[..., bytes], payload: bytes, timeout: float) -> bytes:
        try:
            return bytes(method(payload, timeout=timeout))
        except grpc.RpcError as exc:
            raise RemoteError(self.name, exc.code(), exc.details() or "") from None

    def deliver(self, payload: bytes, *, timeout: float) -> bytes:
        return self._call(self._deliver, payload, timeout)

    def control(self, frame: bytes, *, timeout: float) -> dict[str, Any]:
        """Send a control request (an encoded wire frame); the party answers with JSON."""
        reply: dict[str, Any] = json.loads(self._call(self._control, frame, timeout))
        return reply

    def close(self) -> None:
        self.channel.close()
