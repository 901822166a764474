"""Throwaway certificates for the tests that speak TLS, made with `cryptography`.

`self_signed(directory, name, sans)` writes one self-signed certificate (its own CA) and key.
`make_pki(directory)` writes a whole public-key infrastructure: one CA signs the server
certificate (localhost and 127.0.0.1), a second server certificate for an SNI name, and a
client certificate; a self-signed client certificate and a key that matches nothing stand for
the impostors. Keys are ECDSA P-256: quick to generate, and what a modern deployment would
choose.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CLIENT_NAME",
    "ROGUE_NAME",
    "SNI_HOST",
    "Pair",
    "Pki",
    "make_pki",
    "self_signed",
    "spki_sha256",
]

SNI_HOST = "sni.example.test"
CLIENT_NAME = "client-alice"
ROGUE_NAME = "client-mallory"


@dataclass(frozen=True)
class Pair:
    """A certificate file and its key file."""

    cert: str
    key: str

    def server_context(self, client_ca: str | None = None) -> ssl.SSLContext:
        """A server context presenting this pair; requires client certificates of `client_ca`."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        if client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(client_ca)
        return context


@dataclass(frozen=True)
class Pki:
    """Paths to every file the tests use."""

    ca: str  # the CA certificate: trust anchor for clients and for client certificates
    server: Pair  # CN=localhost, SAN localhost + 127.0.0.1
    sni: Pair  # CN=SNI_HOST, SAN SNI_HOST
    client: Pair  # CN=CLIENT_NAME, signed by the CA
    rogue: Pair  # CN=ROGUE_NAME, self-signed
    stray_key: str  # a key that matches none of the certificates


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Socketify tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    sans: list[x509.GeneralName] | None = None,
    usage: x509.ObjectIdentifier | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer if issuer is not None else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(
    directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> Pair:
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return Pair(str(cert_path), str(key_path))


def make_pki(directory: Path) -> Pki:
    """Generate the whole set of certificates and keys into `directory`."""
    ca_key = _key()
    ca_cert = _certificate("Socketify Test CA", ca_key, None, ca=True)
    ca = (ca_cert.subject, ca_key)
    server_key, sni_key, client_key, rogue_key = _key(), _key(), _key(), _key()
    server_cert = _certificate(
        "localhost",
        server_key,
        ca,
        sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
    )
    sni_cert = _certificate(
        SNI_HOST, sni_key, ca, sans=[x509.DNSName(SNI_HOST)], usage=ExtendedKeyUsageOID.SERVER_AUTH
    )
    client_cert = _certificate(CLIENT_NAME, client_key, ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    rogue_cert = _certificate(ROGUE_NAME, rogue_key, None, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    ca_path = directory / "ca.crt"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    stray = _write(directory, "stray", rogue_cert, _key())
    return Pki(
        ca=str(ca_path),
        server=_write(directory, "server", server_cert, server_key),
        sni=_write(directory, "sni", sni_cert, sni_key),
        client=_write(directory, "client", client_cert, client_key),
        rogue=_write(directory, "rogue", rogue_cert, rogue_key),
        stray_key=stray.key,
    )


def self_signed(directory: Path, name: str, sans: list[str]) -> Pair:
    """A fresh self-signed certificate for `sans` (DNS names or IP addresses; the first is
    the common name), written as `name.crt` and `name.key`."""
    alt_names: list[x509.GeneralName] = []
    for san in sans:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(san)))
        except ValueError:
            alt_names.append(x509.DNSName(san))
    key = _key()
    return _write(directory, name, _certificate(sans[0], key, None, ca=True, sans=alt_names), key)


def spki_sha256(cert_path: str) -> str:
    """The base64 SHA-256 of a certificate's public key (its SubjectPublicKeyInfo): what
    Chromium's `--ignore-certificate-errors-spki-list` takes to trust that one key."""
    cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    der = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()
