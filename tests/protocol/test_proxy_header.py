"""The sans-IO PROXY protocol header parser: versions 1 and 2, fed whole and byte by byte."""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socketify.protocol.proxy_header import (
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    ProxyHeaderParser,
    crc32c,
    parse_proxy_header,
)

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def feed(raw: bytes, split: int | None) -> ProxyHeaderParser:
    """A parser fed `raw` in one piece or in pieces of `split` bytes; returns it done."""
    parser = ProxyHeaderParser()
    pieces = [raw] if split is None else [raw[i : i + split] for i in range(0, len(raw), split)]
    header = None
    for piece in pieces:
        header = parser.feed(piece)
    assert header is not None and parser.header is header
    return parser


def v2(
    command: int = 1,
    family: int = 1,
    transport: int = 1,
    addresses: bytes = b"",
    tlvs: bytes = b"",
    version: int = 2,
) -> bytes:
    block = addresses + tlvs
    preamble = bytes([version << 4 | command, family << 4 | transport])
    return V2_SIGNATURE + preamble + struct.pack("!H", len(block)) + block


def tlv(kind: int, value: bytes) -> bytes:
    return bytes([kind]) + struct.pack("!H", len(value)) + value


def inet(src: str, dst: str, sport: int, dport: int) -> bytes:
    return struct.pack("!4s4sHH", socket.inet_aton(src), socket.inet_aton(dst), sport, dport)


def inet6(src: str, dst: str, sport: int, dport: int) -> bytes:
    pack = socket.inet_pton
    return struct.pack(
        "!16s16sHH", pack(socket.AF_INET6, src), pack(socket.AF_INET6, dst), sport, dport
    )


SPLITS = [None, 1, 2, 7]

# -- version 1 -------------------------------------------------------------------------------


@pytest.mark.parametrize("split", SPLITS)
def test_v1_tcp4_names_the_client_and_leaves_the_request(split: int | None) -> None:
    parser = feed(b"PROXY TCP4 203.0.113.7 10.0.0.1 56324 443\r\n" + REQUEST, split)
    header = parser.header
    assert header == ProxyHeader(1, "PROXY", "TCP4", ("203.0.113.7", 56324), ("10.0.0.1", 443))
    assert parser.rest == REQUEST


@pytest.mark.parametrize("split", SPLITS)
def test_v1_tcp6_full_length_line_is_accepted(split: int | None) -> None:
    src = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
    line = f"PROXY TCP6 {src} {src} 65535 65535\r\n".encode()
    assert len(line) == 104
    header = feed(line, split).header
    assert header is not None and header.source == (src, 65535) and header.family == "TCP6"


def test_v1_unknown_keeps_the_real_peer_and_ignores_the_rest_of_the_line() -> None:
    header, length = parse_proxy_header(b"PROXY UNKNOWN whatever 1 2\r\nGET") or (None, 0)
    assert header is not None and header.source is None and header.family == "UNKNOWN"
    assert length == len(b"PROXY UNKNOWN whatever 1 2\r\n")


def test_v1_waits_for_the_line_end() -> None:
    assert parse_proxy_header(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2") is None
    assert parse_proxy_header(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r") is None
    assert parse_proxy_header(b"PRO") is None


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "needs source, destination and both ports"),
        (b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", "is not TCP4, TCP6 or UNKNOWN"),
        (b"PROXY TCP4 1.2.3.999 5.6.7.8 1 2\r\n", "is not an IP address"),
        (b"PROXY TCP4 ::1 ::1 1 2\r\n", "is not IPv4"),
        (b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", "is not IPv6"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", "over 65535"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n", "not a decimal number"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", "not a decimal number"),
        (b"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", "needs source"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "must end with CRLF"),
        (b"PROXY TCP4 \xff 5.6.7.8 1 2\r\n", "not ASCII"),
        (b"PROXY " + b"X" * 120, "longer than 107 bytes"),
        (b"GET / HTTP/1.1\r\n", "no PROXY protocol header"),
        (b"PRI * HTTP/2.0\r\n", "no PROXY protocol header"),
        (b"\x16\x03\x01\x02\x00", "no PROXY protocol header"),
    ],
)
def test_v1_malformed_lines_say_what_is_wrong(line: bytes, error: str) -> None:
    with pytest.raises(ProxyHeaderError, match=error):
        parse_proxy_header(line)


