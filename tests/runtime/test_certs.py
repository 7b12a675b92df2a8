"""Certificates of the networked runtime: issuing, checking, and a real mutual-TLS handshake."""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import stat
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dpfed._validation import DpfedInputError
from dpfed.runtime.certs import (
    LEADER,
    CertificateSet,
    TlsIdentity,
    identity_of,
    init_certificates,
    load_identity,
    verify_peer_certificate,
)

PARTIES = ["label", "party1"]


@pytest.fixture
def certs(tmp_path: Path) -> CertificateSet:
    return init_certificates(tmp_path / "certs", PARTIES)


@pytest.fixture
def other_certs(tmp_path: Path) -> CertificateSet:
    return init_certificates(tmp_path / "other", PARTIES)


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _san(cert: x509.Certificate) -> x509.SubjectAlternativeName:
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value


# ----------------------------------------------------------------------------------- issuing


def test_init_writes_the_ca_and_one_pair_per_name_with_the_right_modes(tmp_path, certs):
    out = tmp_path / "certs"
    names = [LEADER, *PARTIES]
    assert list(certs.certificates) == names and list(certs.keys) == names
    assert certs.ca_certificate == out / "ca.pem" and certs.ca_key == out / "ca.key"
    expected = {"ca.pem", "ca.key"} | {f"{n}.pem" for n in names} | {f"{n}.key" for n in names}
    assert {p.name for p in out.iterdir()} == expected  # no temporary files left behind
    if os.name == "posix":
        for key in [certs.ca_key, *certs.keys.values()]:
            assert stat.S_IMODE(key.stat().st_mode) == 0o600
        for cert in [certs.ca_certificate, *certs.certificates.values()]:
            assert stat.S_IMODE(cert.stat().st_mode) == 0o644


def test_keys_are_unencrypted_pkcs8_p256(certs):
    for path in [certs.ca_key, *certs.keys.values()]:
        data = path.read_bytes()
        assert data.startswith(b"-----BEGIN PRIVATE KEY-----")
        key = serialization.load_pem_private_key(data, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        assert isinstance(key.curve, ec.SECP256R1)


def test_the_ca_is_a_self_signed_ca_for_leaves_only(certs):
    ca = _cert(certs.ca_certificate)
    ca.verify_directly_issued_by(ca)
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value.startswith("dpfed CA ")
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca and bc.value.path_length == 0
    ku = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.key_cert_sign and ku.crl_sign and not ku.digital_signature
    assert isinstance(ca.signature_hash_algorithm, hashes.SHA256)


def test_every_leaf_verifies_and_has_the_cn_san_and_eku(certs):
    ca = _cert(certs.ca_certificate)
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    serials = set()
    for name, path in certs.certificates.items():
        cert = _cert(path)
        cert.verify_directly_issued_by(ca)
        assert isinstance(cert.signature_hash_algorithm, hashes.SHA256)
        assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [name]
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
        assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature
        san = _san(cert)
        assert san.get_values_for_type(x509.DNSName) == [name, "localhost"]
        assert san.get_values_for_type(x509.IPAddress) == [
            ipaddress.ip_address("127.0.0.1"),
            ipaddress.ip_address("::1"),
        ]
        aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
        assert aki.key_identifier == ca_ski.digest
        cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        serials.add(cert.serial_number)
        assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(
            days=365, minutes=5
        )
    assert len(serials) == len(certs.certificates)


def test_hosts_add_dns_and_ip_names(tmp_path):
    certs = init_certificates(
        tmp_path,
        ["a", "b"],
        hosts={"a": ["a.example.org", "10.0.0.7", "fd00::1", "localhost"], LEADER: ["lead"]},
    )
    san = _san(_cert(certs.certificates["a"]))
    assert san.get_values_for_type(x509.DNSName) == ["a", "localhost", "a.example.org"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address(ip) for ip in ("127.0.0.1", "::1", "10.0.0.7", "fd00::1")
    ]
    assert _san(_cert(certs.certificates[LEADER])).get_values_for_type(x509.DNSName) == [
        LEADER,
        "localhost",
        "lead",
    ]
    assert _san(_cert(certs.certificates["b"])).get_values_for_type(x509.DNSName) == [
        "b",
        "localhost",
    ]


def test_init_refuses_existing_files_and_writes_nothing(tmp_path):
    (tmp_path / "party1.key").write_text("mine")
    (tmp_path / "ca.pem").write_text("mine too")
    with pytest.raises(DpfedInputError, match=r"party1\.key") as info:
        init_certificates(tmp_path, PARTIES)
    assert "ca.pem" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.pem", "party1.key"]
    assert (tmp_path / "party1.key").read_text() == "mine"


def test_init_twice_into_the_same_folder_is_refused(tmp_path):
    init_certificates(tmp_path, PARTIES)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(DpfedInputError, match="never overwrites"):
        init_certificates(tmp_path, PARTIES)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize(
    ("parties", "match"),
    [
        (["a", "a"], "distinct"),
        (["a", "A"], "distinct"),
        ([""], "1 to 64 characters"),
        (["a b"], "1 to 64 characters"),
        (["../x"], "1 to 64 characters"),
        ([".hidden"], "1 to 64 characters"),
        (["x" * 65], "1 to 64 characters"),
        ([3], "1 to 64 characters"),
        (["leader"], "reserved"),
        (["ca"], "reserved"),
        (["CA"], "reserved"),
        ([], "at least one"),
        ("ab", "sequence of names"),
    ],
)
def test_init_refuses_bad_party_names(tmp_path, parties, match):
    out = tmp_path / "certs"
    with pytest.raises(DpfedInputError, match=match):
        init_certificates(out, parties)
    assert not out.exists()


def test_init_accepts_the_longest_name(tmp_path):
    name = "p" * 64
    certs = init_certificates(tmp_path, [name, "a.b_c-1"])
    assert identity_of(certs.certificates[name].read_bytes()) == name


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"days": 0}, "days"),
        ({"days": -3}, "days"),
        ({"days": 10**7}, "days"),
        ({"hosts": {"nobody": ["x"]}}, "unknown"),
        ({"hosts": {"a": "a.example.org"}}, "sequence of host names"),
        ({"hosts": {"a": ["bad host"]}}, "DNS names or IP addresses"),
        ({"hosts": {"a": ["[::1]"]}}, "DNS names or IP addresses"),
        ({"now": datetime(2024, 1, 1)}, "time-zone aware"),
    ],
)
def test_init_refuses_bad_arguments(tmp_path, kwargs, match):
    out = tmp_path / "certs"
    with pytest.raises(DpfedInputError, match=match):
        init_certificates(out, ["a", "b"], **kwargs)
    assert not out.exists()


