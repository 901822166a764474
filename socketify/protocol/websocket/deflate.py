"""permessage-deflate (RFC 7692): offer parsing, negotiation, and per-message (de)compression.

Theory of operation: the handshake parses `Sec-WebSocket-Extensions` (RFC 6455 §9.1) into
offers and accepts the first permessage-deflate offer whose parameters are all valid and
supportable (§7: an unknown or repeated parameter, or a bad value, declines that offer; it
never fails the handshake). The result is a `DeflateParams`, which the `Connection` turns into
a `Deflate`: a raw-DEFLATE compressor for our messages and a decompressor for the peer's.

A compressed message is the DEFLATE data of its payload flushed with Z_SYNC_FLUSH, minus the
trailing 00 00 FF FF (§7.2.1); the receiver appends those four bytes back (§7.2.2). With
context takeover the (de)compressor carries its sliding window from one message to the next;
"no context takeover" means a fresh one per message.

Memory: a zlib compressor costs ~256 KiB at window 15, so both sides are created lazily on
the first message that needs them and dropped after each message without context takeover.
Inflating is bounded by the caller's remaining message budget (zip bombs fail at the limit,
not after allocating the whole output).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "Deflate",
    "DeflateOptions",
    "DeflateParams",
    "InflateError",
    "MessageTooBig",
    "negotiate_deflate",
    "parse_extensions",
]

EXTENSION_NAME: Final = "permessage-deflate"
_TAIL: Final = b"\x00\x00\xff\xff"
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_EXTENSION = re.compile(rf"[ \t]*({_TOKEN})[ \t]*")
_PARAM = re.compile(rf";[ \t]*({_TOKEN})[ \t]*(?:=[ \t]*({_TOKEN}|{_QUOTED})[ \t]*)?")
_TOKEN_RE = re.compile(_TOKEN)
_BITS = re.compile(r"[1-9][0-9]?")  # RFC 7692 §7.1.2: 1*DIGIT without a leading zero

Offer = tuple[str, list[tuple[str, str | None]]]


class MessageTooBig(Exception):
    """Inflating a message went past its size limit (close with 1009)."""


class InflateError(Exception):
    """The peer's compressed data is not valid DEFLATE (close with 1007)."""


@dataclass(frozen=True, slots=True)
class DeflateOptions:
    """What the server will agree to; the defaults accept any valid offer as it comes."""

    server_no_context_takeover: bool = False  # reset our compressor after every message
    client_no_context_takeover: bool = False  # ask the client to reset its compressor
    server_max_window_bits: int = 15  # the largest window our compressor uses
    client_max_window_bits: int = 15  # the largest window we ask the client to use
    level: int = 6
    mem_level: int = 8
    min_size: int = 0  # shorter messages go out uncompressed (RSV1 clear)

    def __post_init__(self) -> None:
        for name in ("server_max_window_bits", "client_max_window_bits"):
            if not 8 <= getattr(self, name) <= 15:
                raise ValueError(f"{name} must be between 8 and 15")
        if not -1 <= self.level <= 9 or not 1 <= self.mem_level <= 9:
            raise ValueError("level must be -1..9 and mem_level 1..9")


@dataclass(frozen=True, slots=True)
class DeflateParams:
    """The permessage-deflate parameters agreed for one connection."""

    server_no_context_takeover: bool
    client_no_context_takeover: bool
    server_max_window_bits: int
    client_max_window_bits: int
    response: str  # the Sec-WebSocket-Extensions value of our 101
    level: int = 6
    mem_level: int = 8
    min_size: int = 0


def parse_extensions(values: Iterable[str]) -> list[Offer]:
    """Parse Sec-WebSocket-Extensions field values into [(name, [(param, value)])].

    Quoted values are unquoted; raises ValueError when a value breaks the §9.1 grammar.
    """
    offers: list[Offer] = []
    for value in values:
        pos, end = 0, len(value)
        while True:
            while pos < end and value[pos] in " \t,":
                pos += 1  # empty list elements are allowed (RFC 9110 §5.6.1)
            if pos == end:
                break
            match = _EXTENSION.match(value, pos)
            if match is None:
                raise ValueError(f"malformed extension list: {value!r}")
            name, pos = match.group(1), match.end()
            params: list[tuple[str, str | None]] = []
            while (param := _PARAM.match(value, pos)) is not None:
                params.append((param.group(1), _unquote(param.group(2))))
                pos = param.end()
            offers.append((name, params))
            if pos < end:
                if value[pos] != ",":
                    raise ValueError(f"malformed extension list: {value!r}")
                pos += 1
    return offers


def _unquote(raw: str | None) -> str | None:
    if raw is None or raw[0] != '"':
        return raw
    text = re.sub(r"\\(.)", r"\1", raw[1:-1])
    # RFC 6455 §9.1: a quoted value must still be a token once unquoted.
    if _TOKEN_RE.fullmatch(text) is None:
        raise ValueError(f"quoted extension parameter is not a token: {raw!r}")
    return text


