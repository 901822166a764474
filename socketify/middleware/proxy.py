"""Who is the client behind the proxies? `X-Forwarded-For` / `Forwarded` with an explicit trust.

A forwarded address is only as honest as the hop that wrote it: a client can send its own
`X-Forwarded-For: 1.2.3.4`, and every proxy *appends* to the list. So the right answer is
read from the right, skipping the hops we trust. `trust_proxy` says which hops those are:

- `False`: trust nothing; the peer address is the client.
- `True`: trust everything; the left-most address (what the first proxy was told). Only safe
  when the server is unreachable except through proxies that overwrite the header.
- an `int` N: exactly N proxies stand in front of us; the client is the address N hops from
  the right (the peer counts as the first hop).
- networks (`["10.0.0.0/8", "127.0.0.1"]`): walk from the peer leftwards while the address is
  inside a trusted network; the first one outside is the client.

`X-Forwarded-For` is read when present, otherwise the `for=` parameters of RFC 7239
`Forwarded`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from socketify.core.request import Request

__all__ = ["TrustProxy", "client_ip", "client_ip_resolver", "forwarded_chain"]

TrustProxy: TypeAlias = "bool | int | Iterable[str]"
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def forwarded_chain(req: Request) -> list[str]:
    """The forwarded addresses, client side first (X-Forwarded-For, else Forwarded for=)."""
    xff = req.header("x-forwarded-for")
    if xff:
        return [hop.strip() for hop in xff.split(",") if hop.strip()]
    forwarded = req.header("forwarded")
    if not forwarded:
        return []
    chain = []
    for element in forwarded.split(","):
        for pair in element.split(";"):
            name, _, value = pair.strip().partition("=")
            if name.strip().lower() == "for":
                chain.append(_strip_port(value.strip().strip('"')))
    return [hop for hop in chain if hop]


def _strip_port(addr: str) -> str:
    if addr.startswith("["):  # "[2001:db8::1]:4711"
        return addr[1:].partition("]")[0]
    if addr.count(":") == 1:  # "192.0.2.60:4711"
        return addr.partition(":")[0]
    return addr


def client_ip(req: Request, trust_proxy: TrustProxy = False) -> str:
    """The client's address under `trust_proxy` (see the module doc); "" when unknown."""
    return client_ip_resolver(trust_proxy)(req)


def client_ip_resolver(trust_proxy: TrustProxy) -> Callable[[Request], str]:
    """Build `f(req) -> client address` once, so middleware pays no set-up per request."""
    if trust_proxy is False:
        return _peer
    if trust_proxy is True:
        return _leftmost
    if isinstance(trust_proxy, int):
        if trust_proxy < 0:
            raise ValueError("trust_proxy hop count must be >= 0")
        hops = trust_proxy

        def by_hops(req: Request) -> str:
            # Addresses as seen from here: the peer, then the forwarded list right to left.
            seen = [req.remote_addr, *reversed(forwarded_chain(req))]
            return seen[min(hops, len(seen) - 1)]

        return by_hops
    networks = _networks(trust_proxy)

    def by_networks(req: Request) -> str:
        address = req.remote_addr
        if not _trusted(address, networks):
            return address
        for hop in reversed(forwarded_chain(req)):
            address = hop
            if not _trusted(hop, networks):
                break
        return address

    return by_networks


def _peer(req: Request) -> str:
    return req.remote_addr


def _leftmost(req: Request) -> str:
    chain = forwarded_chain(req)
    return chain[0] if chain else req.remote_addr


def _networks(spec: Iterable[str]) -> tuple[_Network, ...]:
    if isinstance(spec, str):
        spec = [spec]
    try:
        return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in spec)
    except ValueError as exc:
        raise ValueError(f"trust_proxy: {exc}") from None


def _trusted(address: str, networks: tuple[_Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False  # "unknown", an obfuscated Forwarded identifier, garbage
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)
