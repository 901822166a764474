"""PROXY protocol intake: the options as given, who may send the header, which binds expect
it, and the one reader both HTTP and TCP services use."""

from __future__ import annotations

import socket

import pytest

from socketify.core.options import ServerOptions
from socketify.protocol.proxy_header import ProxyHeaderError
from socketify.server.proxy_intake import ProxyIntake, read_proxy_header


def test_options_default_to_no_proxy_protocol_and_loopback_senders() -> None:
    options = ServerOptions()
    assert options.proxy_protocol is False
    assert options.proxy_allow == ("127.0.0.0/8", "::1/128")
    assert ProxyIntake.build(options.proxy_protocol, options.proxy_allow) is None


def test_options_take_lists_and_comma_separated_text_and_keep_tuples() -> None:
    options = ServerOptions(proxy_protocol=["127.0.0.1:8001"], proxy_allow="10.0.0.0/8, ::1")
    assert options.proxy_protocol == ("127.0.0.1:8001",)
    assert options.proxy_allow == ("10.0.0.0/8", "::1/128")
    assert ServerOptions(proxy_protocol="a:1,b:2").proxy_protocol == ("a:1", "b:2")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"proxy_allow": ["10.0.0.0/33"]}, "proxy_allow: '10.0.0.0/33' is not a network"),
        ({"proxy_allow": "nowhere"}, "is not a network"),
        ({"proxy_protocol": 1}, "proxy_protocol must be True, False or a list of binds"),
        ({"proxy_protocol": [8001]}, "list of binds"),
    ],
)
def test_bad_options_say_what_is_wrong(options: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        ServerOptions(**options)  # type: ignore[arg-type]


def test_allows_only_the_listed_networks_and_unix_peers() -> None:
    intake = ProxyIntake.build(True, ["10.0.0.0/8", "2001:db8::/32"])
    assert intake is not None
    assert intake.allows("10.1.2.3") and intake.allows("2001:db8::7")
    assert intake.allows("::ffff:10.0.0.9")  # an IPv4 peer on a dual-stack listener
    assert intake.allows("unix")
    assert not intake.allows("127.0.0.1") and not intake.allows("192.0.2.1")
    assert not intake.allows("not-an-address")


def test_covers_every_bind_or_only_the_listed_ones() -> None:
    everywhere = ProxyIntake.build(True, ["127.0.0.1"])
    assert everywhere is not None and everywhere.covers(("127.0.0.1", 9))
    listed = ProxyIntake.build(("127.0.0.1:8001", "unix:/tmp/app.sock"), ["127.0.0.1"])
    assert listed is not None
    assert listed.covers(("127.0.0.1", 8001)) and listed.covers("/tmp/app.sock")
    assert not listed.covers(("127.0.0.1", 8002)) and not listed.covers("/tmp/other.sock")


V1_LINE = b"PROXY TCP4 203.0.113.7 10.0.0.1 51000 443\r\n"
V2_HEADER = (
    b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c"  # PROXY over TCP4, 12 address bytes
    + bytes([198, 51, 100, 9, 10, 0, 0, 1])
    + (40000).to_bytes(2, "big")
    + (443).to_bytes(2, "big")
)


@pytest.mark.parametrize(
    ("header", "client"), [(V1_LINE, "203.0.113.7"), (V2_HEADER, "198.51.100.9")]
)
@pytest.mark.parametrize("piece", [1, 5, 1000])
def test_the_reader_takes_exactly_the_header_and_leaves_what_follows(
    header: bytes, client: str, piece: int
) -> None:
    # The sender writes the header in pieces; the reader, on a non-blocking socket, waits
    # between them and must not take one byte of the proxied protocol's.
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    pieces = iter(
        [header[i : i + piece] for i in range(0, len(header), piece)] + [b"\x16\x03\x01 TLS"]
    )
    theirs.sendall(next(pieces))

    def wait_readable() -> None:
        theirs.sendall(next(pieces))

    with ours, theirs:
        parsed = read_proxy_header(ours, wait_readable)
        assert parsed.source is not None and parsed.source[0] == client
        for rest in pieces:
            theirs.sendall(rest)
        ours.setblocking(True)
        assert ours.recv(100) == b"\x16\x03\x01 TLS"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"GET / HTTP/1.1\r\n", "no PROXY protocol header"),
        (b"PROXY TCP4 192.0.2.1 127.0.0.1 1 2\n", "must end with CRLF"),
        (b"PROXY " + b"x" * 120, "longer than 107 bytes"),
        (b"PROXY TCP4 192.0.2.1", "closed within"),
    ],
)
def test_the_reader_refuses_what_is_no_header(data: bytes, error: str) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(data)
        theirs.shutdown(socket.SHUT_WR)
        with pytest.raises(ProxyHeaderError, match=error):
            read_proxy_header(ours, lambda: None)
