"""The gRPC transport's server: one process per address."""

from __future__ import annotations

import socket

import pytest

from dpfed._validation import DpfedInputError
from dpfed.runtime.certs import load_identity
from dpfed.runtime.transport import serve


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.networked
def test_a_second_server_on_the_same_address_is_refused(job_certs):
    """gRPC shares a port between processes unless told not to: a second party started on a
    taken address would silently receive half of the first one's connections."""
    identity = load_identity(job_certs / "bank.pem", job_certs / "bank.key", job_certs / "ca.pem")
    address = f"127.0.0.1:{_free_port()}"
    first = serve(identity, address, {}, max_bytes=1 << 20)
    try:
        with pytest.raises(DpfedInputError, match=f"cannot listen on '{address}'"):
            serve(identity, address, {}, max_bytes=1 << 20)
    finally:
        first.stop(grace=0).wait()
