"""The PROXY protocol header (v1 and v2) a load balancer sends before the client's bytes.

Theory of operation. A TCP proxy (HAProxy, a cloud network load balancer) that does not speak
HTTP cannot add X-Forwarded-For; instead it opens each connection to us with one header naming
the client's address, then relays the client's bytes untouched (TLS included). Version 1 is
one text line of at most 107 bytes (`PROXY TCP4 src dst sport dport\\r\\n`); version 2 is a
16-byte binary preamble (a 12-byte signature, version and command, family and transport, and
the length of the rest), an address block, then type-length-value fields (TLVs) such as the
ALPN or the SNI name the proxy saw, a unique connection id, or what it learned from the
client's TLS session.

`ProxyHeaderParser` is fed bytes as they arrive and returns the `ProxyHeader` once the whole
header is there; bytes after it belong to the proxied protocol and are handed back in
`rest`. It never reads past the header's end to decide anything, and it fails as soon as the
bytes seen cannot start a valid header, so a client that is not a proxy is refused on its
first packet, not when a timeout runs out. A `LOCAL` header (the proxy's own health check) or
an `UNKNOWN`/`UNSPEC` one carries no client: `ProxyHeader.source` is None, and the real peer
stays the client.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

__all__ = [
    "V2_SIGNATURE",
    "ProxyHeader",
    "ProxyHeaderError",
    "ProxyHeaderParser",
    "ProxyTls",
    "parse_proxy_header",
]

V1_PREFIX = b"PROXY "
V1_MAX_LENGTH = 107  # the longest valid line, CRLF included (two full IPv6 addresses)
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
_V2_PREAMBLE = 16  # signature, version/command, family/transport, length

# Version 2 address families and transports (high and low nibble of the 14th byte).
_UNSPEC, _INET, _INET6, _UNIX = range(4)
_FAMILY_NAMES = {_UNSPEC: "UNSPEC", _INET: "TCP4", _INET6: "TCP6", _UNIX: "UNIX"}
_TRANSPORT_NAMES = {0: "UNSPEC", 1: "STREAM", 2: "DGRAM"}
_ADDRESS_SIZES = {_UNSPEC: 0, _INET: 12, _INET6: 36, _UNIX: 216}
_LOCAL, _PROXY = 0, 1

# TLV types.
PP2_TYPE_ALPN = 0x01
PP2_TYPE_AUTHORITY = 0x02
PP2_TYPE_CRC32C = 0x03
PP2_TYPE_NOOP = 0x04
PP2_TYPE_UNIQUE_ID = 0x05
PP2_TYPE_SSL = 0x20
PP2_SUBTYPE_SSL_VERSION = 0x21
PP2_SUBTYPE_SSL_CN = 0x22
PP2_SUBTYPE_SSL_CIPHER = 0x23
PP2_SUBTYPE_SSL_SIG_ALG = 0x24
PP2_SUBTYPE_SSL_KEY_ALG = 0x25
PP2_TYPE_NETNS = 0x30
_UNIQUE_ID_MAX = 128
# Flags of the `client` byte of PP2_TYPE_SSL.
PP2_CLIENT_SSL = 0x01
PP2_CLIENT_CERT_CONN = 0x02
PP2_CLIENT_CERT_SESS = 0x04


class ProxyHeaderError(ValueError):
    """Bytes that are not a valid PROXY header; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class ProxyTls:
    """What the proxy knew of the client's TLS session (the PP2_TYPE_SSL field)."""

    client_ssl: bool  # the client connected over TLS
    client_cert_connection: bool  # it presented a certificate on this connection
    client_cert_session: bool  # ... on this TLS session (perhaps an earlier connection)
    verified: bool  # the certificate was verified (or none was needed)
    version: str | None = None  # e.g. "TLSv1.3"
    common_name: str | None = None  # the client certificate's subject CN
    cipher: str | None = None
    sig_alg: str | None = None
    key_alg: str | None = None


