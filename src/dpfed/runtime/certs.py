"""Certificates for the networked runtime: a party's identity is its certificate.

Every process of a networked job (the leader that runs ``dpfed run`` and each party) is both
a TLS server and a TLS client, and the connections are mutually authenticated. The
certificates come from a small private CA made by :func:`init_certificates`:

- ``ca.pem`` / ``ca.key``: a self-signed CA that may sign leaf certificates only
  (path length 0). Its key is needed only to issue certificates; keep it offline.
- ``<name>.pem`` / ``<name>.key`` for :data:`LEADER` and each party: a leaf certificate whose
  subject common name is the name, usable for TLS server and client authentication, valid
  for the host names ``<name>`` and ``localhost``, the loopback addresses and any extra
  hosts given.

Keys are EC P-256 in unencrypted PKCS8 PEM files of mode 0o600; signatures use SHA-256.

:func:`load_identity` reads and checks the files one process needs; :func:`identity_of` and
:func:`verify_peer_certificate` read the name out of a certificate a peer presented.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dpfed._validation import DpfedInputError, check_int

__all__ = [
    "LEADER",
    "CertificateSet",
    "TlsIdentity",
    "identity_of",
    "init_certificates",
    "load_identity",
    "verify_peer_certificate",
]

LEADER = "leader"
"""The identity of the process that leads a job; always issued besides the parties."""

_CA = "ca"
_RESERVED = (LEADER, _CA)
_MAX_NAME = 64
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_DNS_LABEL_RE = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_BACKDATE = timedelta(minutes=5)
_HASH = hashes.SHA256
_KEY_MODE = 0o600
_CERT_MODE = 0o644
_LOOPBACK = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


@dataclass(frozen=True)
class CertificateSet:
    """The files written by :func:`init_certificates`.

    Attributes
    ----------
    ca_certificate, ca_key : Path
        The CA certificate (``ca.pem``) and its private key (``ca.key``).
    certificates, keys : dict of str to Path
        Name (:data:`LEADER` first, then the parties in order) -> its ``<name>.pem`` and
        ``<name>.key``.
    """

    ca_certificate: Path
    ca_key: Path
    certificates: dict[str, Path]
    keys: dict[str, Path]


@dataclass(frozen=True)
class TlsIdentity:
    """What one process needs for mutually authenticated TLS, checked by :func:`load_identity`.

    Attributes
    ----------
    name : str
        The identity: the common name of the certificate.
    certificate_pem : bytes
        The process's certificate (PEM).
    key_pem : bytes
        Its private key (PEM). Left out of ``repr`` so it never lands in a log.
    ca_pem : bytes
        The CA certificate that peers' certificates must be issued by (PEM).
    """

    name: str
    certificate_pem: bytes
    key_pem: bytes = field(repr=False)
    ca_pem: bytes


# --------------------------------------------------------------------------------- issuing


def init_certificates(
    out_dir: str | os.PathLike[str],
    parties: Sequence[str],
    *,
    days: int = 365,
    hosts: Mapping[str, Sequence[str]] | None = None,
    now: datetime | None = None,
) -> CertificateSet:
    """Create a CA and a certificate and key for the leader and each party in ``out_dir``.

    Parameters
    ----------
    out_dir : path
        Folder for the files; created if missing. None of the files may exist yet.
    parties : sequence of str
        Party names: distinct, 1 to 64 characters from ``A-Z a-z 0-9 _ . -`` starting with a
        letter or digit, and neither ``"leader"`` nor ``"ca"`` (names are compared without
        regard to case, as file names on some systems are).
    days : int, default 365
        Validity of every certificate, counted from ``now``; certificates are also back-dated
        by five minutes to tolerate clock skew.
    hosts : mapping of str to sequence of str, optional
        Extra host names or IP addresses a process is reached at, by name (:data:`LEADER` or
        a party). Each becomes a subject alternative name of that certificate, besides the
        name itself, ``localhost``, ``127.0.0.1`` and ``::1``.
    now : datetime, optional
        Time-zone aware start of validity (default: the current time).

    Returns
    -------
    CertificateSet
        The paths written.

    Raises
    ------
    DpfedInputError
        On a bad argument or if a target file exists; nothing is written then.

    Notes
    -----
    All keys and certificates are made in memory first, then written to temporary files and
    renamed into place. If any write fails, the files written so far (and any folder this
    call created) are removed: the set is written whole or not at all. Keys are created with
    mode 0o600 and are never readable by others; certificates get mode 0o644.
    """
    names = [LEADER, *_check_parties(parties)]
    days = check_int("days", days)
    extra_hosts = _check_hosts(hosts, names)
    start = _check_now(now)
    try:
        not_after = start + timedelta(days=days)
    except OverflowError:
        raise DpfedInputError(
            f"days must end the validity before the year 10000. Found {days}."
        ) from None
    not_before = start - _BACKDATE

    out = Path(out_dir)
    _check_out_dir(out)
    targets = {
        "ca.pem": out / "ca.pem",
        "ca.key": out / "ca.key",
    }
    for name in names:
        targets[f"{name}.pem"] = out / f"{name}.pem"
        targets[f"{name}.key"] = out / f"{name}.key"
    existing = [str(p) for p in targets.values() if os.path.lexists(p)]
    if existing:
        raise DpfedInputError(
            f"init_certificates never overwrites files: remove them or choose another out_dir. "
            f"Found existing {existing}."
        )

    # Everything in memory first.
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _ca_certificate(ca_key, not_before, not_after)
    contents: list[tuple[Path, bytes, int]] = [
        (targets["ca.pem"], _cert_pem(ca_cert), _CERT_MODE),
        (targets["ca.key"], _key_pem(ca_key), _KEY_MODE),
    ]
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _leaf_certificate(
            name, key, ca_cert, ca_key, extra_hosts.get(name, []), not_before, not_after
        )
        contents.append((targets[f"{name}.pem"], _cert_pem(cert), _CERT_MODE))
        contents.append((targets[f"{name}.key"], _key_pem(key), _KEY_MODE))

    _write_all(out, contents)
    return CertificateSet(
        ca_certificate=targets["ca.pem"],
        ca_key=targets["ca.key"],
        certificates={n: targets[f"{n}.pem"] for n in names},
        keys={n: targets[f"{n}.key"] for n in names},
    )


def _check_parties(parties: Sequence[str]) -> list[str]:
    if isinstance(parties, str | bytes) or not isinstance(parties, Sequence):
        raise DpfedInputError(f"parties must be a sequence of names. Found {parties!r}.")
    names = list(parties)
    if not names:
        raise DpfedInputError("parties must name at least one party. Found [].")
    for name in names:
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or len(name) > _MAX_NAME:
            raise DpfedInputError(
                f"party names must be 1 to {_MAX_NAME} characters from A-Z a-z 0-9 _ . - "
                f"starting with a letter or digit. Found {name!r}."
            )
        if name.lower() in _RESERVED:
            raise DpfedInputError(
                f"party names must not be one of the reserved names {list(_RESERVED)} "
                f"(compared ignoring case). Found {name!r}."
            )
    folded = [n.lower() for n in names]
    if len(set(folded)) != len(folded):
        raise DpfedInputError(
            f"parties must be distinct names (compared ignoring case). Found {names}."
        )
    return names


def _check_hosts(
    hosts: Mapping[str, Sequence[str]] | None, names: Sequence[str]
) -> dict[str, list[x509.GeneralName]]:
    if hosts is None:
        return {}
    if not isinstance(hosts, Mapping):
        raise DpfedInputError(f"hosts must be a mapping of name to host names. Found {hosts!r}.")
    unknown = [k for k in hosts if k not in names]
    if unknown:
        raise DpfedInputError(
            f"hosts must be keyed by the leader or a party, one of {list(names)}. "
            f"Found unknown {unknown}."
        )
    out: dict[str, list[x509.GeneralName]] = {}
    for name, entries in hosts.items():
        if isinstance(entries, str | bytes) or not isinstance(entries, Sequence):
            raise DpfedInputError(
                f"hosts[{name!r}] must be a sequence of host names or IP addresses. "
                f"Found {entries!r}."
            )
        out[name] = [_host_name(name, entry) for entry in entries]
    return out


def _host_name(owner: str, entry: object) -> x509.GeneralName:
    if isinstance(entry, str):
        try:
            return x509.IPAddress(ipaddress.ip_address(entry))
        except ValueError:
            pass
        labels = entry[:-1].split(".") if entry.endswith(".") else entry.split(".")
        if len(entry) <= 253 and all(_DNS_LABEL_RE.fullmatch(label) for label in labels):
            return x509.DNSName(entry)
    raise DpfedInputError(
        f"hosts[{owner!r}] entries must be DNS names or IP addresses. Found {entry!r}."
    )


def _check_now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise DpfedInputError(f"now must be a time-zone aware datetime. Found {now!r}.")
    return now.astimezone(UTC)


def _check_out_dir(out: Path) -> None:
    # The first ancestor that exists must be a folder; otherwise mkdir fails half-way.
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                raise DpfedInputError(f"out_dir must be a folder. Found a file at {str(p)!r}.")
            return


def _ca_certificate(
    key: ec.EllipticCurvePrivateKey, not_before: datetime, not_after: datetime
) -> x509.Certificate:
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"dpfed CA {secrets.token_hex(8)}")]
    )
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(key, _HASH())
    )


def _leaf_certificate(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    extra: Sequence[x509.GeneralName],
    not_before: datetime,
    not_after: datetime,
) -> x509.Certificate:
    san: list[x509.GeneralName] = [
        x509.DNSName(name),
        x509.DNSName("localhost"),
        *(x509.IPAddress(ip) for ip in _LOOPBACK),
    ]
    for general_name in extra:
        if general_name not in san:
            san.append(general_name)
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, _HASH())
    )


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_all(out: Path, contents: Sequence[tuple[Path, bytes, int]]) -> None:
    """Write every file or none: all to temporary files first, then rename each into place."""
    created_dirs = [p for p in (out, *out.parents) if not p.exists()]
    temporaries: list[str] = []
    placed: list[Path] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        staged: list[tuple[str, Path]] = []
        for target, data, mode in contents:
            # mkstemp opens with O_EXCL and mode 0o600: a key is never readable by others,
            # not even for a moment. Certificates are opened up once written.
            fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{target.name}.", suffix=".tmp")
            temporaries.append(tmp)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            staged.append((tmp, target))
        for tmp, target in staged:
            os.replace(tmp, target)
            placed.append(target)
    except BaseException:
        for target in placed:
            target.unlink(missing_ok=True)
        for tmp in temporaries:
            Path(tmp).unlink(missing_ok=True)
        for d in created_dirs:  # deepest first
            try:
                d.rmdir()
            except OSError:
                break
        raise


# -------------------------------------------------------------------------------- checking


def identity_of(cert_pem: bytes) -> str:
    """The identity (subject common name) of a certificate.

    This reads the name only; it checks nothing about who issued the certificate. Use
    :func:`verify_peer_certificate` for a certificate from the network.

    Parameters
    ----------
    cert_pem : bytes
        The certificate, PEM or DER.

    Returns
    -------
    str
        The common name.

    Raises
    ------
    DpfedInputError
        If the bytes are not a certificate or its subject has not exactly one common name.
    """
    return _common_name(_parse_certificate(cert_pem, "certificate"), "certificate")


def load_identity(
    certificate_path: str | os.PathLike[str],
    key_path: str | os.PathLike[str],
    ca_path: str | os.PathLike[str],
    *,
    now: datetime | None = None,
) -> TlsIdentity:
    """Read and check the certificate, key and CA certificate one process runs with.

    Parameters
    ----------
    certificate_path : path
        The process's certificate (PEM), e.g. ``party1.pem``.
    key_path : path
        Its private key (unencrypted PEM), e.g. ``party1.key``.
    ca_path : path
        The CA certificate (PEM), ``ca.pem``.
    now : datetime, optional
        Time-zone aware time at which the certificates must be valid (default: now).

    Returns
    -------
    TlsIdentity
        The name (common name of the certificate) and the three files' contents.

    Raises
    ------
    DpfedInputError
        Naming the file, if a file is missing or does not parse, the key does not belong to
        the certificate, the certificate was not issued by the CA, is not valid at ``now``,
        is itself a CA certificate or may not be used for both TLS server and client
        authentication, or if the CA certificate is not a valid CA.
    """
    at = _check_now(now)
    cert_bytes = _read(certificate_path, "certificate")
    key_bytes = _read(key_path, "key")
    ca_bytes = _read(ca_path, "CA certificate")

    cert_what = f"certificate {str(certificate_path)!r}"
    ca_what = f"CA certificate {str(ca_path)!r}"
    cert = _parse_certificate(cert_bytes, cert_what, pem_only=True)
    ca = _parse_certificate(ca_bytes, ca_what, pem_only=True)
    key = _parse_key(key_bytes, f"key {str(key_path)!r}")

    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        raise DpfedInputError(
            f"key {str(key_path)!r} must be the private key of {cert_what}. "
            f"Found the key of another certificate."
        )
    name = _check_leaf(cert, ca, cert_what, ca_what, at)
    return TlsIdentity(name=name, certificate_pem=cert_bytes, key_pem=key_bytes, ca_pem=ca_bytes)


def verify_peer_certificate(
    cert_pem_or_der: bytes, ca_pem: bytes, *, now: datetime | None = None
) -> str:
    """Check that a peer's certificate was issued by the CA and is valid; return its name.

    The TLS layer already verifies the peer; the runtime calls this on the certificate it
    reports for a peer as a second check before trusting the name.

    Parameters
    ----------
    cert_pem_or_der : bytes
        The peer's certificate, PEM or DER.
    ca_pem : bytes
        The CA certificate, PEM (or DER).
    now : datetime, optional
        Time-zone aware time at which the certificates must be valid (default: now).

    Returns
    -------
    str
        The peer's identity: the common name of its certificate.

    Raises
    ------
    DpfedInputError
        If the certificate was not issued by the CA, is not valid at ``now``, is a CA
        certificate, may not be used for TLS server and client authentication, or if the
        bytes do not parse.
    """
    at = _check_now(now)
    cert = _parse_certificate(cert_pem_or_der, "peer certificate")
    ca = _parse_certificate(ca_pem, "CA certificate")
    return _check_leaf(cert, ca, "peer certificate", "CA certificate", at)


def _read(path: str | os.PathLike[str], what: str) -> bytes:
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise DpfedInputError(f"{what} file {str(p)!r} must exist. Found no such file.") from None
    except IsADirectoryError:
        raise DpfedInputError(f"{what} file {str(p)!r} must be a file. Found a folder.") from None
    except OSError as exc:
        raise DpfedInputError(
            f"{what} file {str(p)!r} must be readable. Found {exc.strerror or exc}."
        ) from None


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise DpfedInputError(f"{what} must be bytes (PEM or DER). Found {type(data).__name__}.")


def _parse_certificate(data: object, what: str, *, pem_only: bool = False) -> x509.Certificate:
    raw = _as_bytes(data, what)
    is_pem = b"-----BEGIN" in raw
    if pem_only and not is_pem:
        raise DpfedInputError(f"{what} must be a PEM certificate. Found no PEM block.")
    try:
        if is_pem:
            return x509.load_pem_x509_certificate(raw)
        return x509.load_der_x509_certificate(raw)
    except ValueError as exc:
        raise DpfedInputError(
            f"{what} must be a {'PEM' if is_pem else 'DER'} X.509 certificate. "
            f"Found bytes that do not parse ({exc})."
        ) from None


def _parse_key(data: bytes, what: str) -> PrivateKeyTypes:
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise DpfedInputError(
            f"{what} must be an unencrypted private key. Found an encrypted key."
        ) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise DpfedInputError(
            f"{what} must be a PEM private key. Found bytes that do not parse ({exc})."
        ) from None


def _common_name(cert: x509.Certificate, what: str) -> str:
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(cns) != 1 or not isinstance(cns[0].value, str):
        raise DpfedInputError(
            f"{what} must have exactly one subject common name. Found {[a.value for a in cns]}."
        )
    return cns[0].value


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _check_validity(cert: x509.Certificate, what: str, at: datetime) -> None:
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    if not start <= at <= end:
        state = "expired" if at > end else "not yet valid"
        raise DpfedInputError(
            f"{what} must be valid at {at.isoformat()}. Found it {state} "
            f"(valid from {start.isoformat()} to {end.isoformat()})."
        )


def _check_leaf(
    cert: x509.Certificate, ca: x509.Certificate, what: str, ca_what: str, at: datetime
) -> str:
    """Checks shared by :func:`load_identity` and :func:`verify_peer_certificate`."""
    if not _is_ca(ca):
        raise DpfedInputError(f"{ca_what} must be a CA certificate. Found a leaf certificate.")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        found = (
            f"one issued by {cert.issuer.rfc4514_string()!r}"
            if cert.issuer != ca.subject
            else "a signature that does not verify with that CA's key"
        )
        raise DpfedInputError(
            f"{what} must be issued by {ca_what} ({ca.subject.rfc4514_string()!r}). Found {found}."
        ) from None
    if _is_ca(cert):
        raise DpfedInputError(f"{what} must be a leaf certificate. Found a CA certificate.")
    _check_validity(cert, what, at)
    _check_validity(ca, ca_what, at)
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        eku = None
    needed = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)
    if eku is not None and not all(oid in eku for oid in needed):
        raise DpfedInputError(
            f"{what} must allow TLS server and client authentication. "
            f"Found extended key usages {[oid.dotted_string for oid in eku]}."
        )
    return _common_name(cert, what)