def test_v1_error_comes_on_the_first_wrong_byte_not_at_the_end() -> None:
    parser = ProxyHeaderParser()
    assert parser.feed(b"PROX") is None
    with pytest.raises(ProxyHeaderError):
        parser.feed(b"Z")


# -- version 2 -------------------------------------------------------------------------------


@pytest.mark.parametrize("split", SPLITS)
def test_v2_inet_with_tlvs(split: int | None) -> None:
    tlvs = (
        tlv(0x01, b"h2")
        + tlv(0x02, b"api.example.com")
        + tlv(0x04, b"\x00\x00")  # NOOP: skipped
        + tlv(0x05, b"id-42")
        + tlv(0xE0, b"custom")
    )
    raw = v2(addresses=inet("198.51.100.9", "10.0.0.2", 4444, 443), tlvs=tlvs) + REQUEST
    parser = feed(raw, split)
    header = parser.header
    assert header is not None
    assert header.version == 2 and header.command == "PROXY" and header.family == "TCP4"
    assert header.transport == "STREAM"
    assert header.source == ("198.51.100.9", 4444)
    assert header.destination == ("10.0.0.2", 443)
    assert header.alpn == "h2" and header.authority == "api.example.com"
    assert header.unique_id == b"id-42"
    assert header.tlv(0xE0) == b"custom" and header.tlv(0x04) is None
    assert [kind for kind, _ in header.tlvs] == [0x01, 0x02, 0x05, 0xE0]
    assert header.tls is None
    assert parser.rest == REQUEST


def test_v2_inet6_and_an_ipv4_mapped_client() -> None:
    header = feed(v2(family=2, addresses=inet6("2001:db8::1", "::1", 1, 2)), None).header
    assert header is not None and header.source == ("2001:db8::1", 1) and header.family == "TCP6"
    mapped = v2(family=2, addresses=inet6("::ffff:192.0.2.5", "::1", 1, 2))
    header = feed(mapped, None).header
    assert header is not None and header.source == ("192.0.2.5", 1)


def test_v2_unix_paths() -> None:
    src = b"/run/haproxy.sock".ljust(108, b"\x00")
    dst = (b"\x00abstract").ljust(108, b"\x00")
    header = feed(v2(family=3, addresses=src + dst), None).header
    assert header is not None and header.family == "UNIX"
    assert header.source == ("/run/haproxy.sock", 0) and header.destination == ("@abstract", 0)


def test_v2_unspec_family_keeps_the_real_peer() -> None:
    header = feed(v2(family=0, transport=0, tlvs=tlv(0x05, b"x")), None).header
    assert header is not None and header.command == "PROXY" and header.source is None
    assert header.unique_id == b"x"


@pytest.mark.parametrize("split", SPLITS)
def test_v2_local_is_a_health_check_whose_block_is_skipped(split: int | None) -> None:
    raw = v2(command=0, family=1, addresses=b"\xff" * 5) + REQUEST
    parser = feed(raw, split)
    assert parser.header == ProxyHeader(2, "LOCAL", "UNSPEC", transport="UNSPEC")
    assert parser.rest == REQUEST


def test_v2_tls_field_and_its_sub_fields() -> None:
    subs = (
        tlv(0x21, b"TLSv1.3")
        + tlv(0x22, b"alice")
        + tlv(0x23, b"TLS_AES_128_GCM_SHA256")
        + tlv(0x24, b"RSA-SHA256")
        + tlv(0x25, b"RSA2048")
    )
    ssl_field = tlv(0x20, bytes([0x01 | 0x02]) + struct.pack("!I", 0) + subs)
    header = feed(v2(addresses=inet("1.2.3.4", "5.6.7.8", 1, 2), tlvs=ssl_field), None).header
    assert header is not None
    tls = header.tls
    assert tls is not None
    assert tls.client_ssl and tls.client_cert_connection and not tls.client_cert_session
    assert tls.verified and tls.version == "TLSv1.3" and tls.common_name == "alice"
    assert tls.cipher == "TLS_AES_128_GCM_SHA256"
    assert (tls.sig_alg, tls.key_alg) == ("RSA-SHA256", "RSA2048")
    unverified = tlv(0x20, b"\x01" + struct.pack("!I", 1))
    header = feed(v2(addresses=inet("1.2.3.4", "5.6.7.8", 1, 2), tlvs=unverified), None).header
    assert header is not None and header.tls is not None and not header.tls.verified


