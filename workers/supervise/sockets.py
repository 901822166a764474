"""Bind specs and listening sockets.

A bind spec is the string a user types after ``--bind``:

- ``HOST:PORT`` — IPv4 address or host name (the first address it resolves to);
- ``[V6]:PORT`` — IPv6; ``[::]`` listens dual stack (``IPV6_V6ONLY`` off);
- ``:PORT`` or ``PORT`` — every IPv4 interface (``0.0.0.0``);
- ``unix:PATH`` — a Unix domain socket; a stale socket file is replaced.

Port 0 asks the kernel for a free port; callers resolve it once (``probe_tcp``) and bind every
further socket to the port that came back.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from dataclasses import dataclass

__all__ = [
    "DEFAULT_BACKLOG",
    "Address",
    "BindError",
    "TcpAddress",
    "UnixAddress",
    "format_address",
    "open_tcp",
    "open_unix",
    "parse_bind",
    "probe_tcp",
    "unlink_unix",
]

DEFAULT_BACKLOG = 2048
DEFAULT_UNIX_MODE = 0o666

SPEC_HELP = "expected HOST:PORT, [IPv6]:PORT, :PORT, PORT or unix:PATH"


class BindError(Exception):
    """A bind spec is malformed or its address cannot be bound."""


@dataclass(frozen=True)
class TcpAddress:
    """A TCP address: ``host`` is numeric after resolution, ``port`` may be 0 before binding."""

    host: str
    port: int
    family: int = socket.AF_INET

    def with_port(self, port: int) -> TcpAddress:
        """Return this address with another port (used once port 0 is resolved)."""
        return TcpAddress(self.host, port, self.family)

    def __str__(self) -> str:
        if self.family == socket.AF_INET6:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class UnixAddress:
    """A Unix domain socket path."""

    path: str

    def __str__(self) -> str:
        return f"unix:{self.path}"


Address = TcpAddress | UnixAddress


def parse_bind(spec: str) -> Address:
    """Parse one bind spec; host names are resolved here so errors surface before forking."""
    spec = spec.strip()
    if spec.startswith("unix:"):
        path = spec[len("unix:") :]
        if not path:
            raise BindError(f"invalid bind {spec!r}: empty Unix socket path")
        return UnixAddress(os.path.abspath(path))
    if spec.startswith("["):
        host, sep, rest = spec[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise BindError(f"invalid bind {spec!r}: {SPEC_HELP}")
        return _resolve(spec, host, _parse_port(spec, rest[1:]), socket.AF_INET6)
    host, sep, port_text = spec.rpartition(":")
    if not sep:
        host, port_text = "", spec
    if ":" in host:
        raise BindError(f"invalid bind {spec!r}: put IPv6 addresses in brackets, e.g. [::1]:8080")
    return _resolve(spec, host or "0.0.0.0", _parse_port(spec, port_text), socket.AF_UNSPEC)


def _parse_port(spec: str, text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise BindError(f"invalid bind {spec!r}: {SPEC_HELP}")
    return int(text)


def _resolve(spec: str, host: str, port: int, family: int) -> TcpAddress:
    try:
        infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except OSError as exc:
        raise BindError(f"invalid bind {spec!r}: cannot resolve {host!r}: {exc}") from None
    found_family, _, _, _, sockaddr = infos[0]
    return TcpAddress(str(sockaddr[0]), port, int(found_family))


def format_address(address: tuple[str, int] | str) -> str:
    """Render an entry of ``Master.addresses`` the way users type it (``[::1]:80``, ``unix:/x``)."""
    if isinstance(address, str):
        return f"unix:{address}"
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _failure(address: Address, exc: OSError) -> BindError:
    reason = exc.strerror or str(exc)
    return BindError(f"failed to bind {address}: {reason}")


def probe_tcp(address: TcpAddress) -> TcpAddress:
    """Check that nobody listens on ``address`` and resolve port 0; returns the concrete address.

    The probe binds *without* SO_REUSEPORT: that bind fails if any socket (even another
    SO_REUSEPORT server of the same user, which would otherwise silently share the port)
    already owns the address.
    """
    sock = socket.socket(address.family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _dual_stack(sock)
        sock.bind((address.host, address.port))
        return address.with_port(int(sock.getsockname()[1]))
    except OSError as exc:
        raise _failure(address, exc) from None
    finally:
        sock.close()


def _dual_stack(sock: socket.socket) -> None:
    # "[::]" should also accept IPv4 clients; distributions disagree on the sysctl default.
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)


def open_tcp(
    address: TcpAddress, *, backlog: int = DEFAULT_BACKLOG, reuse_port: bool = False
) -> socket.socket:
    """Bind and listen on a TCP address (non-inheritable: forked workers keep it, exec does not)."""
    sock = socket.socket(address.family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        _dual_stack(sock)
        sock.bind((address.host, address.port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise _failure(address, exc) from None
    return sock


def open_unix(
    address: UnixAddress, *, backlog: int = DEFAULT_BACKLOG, mode: int = DEFAULT_UNIX_MODE
) -> socket.socket:
    """Bind and listen on a Unix socket, replacing a stale socket file left by a dead server."""
    _remove_stale(address)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(address.path)
        os.chmod(address.path, mode)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise _failure(address, exc) from None
    return sock


def _remove_stale(address: UnixAddress) -> None:
    try:
        info = os.lstat(address.path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise BindError(f"failed to bind {address}: path exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(address.path)
    except OSError as exc:
        # Refused (or gone): nobody is listening any more, so the file is a leftover.
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise _failure(address, exc) from None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address.path)
    else:
        raise BindError(f"failed to bind {address}: Address already in use")
    finally:
        probe.close()


def unlink_unix(address: UnixAddress, inode: int) -> None:
    """Remove the socket file on shutdown, unless another server has since replaced it."""
    try:
        if os.lstat(address.path).st_ino == inode:
            os.unlink(address.path)
    except FileNotFoundError:
        pass
