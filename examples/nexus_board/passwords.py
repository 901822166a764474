"""Password hashing with scrypt, a memory-hard key-derivation function.

    stored = hash_password("correct horse")      # "scrypt$16384$8$1$<salt>$<key>"
    verify_password("correct horse", stored)     # True

A hash takes tens of milliseconds of CPU by design. `hashlib.scrypt` releases the GIL, so it
runs on gevent's thread pool: the worker keeps serving other connections meanwhile instead
of stalling every one of them for the duration of a login.

Guide: docs/guide/sessions.md.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

import gevent

__all__ = ["hash_password", "verify_password"]

# Cost parameters: n=2**14, r=8 needs 16 MiB and ~40 ms per hash, the usual interactive choice.
COST, BLOCK_SIZE, PARALLELISM = 1 << 14, 8, 1
KEY_BYTES = 32
SALT_BYTES = 16
SCHEME = "scrypt"


def _derive(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    def scrypt() -> bytes:
        return hashlib.scrypt(
            password.encode(), salt=salt, n=n, r=r, p=p, dklen=KEY_BYTES, maxmem=64 << 20
        )

    return gevent.get_hub().threadpool.apply(scrypt)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_password(password: str) -> str:
    """A self-describing scrypt hash of `password` with a fresh random salt."""
    salt = secrets.token_bytes(SALT_BYTES)
    key = _derive(password, salt, COST, BLOCK_SIZE, PARALLELISM)
    return f"{SCHEME}${COST}${BLOCK_SIZE}${PARALLELISM}${_b64(salt)}${_b64(key)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether `password` matches `stored` (compared in constant time); False if malformed."""
    try:
        scheme, n, r, p, salt, key = stored.split("$")
        if scheme != SCHEME:
            return False
        expected = _unb64(key)
        actual = _derive(password, _unb64(salt), int(n), int(r), int(p))
    except ValueError:
        return False
    return hmac.compare_digest(actual, expected)
