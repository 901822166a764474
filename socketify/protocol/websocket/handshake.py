"""The server's half of the opening handshake (RFC 6455 §4.2), sans-IO.

`server_handshake` takes what the HTTP layer parsed (method, version, headers) and answers
either `UpgradeAccepted`, whose headers go in the 101 response, or `UpgradeRefused`, whose
status, headers and detail go in an error response. The HTTP layer adds Date/Server and
writes; nothing here touches a socket.

Refusals, in the order they are checked:

- not GET, not HTTP/1.1 → 400;
- no `Upgrade: websocket` (a plain GET, or an upgrade to something else) → 426 with
  `Upgrade: websocket` and `Sec-WebSocket-Version: 13` (RFC 9110 §15.5.22);
- `Connection` without the `upgrade` token → 400;
- `Sec-WebSocket-Version` missing or not 13 → 426 with `Sec-WebSocket-Version: 13` (§4.4);
- `Sec-WebSocket-Key` missing, repeated or not base64 of 16 bytes → 400;
- an `Origin` outside the allow-list → 403 (cross-site WebSocket hijacking).
  Requests without Origin are not from browsers, which always send it, so they pass.

Subprotocols: the first of the client's entries, in the client's order, that matches a
configured one case-insensitively. The 101 echoes the client's exact spelling (a browser fails
the handshake on any other); `UpgradeAccepted.subprotocol` is the server's spelling.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from socketify.protocol.websocket.deflate import (
    DeflateOptions,
    DeflateParams,
    negotiate_deflate,
    parse_extensions,
)

__all__ = [
    "GUID",
    "UpgradeAccepted",
    "UpgradeRefused",
    "accept_key",
    "server_handshake",
]

GUID: Final = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_VERSION_HEADERS: Final = (
    ("Upgrade", "websocket"),
    ("Connection", "Upgrade"),
    ("Sec-WebSocket-Version", "13"),
)

HeaderInput = Mapping[str, str] | Iterable[tuple[str, str]]
OriginPolicy = Collection[str] | Callable[[str | None], bool]


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + GUID))."""
    digest = hashlib.sha1((key + GUID).encode("latin-1")).digest()
    return base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True, slots=True)
class UpgradeAccepted:
    """Answer 101 Switching Protocols with `headers`, then speak WebSocket."""

    headers: tuple[tuple[str, str], ...]
    subprotocol: str | None = None  # the server's spelling of the chosen subprotocol
    deflate: DeflateParams | None = None  # pass to Connection(deflate=...)
    status: int = 101


@dataclass(frozen=True, slots=True)
class UpgradeRefused:
    """Answer `status` with `headers` (plus a body saying `detail`) and no upgrade."""

    status: int
    detail: str
    headers: tuple[tuple[str, str], ...] = ()


def server_handshake(
    method: str,
    version: str,
    headers: HeaderInput,
    *,
    subprotocols: Iterable[str] = (),
    origins: OriginPolicy | None = None,
    deflate: DeflateOptions | None = None,
) -> UpgradeAccepted | UpgradeRefused:
    """Check an upgrade request and negotiate subprotocol and permessage-deflate.

    `headers` is a mapping (repeated fields already joined with ", ") or (name, value)
    pairs. `origins` is an allow-list of serialized origins (`https://example.com`,
    compared case-insensitively) or a predicate given the Origin value or None; None skips
    the check. `deflate=None` never negotiates compression.
    """
    fields = _collect(headers)
    if method != "GET":
        return UpgradeRefused(400, "A WebSocket upgrade must use GET")
    if version not in ("HTTP/1.1", "1.1"):
        return UpgradeRefused(400, "A WebSocket upgrade needs HTTP/1.1")
    if "websocket" not in _tokens(fields.get("upgrade")):
        return UpgradeRefused(426, "This resource requires a WebSocket upgrade", _VERSION_HEADERS)
    if "upgrade" not in _tokens(fields.get("connection")):
        return UpgradeRefused(400, "Connection header lacks the upgrade token")
    versions = fields.get("sec-websocket-version", [])
    if len(versions) != 1 or versions[0].strip(" \t") != "13":
        return UpgradeRefused(
            426, "Unsupported Sec-WebSocket-Version", (("Sec-WebSocket-Version", "13"),)
        )
    keys = fields.get("sec-websocket-key", [])
    key = keys[0].strip(" \t") if len(keys) == 1 else ""
    if not _valid_key(key):
        return UpgradeRefused(400, "Invalid Sec-WebSocket-Key")
    if origins is not None and not _origin_allowed(fields.get("origin"), origins):
        return UpgradeRefused(403, "Origin not allowed")

    response = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", accept_key(key)),
    ]
    chosen = _choose_subprotocol(fields.get("sec-websocket-protocol"), subprotocols)
    if chosen is not None:
        response.append(("Sec-WebSocket-Protocol", chosen[1]))
    params = None
    if deflate is not None and "sec-websocket-extensions" in fields:
        try:
            offers = parse_extensions(fields["sec-websocket-extensions"])
        except ValueError:
            offers = []  # a malformed offer list negotiates nothing; the upgrade still works
        params = negotiate_deflate(offers, deflate)
        if params is not None:
            response.append(("Sec-WebSocket-Extensions", params.response))
    return UpgradeAccepted(tuple(response), chosen[0] if chosen else None, params)


def _collect(headers: HeaderInput) -> dict[str, list[str]]:
    """Lower-case name → every field value, in arrival order."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    fields: dict[str, list[str]] = {}
    for name, value in items:
        fields.setdefault(name.lower(), []).append(value)
    return fields


def _tokens(values: list[str] | None) -> set[str]:
    """The lower-cased elements of comma-separated list fields."""
    if not values:
        return set()
    return {item.strip(" \t").lower() for value in values for item in value.split(",")}


def _valid_key(key: str) -> bool:
    """RFC 6455 §4.1: the key is 16 random bytes, base64-encoded (so 24 characters)."""
    if len(key) != 24:
        return False
    try:
        return len(base64.b64decode(key, validate=True)) == 16
    except (binascii.Error, ValueError):
        return False


def _origin_allowed(values: list[str] | None, policy: OriginPolicy) -> bool:
    origin = values[0].strip(" \t") if values and len(values) == 1 else None
    if values and origin is None:
        return False  # several Origin fields: a browser never sends that
    if callable(policy):
        return bool(policy(origin))
    if origin is None:
        return True
    return origin.lower() in {allowed.lower().rstrip("/") for allowed in policy}


def _choose_subprotocol(
    offered: list[str] | None, supported: Iterable[str]
) -> tuple[str, str] | None:
    """(server spelling, client spelling) of the first client entry we support."""
    if not offered:
        return None
    ours = {name.lower(): name for name in supported}
    if not ours:
        return None
    for value in offered:
        for item in value.split(","):
            name = item.strip(" \t")
            if name and name.lower() in ours:
                return ours[name.lower()], name
    return None