def test_v2_crc32c_is_checked() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    addresses = inet("1.2.3.4", "5.6.7.8", 1, 2)
    zeroed = v2(addresses=addresses, tlvs=tlv(0x03, b"\x00" * 4))
    good = v2(addresses=addresses, tlvs=tlv(0x03, struct.pack("!I", crc32c(zeroed))))
    assert feed(good, 3).header is not None
    bad = v2(addresses=addresses, tlvs=tlv(0x03, struct.pack("!I", crc32c(zeroed) ^ 1)))
    with pytest.raises(ProxyHeaderError, match="CRC32C checksum does not match"):
        parse_proxy_header(bad)


ADDR4 = inet("1.2.3.4", "5.6.7.8", 1, 2)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (V2_SIGNATURE[:5] + b"X", "bad version 2 signature"),
        (V2_SIGNATURE + b"\x11", "version 1 is not 2"),
        (V2_SIGNATURE + b"\x22", "command 2 is neither LOCAL nor PROXY"),
        (v2(family=4, addresses=ADDR4), "address family 4 is unknown"),
        (v2(transport=3, addresses=ADDR4), "transport 3 is unknown"),
        (v2(addresses=ADDR4[:8]), "TCP4 addresses need 12 bytes, got 8"),
        (v2(family=2, addresses=ADDR4), "TCP6 addresses need 36 bytes"),
        (v2(addresses=ADDR4, tlvs=b"\x01\x00"), "field header cut short"),
        (v2(addresses=ADDR4, tlvs=b"\x01\x00\x09ab"), "field 0x01 runs past the header's end"),
        (v2(addresses=ADDR4, tlvs=tlv(0x05, b"x" * 129)), "unique id of 129 bytes"),
        (v2(addresses=ADDR4, tlvs=tlv(0x03, b"abc")), "CRC32C field of 3 bytes"),
        (v2(addresses=ADDR4, tlvs=tlv(0x20, b"\x01\x00")), "TLS field shorter than"),
        (
            v2(addresses=ADDR4, tlvs=tlv(0x20, b"\x01\x00\x00\x00\x00\x21\x00\x05ab")),
            "PROXY v2 TLS field 0x21 runs past",
        ),
    ],
)
def test_v2_malformed_headers_say_what_is_wrong(raw: bytes, error: str) -> None:
    with pytest.raises(ProxyHeaderError, match=error):
        parse_proxy_header(raw)


def test_v2_waits_for_the_announced_length() -> None:
    raw = v2(addresses=ADDR4, tlvs=tlv(0x05, b"abc"))
    for end in range(len(raw)):
        assert parse_proxy_header(raw[:end]) is None
    assert parse_proxy_header(raw) is not None


def test_a_close_before_the_header_is_complete_is_an_error() -> None:
    parser = ProxyHeaderParser()
    with pytest.raises(ProxyHeaderError, match="closed with no PROXY"):
        parser.feed(b"")
    parser = ProxyHeaderParser()
    parser.feed(b"PROXY TCP4")
    with pytest.raises(ProxyHeaderError, match="closed with an incomplete PROXY"):
        parser.feed(b"")


@given(st.binary(max_size=300))
def test_any_bytes_give_a_header_a_need_for_more_or_a_proxy_header_error(data: bytes) -> None:
    for prefix in (b"", b"PROXY ", V2_SIGNATURE, V2_SIGNATURE + b"\x21"):
        try:
            parse_proxy_header(prefix + data)
        except ProxyHeaderError:
            pass
