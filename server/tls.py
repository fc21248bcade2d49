"""TLS: the server's certificate, key and SSL context.

`headwater start --tls-cert FILE --tls-key FILE` uses the given files; otherwise the
first start writes a self-signed certificate (CN=localhost, SAN localhost,
127.0.0.1, ::1) and its key (mode 0600) into the data directory and reuses them
afterwards. Clients verify it with `sslmode=verify-full sslrootcert=<data>/server.crt`.
`--no-tls` answers every SSLRequest with 'N'.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import logging
import os
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("headwater.tls")

CERT_NAME = "server.crt"
KEY_NAME = "server.key"


@dataclass
class TlsSetup:
    context: ssl.SSLContext
    cert_path: Path
    key_path: Path
    # tls-server-end-point channel binding data (RFC 5929): hash of the certificate
    end_point: bytes | None


def generate_self_signed(cert_path: Path, key_path: Path, days: int = 3650) -> None:
    """A self-signed certificate for localhost; the key file is created with mode 0600."""
    # cryptography (0.1 s to import) only here and for unusual signature algorithms
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=True,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_path.parent.mkdir(parents=True, exist_ok=True)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    tmp_key = key_path.with_name(key_path.name + ".tmp")
    fd = os.open(tmp_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_pem)
    os.chmod(tmp_key, 0o600)
    tmp_cert = cert_path.with_name(cert_path.name + ".tmp")
    tmp_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.replace(tmp_key, key_path)  # the key first: a certificate never lacks its key
    os.replace(tmp_cert, cert_path)


# Signature algorithm OIDs (DER content bytes) -> the hash tls-server-end-point uses:
# the signature's own, SHA-256 for MD5 and SHA-1 (RFC 5929 4.1) and for EdDSA.
_END_POINT_HASHES = {
    bytes.fromhex(oid): name
    for name, oids in {
        "sha224": ("2a864886f70d01010e", "2a8648ce3d040301"),
        "sha256": (
            "2a864886f70d010104",  # md5WithRSAEncryption
            "2a864886f70d010105",  # sha1WithRSAEncryption
            "2a864886f70d01010b",
            "2a8648ce3d0401",  # ecdsa-with-SHA1
            "2a8648ce3d040302",
            "2a8648ce380403",  # dsa-with-sha1
            "608648016503040302",  # dsa-with-sha256
            "2b6570",  # Ed25519
            "2b6571",  # Ed448
        ),
        "sha384": ("2a864886f70d01010c", "2a8648ce3d040303"),
        "sha512": ("2a864886f70d01010d", "2a8648ce3d040304"),
    }.items()
    for oid in oids
}


def _der(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at `at`."""
    tag, n = data[at], data[at + 1]
    at += 2
    if n & 0x80:
        size = n & 0x7F
        n = int.from_bytes(data[at : at + size], "big")
        at += size
    return tag, at, at + n


def end_point_hash(cert_path: Path) -> bytes | None:
    """RFC 5929 tls-server-end-point: the certificate's signature hash (MD5/SHA-1 -> SHA-256)."""
    pem = cert_path.read_text()
    start = pem.index(ssl.PEM_HEADER)  # the first certificate of a chain
    end = pem.index(ssl.PEM_FOOTER, start) + len(ssl.PEM_FOOTER)
    der = ssl.PEM_cert_to_DER_cert(pem[start:end])
    _, body, _ = _der(der, 0)  # Certificate ::= SEQUENCE {tbsCertificate, signatureAlgorithm, ..}
    _, _, tbs_end = _der(der, body)
    _, alg, _ = _der(der, tbs_end)  # AlgorithmIdentifier ::= SEQUENCE {algorithm OID, ..}
    tag, oid, oid_end = _der(der, alg)
    name = _END_POINT_HASHES.get(der[oid:oid_end]) if tag == 0x06 else None
    if name is not None:
        return hashlib.new(name, der).digest()
    return _end_point_hash_slow(cert_path)  # RSASSA-PSS and the like: the hash is a parameter


def _end_point_hash_slow(cert_path: Path) -> bytes | None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    cert = x509.load_pem_x509_certificates(cert_path.read_bytes())[0]
    algo = cert.signature_hash_algorithm
    if algo is None or isinstance(algo, hashes.MD5 | hashes.SHA1):
        algo = hashes.SHA256()
    h = hashes.Hash(algo)
    h.update(cert.public_bytes(serialization.Encoding.DER))
    return h.finalize()


def server_context(cert_path: Path, key_path: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2  # ssl_min_protocol_version's default
    ctx.load_cert_chain(str(cert_path), str(key_path))
    return ctx


def setup(
    data_dir: Path, cert: Path | None, key: Path | None, enabled: bool = True
) -> TlsSetup | None:
    if not enabled:
        return None
    if (cert is None) != (key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    if cert is None or key is None:
        cert, key = data_dir / CERT_NAME, data_dir / KEY_NAME
        if not (cert.exists() and key.exists()):
            generate_self_signed(cert, key)
            log.info("generated a self-signed certificate for localhost: %s", cert)
    mode = key.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "private key file %s has group or world access; permissions should be 0600", key
        )
    try:
        end_point = end_point_hash(cert)
    except (ValueError, IndexError):
        end_point = None
    return TlsSetup(server_context(cert, key), cert, key, end_point)
