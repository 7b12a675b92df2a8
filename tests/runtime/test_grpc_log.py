"""A party names the TLS handshakes it refused or that were refused with it, from gRPC's log."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from dpfed.runtime.grpc_log import REPEAT_EVERY, HandshakeLog

from .conftest import free_ports
from .test_networked_vertical import wait_for
from .test_party_service import _party_file, _start_service

ARGS = (
    "args={endpoint=0x7fc778001c30, args={grpc.internal.endpoint_local_address=ipv4:"
    "127.0.0.1:50999, grpc.internal.endpoint_peer_address=ipv4:10.0.0.7:34100, "
    "grpc.internal.security_connector=0x55cdae2241b0}, read_buffer.Length()=0}\n"
)
#: gRPC's records of a connection the peer closed and of a certificate this side refused
#: (as grpcio 1.7x writes them at GRPC_VERBOSITY=INFO, GRPC_TRACE=handshaker).
RECORDS = [
    "W1128 16:49:31.985342    4592 log.cc:102] Log level INFO is not suitable for production.\n",
    "I1128 16:49:31.985519    4592 trace.cc:91] gRPC Tracers: handshaker\n",
    "I1128 16:49:33.739780    4597 handshaker.cc:155] CallNextHandshakerLocked: error=OK "
    "shutdown=false index=1, " + ARGS,
    "I1128 16:49:33.744253    4599 handshaker.cc:155] CallNextHandshakerLocked: "
    "error=UNAVAILABLE: Handshake read failed (Socket closed)\n",
    "=== Source Location Trace: ===\n",
    "src/core/util/status_helper.cc:124\n",
    " shutdown=false index=2, " + ARGS,
    "I1128 16:49:33.744315    4599 channel_trace.h:396] handshake manager 0x7fc778002110: "
    "Failed with error: UNAVAILABLE: Handshake read failed (Socket closed)\n",
    "\n",
    "I1128 16:49:34.143759    4599 handshaker.cc:155] CallNextHandshakerLocked: error=UNKNOWN: "
    "Ssl handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1000007d:SSL routines:"
    "OPENSSL_internal:CERTIFICATE_VERIFY_FAILED: unable to get local issuer certificate: OK\n",
    "=== Source Location Trace: ===\n",
    " shutdown=false index=2, " + ARGS,
    "E1128 16:49:35.000000    4599 server.cc:10] a gRPC error shown at its default level\n",
    "not a gRPC line (another library's output)\n",
]


def _route(lines, clock=lambda: 0.0):
    shown, logged = [], []
    HandshakeLog(shown.append, logged.append, clock).feed(line.encode() for line in lines)
    return b"".join(shown).decode(), logged


def test_failed_handshakes_become_log_lines_naming_the_peer_and_grpcs_info_is_dropped():
    shown, logged = _route(RECORDS)
    assert len(logged) == 2
    closed, foreign = logged
    assert closed.startswith(
        "10.0.0.7:34100 closed its connection during the TLS "
        "handshake: it does not accept this party's certificate"
    )
    assert foreign.startswith(
        "10.0.0.7:34100 presented a certificate not signed by this "
        "party's CA (CERTIFICATE_VERIFY_FAILED: unable to get local "
        "issuer certificate)"
    )
    # what gRPC shows by default and other output pass; its info and warnings do not
    assert shown == (
        "E1128 16:49:35.000000    4599 server.cc:10] a gRPC error shown at its "
        "default level\nnot a gRPC line (another library's output)\n"
    )


def test_a_peer_retrying_is_reported_once_a_period_with_a_count():
    failure = RECORDS[3:8]
    times = iter([0.0, 1.0, 2.0, REPEAT_EVERY + 0.5])
    _, logged = _route(failure * 4, clock=lambda: next(times))
    assert len(logged) == 2
    assert "2 more time(s) from 10.0.0.7 since the last report" in logged[1]


@pytest.mark.networked
def test_a_party_service_names_handshakes_with_another_cas_processes(
    tmp_path, job_certs, monkeypatch
):
    """The leader of a job with another CA, and a process presenting another CA's certificate
    to this party: the service's own log names both, and it stops cleanly."""
    import grpc

    for chosen in ("GRPC_VERBOSITY", "GRPC_TRACE"):  # the service's own choice, not a user's
        monkeypatch.delenv(chosen, raising=False)

    from dpfed.runtime.certs import init_certificates, load_identity

    other = tmp_path / "other-ca"
    init_certificates(other, ["bank"])
    ours = load_identity(job_certs / "leader.pem", job_certs / "leader.key", job_certs / "ca.pem")
    theirs = load_identity(other / "leader.pem", other / "leader.key", other / "ca.pem")
    address = f"127.0.0.1:{free_ports(1)[0]}"
    folder = tmp_path / "svc"
    proc, log = _start_service(folder, _party_file(folder, job_certs, "bank", address))
    try:
        assert wait_for(lambda: "serving party bank" in log.read_text(), timeout=120)
        for trust, identity in ((theirs, theirs), (ours, theirs)):
            credentials = grpc.ssl_channel_credentials(
                root_certificates=trust.ca_pem,
                private_key=identity.key_pem,
                certificate_chain=identity.certificate_pem,
            )
            with grpc.secure_channel(
                address, credentials, options=[("grpc.ssl_target_name_override", "bank")]
            ) as channel:
                with pytest.raises(grpc.RpcError):
                    channel.unary_unary("/dpfed.Party/Control")(b"", timeout=10)
        assert wait_for(
            lambda: "presented a certificate not signed by this party's CA" in log.read_text(),
            timeout=60,
        )
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "[bank] 127.0.0.1:" in text
    assert "closed its connection during the TLS handshake" in text
    assert "stopped after serving 0 job(s)" in text
    assert "CallNextHandshakerLocked" not in text and "Tracers" not in text


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        ("", ["True", "INFO", "handshaker"]),
        ("os.environ['GRPC_VERBOSITY'] = 'ERROR'", ["False", "ERROR", "None"]),
        ("os.environ['GRPC_TRACE'] = 'api'", ["False", "None", "api"]),
        ("import grpc", ["False", "None", "None"]),  # too late: gRPC read its environment
    ],
)
def test_the_handshake_trace_is_asked_for_only_before_grpc_and_unless_the_user_chose(
    before, expected
):
    """Run in a process of its own: asking changes the process's environment."""
    code = (
        "import os\nfor k in ('GRPC_VERBOSITY', 'GRPC_TRACE'): os.environ.pop(k, None)\n"
        f"{before}\nfrom dpfed.runtime.grpc_log import enable_handshake_log as e\n"
        "print(e(), os.environ.get('GRPC_VERBOSITY'), os.environ.get('GRPC_TRACE'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == expected