def test_init_refuses_a_file_as_out_dir(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(DpfedInputError, match="folder"):
        init_certificates(tmp_path / "f" / "certs", PARTIES)


def test_a_failed_write_removes_what_was_written(tmp_path, monkeypatch):
    import dpfed.runtime.certs as certs_module

    calls = []
    real_replace = os.replace

    def flaky_replace(src, dst):
        calls.append(dst)
        if len(calls) == 4:
            raise OSError("disk on fire")
        real_replace(src, dst)

    monkeypatch.setattr(certs_module.os, "replace", flaky_replace)
    out = tmp_path / "new" / "certs"
    with pytest.raises(OSError, match="disk on fire"):
        init_certificates(out, PARTIES)
    assert len(calls) == 4
    assert not (tmp_path / "new").exists()


# ---------------------------------------------------------------------------------- checking


def test_load_identity_accepts_matching_files(certs):
    for name in [LEADER, *PARTIES]:
        ident = load_identity(certs.certificates[name], certs.keys[name], certs.ca_certificate)
        assert isinstance(ident, TlsIdentity)
        assert ident.name == name
        assert ident.certificate_pem == certs.certificates[name].read_bytes()
        assert ident.key_pem == certs.keys[name].read_bytes()
        assert ident.ca_pem == certs.ca_certificate.read_bytes()
        assert "PRIVATE KEY" not in repr(ident)


def test_load_identity_refuses_the_key_of_another_party(certs):
    with pytest.raises(DpfedInputError, match=r"label\.key"):
        load_identity(certs.certificates["party1"], certs.keys["label"], certs.ca_certificate)


def test_load_identity_refuses_a_certificate_from_another_ca(certs, other_certs):
    with pytest.raises(DpfedInputError, match="must be issued by"):
        load_identity(
            other_certs.certificates["label"], other_certs.keys["label"], certs.ca_certificate
        )


def test_load_identity_refuses_a_ca_with_the_same_name_but_another_key(tmp_path, certs):
    real_ca = _cert(certs.ca_certificate)
    key = ec.generate_private_key(ec.SECP256R1())
    fake_ca = (
        x509.CertificateBuilder()
        .subject_name(real_ca.subject)
        .issuer_name(real_ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(real_ca.not_valid_before_utc)
        .not_valid_after(real_ca.not_valid_after_utc)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    fake = tmp_path / "fake-ca.pem"
    fake.write_bytes(fake_ca.public_bytes(serialization.Encoding.PEM))
    with pytest.raises(DpfedInputError, match="signature that does not verify"):
        load_identity(certs.certificates["label"], certs.keys["label"], fake)


def test_load_identity_refuses_an_expired_certificate(tmp_path):
    past = datetime.now(UTC) - timedelta(days=10)
    certs = init_certificates(tmp_path, PARTIES, days=1, now=past)
    with pytest.raises(DpfedInputError, match=r"label\.pem.*expired"):
        load_identity(certs.certificates["label"], certs.keys["label"], certs.ca_certificate)
    # ... which was fine back then.
    ident = load_identity(
        certs.certificates["label"], certs.keys["label"], certs.ca_certificate, now=past
    )
    assert ident.name == "label"


def test_load_identity_refuses_a_not_yet_valid_certificate(tmp_path):
    certs = init_certificates(tmp_path, PARTIES, now=datetime.now(UTC) + timedelta(days=2))
    with pytest.raises(DpfedInputError, match="not yet valid"):
        load_identity(certs.certificates["label"], certs.keys["label"], certs.ca_certificate)


def test_load_identity_refuses_missing_and_garbled_files(tmp_path, certs):
    missing = tmp_path / "nope.pem"
    with pytest.raises(DpfedInputError, match=r"nope\.pem.*no such file"):
        load_identity(missing, certs.keys["label"], certs.ca_certificate)
    with pytest.raises(DpfedInputError, match=r"nope\.pem"):
        load_identity(certs.certificates["label"], certs.keys["label"], missing)
    with pytest.raises(DpfedInputError, match=r"nope\.pem"):
        load_identity(certs.certificates["label"], missing, certs.ca_certificate)
    garbled = tmp_path / "garbled.pem"
    garbled.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(DpfedInputError, match=r"garbled\.pem"):
        load_identity(garbled, certs.keys["label"], certs.ca_certificate)
    label_pem = certs.certificates["label"]
    with pytest.raises(DpfedInputError, match=r"label\.pem.*PEM private key"):
        load_identity(label_pem, label_pem, certs.ca_certificate)


def test_load_identity_refuses_the_ca_as_identity_or_a_leaf_as_ca(certs):
    with pytest.raises(DpfedInputError, match=r"leaf certificate\. Found a CA"):
        load_identity(certs.ca_certificate, certs.ca_key, certs.ca_certificate)
    with pytest.raises(DpfedInputError, match="must be a CA certificate"):
        load_identity(certs.certificates["label"], certs.keys["label"], certs.certificates["label"])


def test_identity_of_reads_pem_and_der(certs):
    for name, path in certs.certificates.items():
        pem = path.read_bytes()
        der = _cert(path).public_bytes(serialization.Encoding.DER)
        assert identity_of(pem) == identity_of(der) == name
    with pytest.raises(DpfedInputError, match="certificate"):
        identity_of(b"garbage")
    with pytest.raises(DpfedInputError, match="bytes"):
        identity_of(path.read_text())  # type: ignore[arg-type]


def test_identity_of_refuses_a_certificate_without_exactly_one_cn():
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, "a"), x509.NameAttribute(NameOID.COMMON_NAME, "b")]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    with pytest.raises(DpfedInputError, match="exactly one"):
        identity_of(cert.public_bytes(serialization.Encoding.PEM))


def test_verify_peer_certificate_reads_pem_and_der_and_refuses_another_ca(certs, other_certs):
    ca_pem = certs.ca_certificate.read_bytes()
    for name, path in certs.certificates.items():
        pem = path.read_bytes()
        der = _cert(path).public_bytes(serialization.Encoding.DER)
        assert verify_peer_certificate(pem, ca_pem) == name
        assert verify_peer_certificate(der, ca_pem) == name
    foreign = other_certs.certificates["label"].read_bytes()
    with pytest.raises(DpfedInputError, match="must be issued by"):
        verify_peer_certificate(foreign, ca_pem)
    with pytest.raises(DpfedInputError, match="must be issued by"):
        verify_peer_certificate(
            _cert(other_certs.certificates["label"]).public_bytes(serialization.Encoding.DER),
            ca_pem,
        )
    with pytest.raises(DpfedInputError, match="leaf certificate"):
        verify_peer_certificate(ca_pem, ca_pem)
    with pytest.raises(DpfedInputError, match="expired"):
        verify_peer_certificate(
            certs.certificates["label"].read_bytes(),
            ca_pem,
            now=datetime.now(UTC) + timedelta(days=400),
        )


# --------------------------------------------------------------------------------------- TLS


def _server_context(ident: TlsIdentity, tmp: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=ident.ca_pem.decode())
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.load_cert_chain(*_chain_files(ident, tmp))
    return ctx


def _client_context(ident: TlsIdentity, tmp: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=ident.ca_pem.decode())
    ctx.check_hostname = True
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.load_cert_chain(*_chain_files(ident, tmp))
    return ctx


def _chain_files(ident: TlsIdentity, tmp: Path) -> tuple[str, str]:
    cert, key = tmp / f"tls-{ident.name}.pem", tmp / f"tls-{ident.name}.key"
    cert.write_bytes(ident.certificate_pem)
    key.write_bytes(ident.key_pem)
    return str(cert), str(key)


def _handshake(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> tuple[bytes | BaseException, bytes | BaseException]:
    """Server and client over a loopback socket pair; each side's peer cert (DER) or error."""
    server_sock, client_sock = socket.socketpair()
    server_sock.settimeout(10)
    client_sock.settimeout(10)

    def serve() -> bytes | BaseException:
        try:
            with server_ctx.wrap_socket(server_sock, server_side=True) as tls:
                peer = tls.getpeercert(binary_form=True)
                tls.sendall(b"ok")
                return peer
        except (OSError, ssl.SSLError) as exc:
            return exc

    def connect() -> bytes | BaseException:
        try:
            with client_ctx.wrap_socket(client_sock, server_hostname="localhost") as tls:
                peer = tls.getpeercert(binary_form=True)
                if tls.recv(2) != b"ok":
                    raise ConnectionError("server closed the connection")
                return peer
        except (OSError, ssl.SSLError) as exc:
            return exc

    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            server = pool.submit(serve)
            client = connect()
            return server.result(timeout=20), client
    finally:
        server_sock.close()
        client_sock.close()


def test_mutual_tls_handshake_works_with_these_certificates(tmp_path, certs):
    server = load_identity(certs.certificates["label"], certs.keys["label"], certs.ca_certificate)
    client = load_identity(certs.certificates[LEADER], certs.keys[LEADER], certs.ca_certificate)
    seen_by_server, seen_by_client = _handshake(
        _server_context(server, tmp_path), _client_context(client, tmp_path)
    )
    assert isinstance(seen_by_server, bytes), seen_by_server
    assert isinstance(seen_by_client, bytes), seen_by_client
    assert verify_peer_certificate(seen_by_server, server.ca_pem) == LEADER
    assert verify_peer_certificate(seen_by_client, client.ca_pem) == "label"


def test_a_client_from_another_ca_fails_the_handshake(tmp_path, certs, other_certs):
    server = load_identity(certs.certificates["label"], certs.keys["label"], certs.ca_certificate)
    intruder = load_identity(
        other_certs.certificates[LEADER], other_certs.keys[LEADER], other_certs.ca_certificate
    )
    # The intruder trusts the real CA, so only the server's check of the client can stop it.
    intruder_ctx = _client_context(intruder, tmp_path)
    intruder_ctx.load_verify_locations(cadata=server.ca_pem.decode())
    seen_by_server, seen_by_client = _handshake(_server_context(server, tmp_path), intruder_ctx)
    assert isinstance(seen_by_server, ssl.SSLError), seen_by_server
    assert isinstance(seen_by_client, OSError), seen_by_client


def test_a_server_from_another_ca_fails_the_handshake(tmp_path, certs, other_certs):
    impostor = load_identity(
        other_certs.certificates["label"], other_certs.keys["label"], other_certs.ca_certificate
    )
    client = load_identity(certs.certificates[LEADER], certs.keys[LEADER], certs.ca_certificate)
    server_ctx = _server_context(impostor, tmp_path)
    server_ctx.load_verify_locations(cadata=client.ca_pem.decode())
    seen_by_server, seen_by_client = _handshake(server_ctx, _client_context(client, tmp_path))
    assert isinstance(seen_by_client, ssl.SSLCertVerificationError), seen_by_client
    assert isinstance(seen_by_server, OSError), seen_by_server