@dataclass(frozen=True, slots=True)
class ProxyHeader:
    """One parsed PROXY header.

    `source`/`destination` are the client's and the proxy's listening address (host, port),
    a Unix path with port 0, or None for `LOCAL`, `UNKNOWN` and `UNSPEC` headers, where the
    real peer is the client. `tlvs` keeps every version 2 field as (type, value), in order.
    """

    version: int  # 1 or 2
    command: str  # "PROXY" or "LOCAL"
    family: str  # "TCP4", "TCP6", "UNIX", or "UNSPEC" ("UNKNOWN" on a version 1 line)
    source: tuple[str, int] | None = None
    destination: tuple[str, int] | None = None
    transport: str = "STREAM"
    tlvs: tuple[tuple[int, bytes], ...] = field(default=())

    def tlv(self, kind: int) -> bytes | None:
        """The value of the first field of type `kind`, or None."""
        for tlv_type, value in self.tlvs:
            if tlv_type == kind:
                return value
        return None

    @property
    def alpn(self) -> str | None:
        """The protocol the client chose by ALPN at the proxy (e.g. "h2")."""
        value = self.tlv(PP2_TYPE_ALPN)
        return None if value is None else value.decode("ascii", "replace")

    @property
    def authority(self) -> str | None:
        """The host name the client asked for (the TLS SNI name at the proxy)."""
        value = self.tlv(PP2_TYPE_AUTHORITY)
        return None if value is None else value.decode("utf-8", "replace")

    @property
    def unique_id(self) -> bytes | None:
        """The proxy's opaque id for this connection (up to 128 bytes)."""
        return self.tlv(PP2_TYPE_UNIQUE_ID)

    @property
    def netns(self) -> str | None:
        """The network namespace the proxy accepted the connection in."""
        value = self.tlv(PP2_TYPE_NETNS)
        return None if value is None else value.decode("ascii", "replace")

    @property
    def tls(self) -> ProxyTls | None:
        """The client's TLS session as the proxy saw it, if the proxy sent it."""
        value = self.tlv(PP2_TYPE_SSL)
        return None if value is None else _parse_ssl(value)


def parse_proxy_header(data: bytes) -> tuple[ProxyHeader, int] | None:
    """The header at the start of `data` and its length, or None if more bytes are needed.

    Raises `ProxyHeaderError` as soon as `data` cannot be the start of a valid header.
    """
    if data[:1] == b"P":
        return _parse_v1(data)
    if data[:1] == b"\r":
        return _parse_v2(data)
    if not data:
        return None
    raise ProxyHeaderError("no PROXY protocol header (neither version 1 nor version 2)")


class ProxyHeaderParser:
    """Collects bytes until a whole PROXY header is there (sans-IO)."""

    __slots__ = ("_buffer", "header", "rest")

    def __init__(self) -> None:
        self._buffer = b""
        self.header: ProxyHeader | None = None
        self.rest = b""  # bytes after the header: the start of the proxied protocol

    def feed(self, data: bytes) -> ProxyHeader | None:
        """Add received bytes; the header once complete, else None (more needed).

        `b""` means the peer closed: a header still incomplete then is an error.
        """
        if self.header is not None:
            self.rest += data
            return self.header
        if not data:
            what = "an incomplete" if self._buffer else "no"
            raise ProxyHeaderError(f"the connection closed with {what} PROXY protocol header")
        buffer = self._buffer = self._buffer + data
        parsed = parse_proxy_header(buffer)
        if parsed is None:
            return None
        self.header, length = parsed
        self.rest = buffer[length:]
        self._buffer = b""
        return self.header


# -- version 1 --------------------------------------------------------------------------------


