"""The master's listening sockets, arranged by worker slot.

For every TCP bind the master opens one ``SO_REUSEPORT`` socket per worker slot, all bound to
the same address. The kernel spreads new connections across them, and the worker of slot *i*
accepts only from socket *i*: no accept contention, no thundering herd. The master keeps every
socket open and never accepts, so when the worker of slot *i* is replaced (reload, recycle,
crash) the socket's accept queue survives and the next worker of slot *i* drains it: nothing
that was queued is reset.

Unix domain sockets (where ``SO_REUSEPORT`` does not balance) are opened once and shared by all
slots; every worker accepts from the same queue. So are sockets inherited from systemd (socket
activation, see ``workers.supervise.systemd``): they replace the binds, nothing of ours joins
their port, and as systemd keeps its own copy open, clients queue there while the service restarts.

Removing a slot closes its socket for good. Connections still waiting in that queue are reset
unless the kernel migrates them (``net.ipv4.tcp_migrate_req = 1``, Linux 5.14+), which the
master tries to enable at start.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence

from workers.supervise.sockets import (
    DEFAULT_BACKLOG,
    DEFAULT_UNIX_MODE,
    TcpAddress,
    UnixAddress,
    open_tcp,
    open_unix,
    parse_bind,
    probe_tcp,
    unlink_unix,
)

__all__ = ["Listeners"]


class Listeners:
    """Listening sockets for ``binds``: per-slot SO_REUSEPORT sockets for TCP, shared for Unix."""

    def __init__(
        self,
        binds: Sequence[str],
        *,
        slots: int,
        backlog: int = DEFAULT_BACKLOG,
        unix_mode: int = DEFAULT_UNIX_MODE,
        inherited: Sequence[socket.socket] = (),
    ) -> None:
        if slots < 1:
            raise ValueError("at least one worker slot is needed")
        if not binds:
            raise ValueError("at least one bind address is needed")
        self._backlog = backlog
        self._tcp: list[TcpAddress] = []
        self._unix: list[tuple[UnixAddress, int]] = []
        self._shared: list[socket.socket] = []
        self._by_slot: list[list[socket.socket]] = [[]]
        self.addresses: list[tuple[str, int] | str] = []
        try:
            if inherited:
                self._shared.extend(inherited)
                self.addresses.extend(_bound_address(sock) for sock in inherited)
            else:
                for spec in binds:
                    self._open_first(spec, unix_mode)
            for _ in range(slots - 1):
                self.add_slot()
        except BaseException:
            self.close()
            raise

    def _open_first(self, spec: str, unix_mode: int) -> None:
        address = parse_bind(spec)
        if isinstance(address, UnixAddress):
            sock = open_unix(address, backlog=self._backlog, mode=unix_mode)
            self._shared.append(sock)
            self._unix.append((address, os.stat(address.path).st_ino))
            self.addresses.append(address.path)
            return
        # Probe and bind slot 0 back to back, so an overlapping later bind spec fails its own
        # probe instead of silently joining this SO_REUSEPORT group.
        resolved = probe_tcp(address)
        self._by_slot[0].append(open_tcp(resolved, backlog=self._backlog, reuse_port=True))
        self._tcp.append(resolved)
        self.addresses.append((resolved.host, resolved.port))

    @property
    def slot_count(self) -> int:
        """How many worker slots have sockets."""
        return len(self._by_slot)

    @property
    def has_tcp(self) -> bool:
        """Whether any bind is TCP (and so uses per-slot SO_REUSEPORT sockets)."""
        return bool(self._tcp)

    def sockets_for(self, slot: int) -> list[socket.socket]:
        """The sockets the worker of ``slot`` accepts from: its own TCP ones plus shared ones."""
        return [*self._by_slot[slot], *self._shared]

    def add_slot(self) -> int:
        """Open one more SO_REUSEPORT socket per TCP bind; returns the new slot number."""
        opened: list[socket.socket] = []
        try:
            for address in self._tcp:
                opened.append(open_tcp(address, backlog=self._backlog, reuse_port=True))
        except BaseException:
            for sock in opened:
                sock.close()
            raise
        self._by_slot.append(opened)
        return len(self._by_slot) - 1

    def remove_slot(self) -> None:
        """Close the sockets of the highest slot (its queued connections go with them)."""
        if len(self._by_slot) <= 1:
            raise ValueError("cannot remove the last worker slot")
        for sock in self._by_slot.pop():
            sock.close()

    def close_except(self, slot: int) -> None:
        """In a freshly forked worker: drop the other slots' sockets, keep files on disk.

        A worker must not hold another slot's socket: when that slot is removed the socket
        would stay in the SO_REUSEPORT group with nobody accepting, and after the master dies
        it would keep the port open.
        """
        for index, sockets in enumerate(self._by_slot):
            if index != slot:
                for sock in sockets:
                    sock.close()

    def close(self) -> None:
        """Close every socket and remove the Unix socket files this object created."""
        for sockets in self._by_slot:
            for sock in sockets:
                sock.close()
        self._by_slot = [[]]
        for sock in self._shared:
            sock.close()
        self._shared = []
        for address, inode in self._unix:
            with contextlib.suppress(OSError):
                unlink_unix(address, inode)
        self._unix = []


def _bound_address(sock: socket.socket) -> tuple[str, int] | str:
    """The address an inherited socket listens on, in the shape of ``Listeners.addresses``."""
    name = sock.getsockname()
    if sock.family == socket.AF_UNIX:
        # An abstract socket's name comes back as bytes starting with NUL; show it as "@name".
        return name if isinstance(name, str) else "@" + name[1:].decode(errors="replace")
    return (str(name[0]), int(name[1]))
