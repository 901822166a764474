"""Password hashes with scrypt from the standard library, in one self-describing string.

    stored = hash_password("correct horse")      # "scrypt$16384$8$1$<salt hex>$<hash hex>"
    verify_password("correct horse", stored)     # True

The cost parameters travel with each hash, so raising them later leaves old hashes readable.
The comparison takes the same time however many bytes match.

Guide: docs/guide/sessions.md.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["hash_password", "verify_password"]

N, R, P = 2**14, 8, 1  # about 16 MiB and a few tens of milliseconds per hash
LENGTH = 32


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=LENGTH, maxmem=256 * n * r
    )


def hash_password(password: str) -> str:
    """A salted scrypt hash of `password` with its parameters."""
    salt = secrets.token_bytes(16)
    return f"scrypt${N}${R}${P}${salt.hex()}${_scrypt(password, salt, N, R, P).hex()}"


def verify_password(password: str, stored: str) -> bool:
    """True when `password` is the one `stored` was made from; False for any malformed hash."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return False
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, expected = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
        actual = _scrypt(password, salt, n, r, p)
    except ValueError:
        return False
    return hmac.compare_digest(actual, expected)