def _parse_v1(data: bytes) -> tuple[ProxyHeader, int] | None:
    prefix = data[: len(V1_PREFIX)]
    if not V1_PREFIX.startswith(prefix):
        raise ProxyHeaderError("no PROXY protocol header (neither version 1 nor version 2)")
    end = data.find(b"\r\n", 0, V1_MAX_LENGTH)
    if end < 0:
        if len(data) >= V1_MAX_LENGTH:
            raise ProxyHeaderError(f"PROXY v1 line longer than {V1_MAX_LENGTH} bytes")
        if b"\n" in data or (b"\r" in data[:-1]):
            raise ProxyHeaderError("PROXY v1 line must end with CRLF")
        return None
    length = end + 2
    try:
        line = data[len(V1_PREFIX) : end].decode("ascii")
    except UnicodeDecodeError:
        raise ProxyHeaderError("PROXY v1 line is not ASCII") from None
    family, _, addresses = line.partition(" ")
    if family == "UNKNOWN":
        # The proxy could not tell (say, a non-TCP client): what follows is ignored.
        return ProxyHeader(1, "PROXY", "UNKNOWN", transport="UNSPEC"), length
    if family not in ("TCP4", "TCP6"):
        raise ProxyHeaderError(f"PROXY v1 protocol {family!r} is not TCP4, TCP6 or UNKNOWN")
    parts = addresses.split(" ")
    if len(parts) != 4:
        raise ProxyHeaderError("PROXY v1 line needs source, destination and both ports")
    version = 4 if family == "TCP4" else 6
    source = (_v1_address(parts[0], version), _v1_port(parts[2]))
    destination = (_v1_address(parts[1], version), _v1_port(parts[3]))
    return ProxyHeader(1, "PROXY", family, source, destination), length


def _v1_address(text: str, version: int) -> str:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ProxyHeaderError(f"PROXY v1 address {text!r} is not an IP address") from None
    if address.version != version:
        raise ProxyHeaderError(f"PROXY v1 address {text!r} is not IPv{version}")
    return str(address)


def _v1_port(text: str) -> int:
    # Plain decimal without a sign or a leading zero, 0-65535.
    if not text.isdigit() or not text.isascii() or (len(text) > 1 and text[0] == "0"):
        raise ProxyHeaderError(f"PROXY v1 port {text!r} is not a decimal number")
    port = int(text)
    if port > 65535:
        raise ProxyHeaderError(f"PROXY v1 port {port} is over 65535")
    return port


# -- version 2 --------------------------------------------------------------------------------


def _parse_v2(data: bytes) -> tuple[ProxyHeader, int] | None:
    if not V2_SIGNATURE.startswith(data[: len(V2_SIGNATURE)]):
        raise ProxyHeaderError("no PROXY protocol header (bad version 2 signature)")
    if len(data) < _V2_PREAMBLE:
        if len(data) > len(V2_SIGNATURE):
            _check_version_command(data[12])
        return None
    version_command, family_transport = data[12], data[13]
    command = _check_version_command(version_command)
    family, transport = family_transport >> 4, family_transport & 0x0F
    (length,) = struct.unpack_from("!H", data, 14)
    end = _V2_PREAMBLE + length
    if len(data) < end:
        return None
    block = data[_V2_PREAMBLE:end]
    if command == _LOCAL:
        # A health check from the proxy itself: whatever follows is skipped, not checked.
        return ProxyHeader(2, "LOCAL", "UNSPEC", transport="UNSPEC"), end
    if family not in _FAMILY_NAMES:
        raise ProxyHeaderError(f"PROXY v2 address family {family} is unknown")
    if transport not in _TRANSPORT_NAMES:
        raise ProxyHeaderError(f"PROXY v2 transport {transport} is unknown")
    size = _ADDRESS_SIZES[family]
    if length < size:
        raise ProxyHeaderError(
            f"PROXY v2 {_FAMILY_NAMES[family]} addresses need {size} bytes, got {length}"
        )
    source, destination = _v2_addresses(family, block[:size])
    tlvs = _parse_tlvs(block[size:], "PROXY v2")
    _check_crc(tlvs, data[:end], size)
    header = ProxyHeader(
        2,
        "PROXY",
        _FAMILY_NAMES[family],
        source,
        destination,
        _TRANSPORT_NAMES[transport],
        tlvs,
    )
    return header, end


def _check_version_command(byte: int) -> int:
    if byte >> 4 != 2:
        raise ProxyHeaderError(f"PROXY header version {byte >> 4} is not 2")
    command = byte & 0x0F
    if command not in (_LOCAL, _PROXY):
        raise ProxyHeaderError(f"PROXY v2 command {command} is neither LOCAL nor PROXY")
    return command


def _v2_addresses(
    family: int, block: bytes
) -> tuple[tuple[str, int] | None, tuple[str, int] | None]:
    if family == _INET:
        src, dst, sport, dport = struct.unpack("!4s4sHH", block)
        return (str(ipaddress.IPv4Address(src)), sport), (str(ipaddress.IPv4Address(dst)), dport)
    if family == _INET6:
        src, dst, sport, dport = struct.unpack("!16s16sHH", block)
        return (_ipv6(src), sport), (_ipv6(dst), dport)
    if family == _UNIX:
        return (_unix_path(block[:108]), 0), (_unix_path(block[108:]), 0)
    return None, None  # UNSPEC: the proxy does not say; the real peer is the client


