"""Ports for servers under test: a free one, and whether the IPv6 loopback exists here."""

from __future__ import annotations

import socket

import pytest

__all__ = ["free_port", "ipv6_loopback", "needs_ipv6"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (bound, then released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ipv6_loopback() -> bool:
    """Whether `::1` can be bound on this machine."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback (::1) here")
