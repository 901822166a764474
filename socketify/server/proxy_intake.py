"""Which binds expect a PROXY protocol header, and from whom one is believed.

A bind that expects the header (`ServerOptions.proxy_protocol`, or `--proxy-protocol` for
every bind) reads it before anything else on each connection, TLS handshake included; the
client address it names replaces the peer's for the request, the access log and every
protocol served on the connection. Only peers in `proxy_allow` may send it (by default the
loopback networks, like gunicorn's `forwarded-allow-ips`): anyone else could claim any
address, so their connections are closed unread. Unix socket peers are local processes the
socket's file mode already vetted, and are always allowed.

`ProxyIntake.read_header` is the one reader of the header, for HTTP and TCP services alike.
It reads exactly the header and not one byte more: what follows belongs to the proxied
protocol (a TLS handshake, the HTTP parser, a TCP handler) and stays in the socket. Version
2 states its length; a version 1 line is read up to its LF, found by peeking. Bytes that
cannot start a header fail on the first read, not when a timeout runs out.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from socketify.protocol.proxy_header import (
    V1_MAX_LENGTH,
    V1_PREFIX,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    parse_proxy_header,
)
from workers.supervise.sockets import TcpAddress, UnixAddress, parse_bind

__all__ = ["ProxyIntake", "bound_matches", "read_proxy_header"]

log = logging.getLogger("socketify.error")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ProxyIntake:
    """The PROXY protocol settings of one server: allowed sources and the binds concerned."""

    allowed: tuple[Network, ...]
    binds: tuple[TcpAddress | UnixAddress, ...] | None = None  # None: every bind

    @classmethod
    def build(cls, proxy_protocol: Any, proxy_allow: Iterable[str]) -> ProxyIntake | None:
        """From the option values (see `ServerOptions`); None when no bind expects PROXY."""
        if not proxy_protocol:
            return None
        allowed = tuple(ipaddress.ip_network(net.strip(), strict=False) for net in proxy_allow)
        if proxy_protocol is True:
            return cls(allowed)
        return cls(allowed, tuple(parse_bind(spec) for spec in proxy_protocol))

    def covers(self, bound: Any) -> bool:
        """Whether a listening socket bound at `bound` (`getsockname()`) expects the header."""
        if self.binds is None:
            return True
        return any(bound_matches(bound, address) for address in self.binds)

    def allows(self, peer: str) -> bool:
        """Whether the peer address `peer` may send a PROXY header ("unix": always)."""
        if peer == "unix":
            return True
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            address = mapped  # an IPv4 peer on a dual-stack listener
        return any(address in network for network in self.allowed)

    def read_header(
        self, sock: Any, peer: str, wait_readable: Callable[[], None]
    ) -> ProxyHeader | None:
        """The header `peer` sent on the non-blocking `sock`, or None (logged): close.

        `wait_readable()` parks the caller until the socket is readable; a deadline it
        enforces (by raising) bounds the whole read and propagates to the caller.
        """
        if not self.allows(peer):
            log.warning("closed a connection from %s: not allowed to send PROXY", peer)
            return None
        try:
            return read_proxy_header(sock, wait_readable)
        except ProxyHeaderError as exc:
            log.warning("closed a connection from %s: %s", peer, exc)
            return None


def bound_matches(bound: Any, address: TcpAddress | UnixAddress) -> bool:
    """Whether a socket's bound address is the bind `address` (port 0 matches any port)."""
    if isinstance(address, UnixAddress):
        return bool(bound == address.path)
    return isinstance(bound, tuple) and bound[0] == address.host and address.port in (0, bound[1])


def read_proxy_header(sock: Any, wait_readable: Callable[[], None]) -> ProxyHeader:
    """Read exactly one PROXY protocol header from the non-blocking `sock` (see above).

    ProxyHeaderError for anything that is not one, or a connection closed within it.
    """
    start = _recv_exactly(sock, len(V1_PREFIX), wait_readable)
    if V2_SIGNATURE.startswith(start):
        preamble = start + _recv_exactly(sock, 16 - len(start), wait_readable)
        length = int.from_bytes(preamble[14:16], "big")
        data = preamble + _recv_exactly(sock, length, wait_readable)
    elif start == V1_PREFIX:
        data = start
        while not data.endswith(b"\n"):  # the parser refuses a bare LF
            if len(data) >= V1_MAX_LENGTH:
                raise ProxyHeaderError(f"PROXY v1 line longer than {V1_MAX_LENGTH} bytes")
            ahead = _recv(sock, V1_MAX_LENGTH - len(data), wait_readable, socket.MSG_PEEK)
            end = ahead.find(b"\n")
            data += _recv_exactly(sock, end + 1 if end >= 0 else len(ahead), wait_readable)
    else:
        raise ProxyHeaderError("no PROXY protocol header (neither version 1 nor version 2)")
    parsed = parse_proxy_header(data)
    if parsed is None or parsed[1] != len(data):
        raise ProxyHeaderError("malformed PROXY protocol header")
    return parsed[0]


def _recv_exactly(sock: Any, size: int, wait_readable: Callable[[], None]) -> bytes:
    data = b""
    while len(data) < size:
        data += _recv(sock, size - len(data), wait_readable)
    return data


def _recv(sock: Any, size: int, wait_readable: Callable[[], None], flags: int = 0) -> bytes:
    """Some bytes (at most `size`), waiting for them; ProxyHeaderError at end of stream."""
    while True:
        try:
            data: bytes = sock.recv(size, flags)
        except BlockingIOError:
            wait_readable()
            continue
        if not data:
            raise ProxyHeaderError("the connection closed within its PROXY protocol header")
        return data