def _ipv6(packed: bytes) -> str:
    address = ipaddress.IPv6Address(packed)
    # An IPv4 client seen through an IPv6 listener reads as the IPv4 address it is.
    mapped = address.ipv4_mapped
    return str(mapped) if mapped is not None else str(address)


def _unix_path(raw: bytes) -> str:
    # NUL-terminated; an abstract socket name starts with NUL and is kept as "@name".
    if raw[:1] == b"\x00":
        name = raw[1:].rstrip(b"\x00")
        return "@" + name.decode("utf-8", "replace") if name else ""
    return raw.partition(b"\x00")[0].decode("utf-8", "replace")


def _parse_tlvs(data: bytes, where: str) -> tuple[tuple[int, bytes], ...]:
    tlvs = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < 3:
            raise ProxyHeaderError(f"{where} field header cut short")
        kind = data[offset]
        (length,) = struct.unpack_from("!H", data, offset + 1)
        start = offset + 3
        if start + length > len(data):
            raise ProxyHeaderError(f"{where} field 0x{kind:02x} runs past the header's end")
        value = data[start : start + length]
        if kind == PP2_TYPE_UNIQUE_ID and length > _UNIQUE_ID_MAX:
            raise ProxyHeaderError(f"PROXY v2 unique id of {length} bytes (at most 128)")
        if kind == PP2_TYPE_CRC32C and length != 4:
            raise ProxyHeaderError(f"PROXY v2 CRC32C field of {length} bytes (needs 4)")
        if kind == PP2_TYPE_SSL:
            _parse_ssl(value)  # a malformed TLS field fails the header now, not on first use
        if kind != PP2_TYPE_NOOP:
            tlvs.append((kind, value))
        offset = start + length
    return tuple(tlvs)


def _parse_ssl(value: bytes) -> ProxyTls:
    if len(value) < 5:
        raise ProxyHeaderError("PROXY v2 TLS field shorter than its 5 fixed bytes")
    client = value[0]
    (verify,) = struct.unpack_from("!I", value, 1)
    subs = dict(_parse_tlvs(value[5:], "PROXY v2 TLS"))

    def text(kind: int) -> str | None:
        raw = subs.get(kind)
        return None if raw is None else raw.decode("utf-8", "replace")

    return ProxyTls(
        client_ssl=bool(client & PP2_CLIENT_SSL),
        client_cert_connection=bool(client & PP2_CLIENT_CERT_CONN),
        client_cert_session=bool(client & PP2_CLIENT_CERT_SESS),
        verified=verify == 0,
        version=text(PP2_SUBTYPE_SSL_VERSION),
        common_name=text(PP2_SUBTYPE_SSL_CN),
        cipher=text(PP2_SUBTYPE_SSL_CIPHER),
        sig_alg=text(PP2_SUBTYPE_SSL_SIG_ALG),
        key_alg=text(PP2_SUBTYPE_SSL_KEY_ALG),
    )


def _check_crc(tlvs: tuple[tuple[int, bytes], ...], header: bytes, address_size: int) -> None:
    """Verify a CRC32C field: computed over the whole header with the checksum zeroed."""
    expected = next((value for kind, value in tlvs if kind == PP2_TYPE_CRC32C), None)
    if expected is None:
        return
    # Find the checksum's own bytes to zero them: walk the fields as the parser did.
    offset = _V2_PREAMBLE + address_size
    while offset < len(header):
        kind = header[offset]
        (length,) = struct.unpack_from("!H", header, offset + 1)
        if kind == PP2_TYPE_CRC32C:
            zeroed = header[: offset + 3] + b"\x00\x00\x00\x00" + header[offset + 7 :]
            if struct.pack("!I", crc32c(zeroed)) != expected:
                raise ProxyHeaderError("PROXY v2 CRC32C checksum does not match")
            return
        offset += 3 + length


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of the PP2_TYPE_CRC32C field."""
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