def negotiate_deflate(offers: Iterable[Offer], options: DeflateOptions) -> DeflateParams | None:
    """Accept the first acceptable permessage-deflate offer, or None if there is none."""
    for name, params in offers:
        if name.lower() == EXTENSION_NAME:
            accepted = _accept(params, options)
            if accepted is not None:
                return accepted
    return None


def _accept(params: list[tuple[str, str | None]], options: DeflateOptions) -> DeflateParams | None:
    """The response to one offer (RFC 7692 §7.1), or None to decline it."""
    seen: set[str] = set()
    server_nct = client_nct = client_bits_offered = False
    server_bits: int | None = None
    client_bits: int | None = None
    for raw_name, value in params:
        name = raw_name.lower()
        if name in seen:
            return None  # §7: a repeated parameter declines the offer
        seen.add(name)
        if name in ("server_no_context_takeover", "client_no_context_takeover"):
            if value is not None:
                return None
            if name == "server_no_context_takeover":
                server_nct = True
            else:
                client_nct = True
        elif name == "server_max_window_bits":
            server_bits = _window_bits(value)
            if server_bits is None:
                return None
        elif name == "client_max_window_bits":
            client_bits_offered = True
            if value is not None:
                client_bits = _window_bits(value)
                if client_bits is None:
                    return None
        else:
            return None  # a parameter not defined for offers
    server_nct = server_nct or options.server_no_context_takeover
    # The client's own client_no_context_takeover is a hint; echoing it lets us drop our
    # decompressor between messages (§7.1.1.2).
    client_nct = client_nct or options.client_no_context_takeover
    # §7.1.2.1: answer with the offered value or less; we may also volunteer a smaller one.
    our_bits = min(server_bits or 15, options.server_max_window_bits)
    parts = [EXTENSION_NAME]
    if server_nct:
        parts.append("server_no_context_takeover")
    if client_nct:
        parts.append("client_no_context_takeover")
    if server_bits is not None or our_bits < 15:
        parts.append(f"server_max_window_bits={our_bits}")
    # §7.1.2.2: client_max_window_bits may be answered only if the client offered it.
    their_bits = 15
    if client_bits_offered:
        their_bits = min(client_bits or 15, options.client_max_window_bits)
        if client_bits is not None or their_bits < 15:
            parts.append(f"client_max_window_bits={their_bits}")
    return DeflateParams(
        server_nct,
        client_nct,
        our_bits,
        their_bits,
        "; ".join(parts),
        options.level,
        options.mem_level,
        options.min_size,
    )


def _window_bits(value: str | None) -> int | None:
    if value is None or _BITS.fullmatch(value) is None:
        return None
    bits = int(value)
    return bits if 8 <= bits <= 15 else None


class Deflate:
    """One connection's compressor and decompressor, created on first use."""

    __slots__ = ("_compressor", "_decompressor", "params")

    def __init__(self, params: DeflateParams) -> None:
        self.params = params
        self._compressor: zlib._Compress | None = None
        self._decompressor: zlib._Decompress | None = None

    def compress(self, data: bytes, final: bool) -> bytes:
        """Compress one fragment of an outgoing message; `final` ends the message."""
        params = self.params
        compressor = self._compressor
        if compressor is None:
            # zlib cannot deflate raw data with a 256-byte window, but at 9 bits it never
            # emits a distance over 250 (w_size - MIN_LOOKAHEAD), so 8-bit inflaters cope.
            bits = max(9, params.server_max_window_bits)
            compressor = zlib.compressobj(params.level, zlib.DEFLATED, -bits, params.mem_level)
            self._compressor = compressor
        out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
        if not final:
            return out  # an inner sync flush marker is just an empty stored block
        if params.server_no_context_takeover:
            self._compressor = None
        return out[:-4]

    def decompress(self, data: bytes | bytearray, limit: int | None) -> bytes:
        """Inflate a piece of an incoming message, producing at most `limit` bytes."""
        decompressor = self._decompressor
        if decompressor is None:
            decompressor = zlib.decompressobj(-self.params.client_max_window_bits)
            self._decompressor = decompressor
        try:
            if limit is None:
                return decompressor.decompress(data)
            # max_length=0 would mean "unlimited", hence the +1; asking for one byte more
            # than allowed is how we learn the output is too big without producing it all.
            out = decompressor.decompress(data, limit + 1)
        except zlib.error as exc:
            raise InflateError(str(exc)) from None
        if len(out) > limit:
            raise MessageTooBig
        return out

    def end_message(self, limit: int | None) -> bytes:
        """Finish an incoming message: inflate the stripped tail, reset if required."""
        out = self.decompress(_TAIL, limit)
        decompressor = self._decompressor
        # A peer may end its DEFLATE stream (BFINAL); the next message then starts afresh.
        if self.params.client_no_context_takeover or (decompressor and decompressor.eof):
            self._decompressor = None
        return out
