"""A self-signed development certificate for Ripple, made with the `cryptography` package.

    python -m examples.ripple.devcert                 # ripple.crt and ripple.key here
    python -m examples.ripple.devcert --dir certs --name localhost --name 192.168.1.20

The certificate names localhost, 127.0.0.1 and ::1 (plus any `--name`), uses an ECDSA P-256
key and lasts 30 days: long enough to develop with, short enough that nobody ships it. A
browser warns about it until it is trusted (or, in tests, told to ignore the warning). The
key is written readable by its owner only.

Guide: docs/guide/https.md.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["make"]

NAMES = ("localhost", "127.0.0.1", "::1")
LIFETIME = datetime.timedelta(days=30)


def _alternative_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make(directory: Path, names: Sequence[str] = NAMES) -> tuple[Path, Path]:
    """Write `ripple.crt` and `ripple.key` into `directory`; return their paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a client clock a little behind
        .not_valid_after(now + LIFETIME)
        .add_extension(x509.SubjectAlternativeName([_alternative_name(n) for n in names]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "ripple.crt", directory / "ripple.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(key_bytes)
    return cert_path, key_path


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: make the pair and say how to start Ripple with it."""
    parser = argparse.ArgumentParser(prog="python -m examples.ripple.devcert", description=__doc__)
    parser.add_argument("--dir", default=".", help="where to write ripple.crt and ripple.key")
    parser.add_argument("--name", action="append", default=[], help="one more host name or IP")
    options = parser.parse_args(argv)
    cert, key = make(Path(options.dir), [*NAMES, *options.name])
    print(f"wrote {cert} and {key}")
    print(f"run: python -m examples.ripple --cert {cert} --key {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
