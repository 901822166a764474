"""Which binds expect a PROXY protocol header, and from whom one is believed.

A bind that expects the header (`ServerOptions.proxy_protocol`, or `--proxy-protocol` for
every bind) reads it before anything else on each connection, TLS handshake included; the
client address it names replaces the peer's for the request, the access log and every
protocol served on the connection. Only peers in `proxy_allow` may send it (by default the
loopback networks, like gunicorn's `forwarded-allow-ips`): anyone else could claim any
address, so their connections are closed unread. Unix socket peers are local processes the
socket's file mode already vetted, and are always allowed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from workers.supervise.sockets import TcpAddress, UnixAddress, parse_bind

__all__ = ["ProxyIntake", "bound_matches"]

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


def bound_matches(bound: Any, address: TcpAddress | UnixAddress) -> bool:
    """Whether a socket's bound address is the bind `address` (port 0 matches any port)."""
    if isinstance(address, UnixAddress):
        return bool(bound == address.path)
    return isinstance(bound, tuple) and bound[0] == address.host and address.port in (0, bound[1])
