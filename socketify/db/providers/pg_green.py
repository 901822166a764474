"""psycopg2 under gevent: queries wait for the server by parking the greenlet, not the hub.

Theory of operation. psycopg2 talks to the server from C (libpq), out of monkey-patching's
reach. With a wait callback installed it runs each query asynchronously and calls the callback
until the connection is ready; the callback polls, and parks the greenlet on a gevent watcher
for the connection's socket until the server answers.

PERF: the pool's connections are `GreenConnection`s, which keep their read and write watchers
from one query to the next. gevent's `wait_read(fd)` builds a watcher per wait, which costs an
allocation and an `fcntl` system call to check the descriptor: about a tenth of the driver's
CPU time for a primary-key select. Other psycopg2 connections in the process (the
callback is global) wait the usual way.
"""

from __future__ import annotations

import sys
from typing import Any

import psycopg2.extensions as extensions

__all__ = ["GreenConnection", "close_watchers", "cooperate_with_gevent"]

_READ, _WRITE = 1, 2  # libev's event masks
_POLL_OK, _POLL_READ, _POLL_WRITE = extensions.POLL_OK, extensions.POLL_READ, extensions.POLL_WRITE
_get_hub: Any = None  # gevent's get_hub, set when the callback is installed


class GreenConnection(extensions.connection):
    """A psycopg2 connection that keeps its gevent watchers and, for the fast path, its
    prepared statements and a cursor for the primary-key reads."""

    __slots__ = ("green_watchers", "key_read_cursor", "prepared_statements")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # connecting waits the usual way: libpq may try
        # several addresses, each on a socket of its own, so the descriptor is not final yet.
        # (hub, read watcher, write watcher), made on the first wait once connected.
        self.green_watchers: tuple[Any, Any, Any] | None = None
        # Names of the statements prepared on this connection (see fastpath.pg_prepared).
        self.prepared_statements: set[str] = set()
        # PERF: the cursor the fast path's key reads run on (fastpath.loader), made once: a
        # psycopg2 cursor costs more to make than the Python side of the read it serves. Its
        # results are one row, read at once; it is cleared when the connection is closed (a
        # cursor refers to its connection: the pair is a cycle while both live).
        self.key_read_cursor: Any = None


def close_watchers(con: Any) -> None:
    """Close the watchers a connection kept (before the connection itself is closed)."""
    watchers = getattr(con, "green_watchers", None)
    if watchers is not None:
        con.green_watchers = None
        watchers[1].close()
        watchers[2].close()


def cooperate_with_gevent() -> None:
    """In a monkey-patched process, install the wait callback (once)."""
    global _get_hub
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("socket"):
        return
    if extensions.get_wait_callback() is not None:
        return
    from gevent.hub import get_hub  # here, not at import: only a patched process needs it

    _get_hub = get_hub
    extensions.set_wait_callback(_wait)


def _wait(con: Any, timeout: float | None = None) -> None:
    while True:
        state = con.poll()
        if state == _POLL_OK:
            return
        if state != _POLL_READ and state != _POLL_WRITE:
            raise extensions.OperationalError(f"unexpected psycopg2 poll state {state}")
        hub = _get_hub()
        # PERF: a pooled connection's watchers are read inline, made on its first wait.
        watchers: Any = getattr(con, "green_watchers", False) if timeout is None else False
        if watchers is None:
            watchers = _kept_watchers(con, hub)
        if watchers and watchers[0] is hub:
            hub.wait(watchers[1] if state == _POLL_READ else watchers[2])
        else:  # not one of ours, another thread's hub, or a timeout to honour
            _wait_once(con.fileno(), state == _POLL_READ, timeout)


def _kept_watchers(con: Any, hub: Any) -> tuple[Any, Any, Any] | None:
    """The watchers `con` keeps for `hub`, made on first use; None for other connections."""
    watchers: Any = getattr(con, "green_watchers", False)  # unset while connecting
    if watchers is False:
        return None
    if watchers is None:
        loop, fd = hub.loop, con.fileno()
        watchers = con.green_watchers = (hub, loop.io(fd, _READ), loop.io(fd, _WRITE))
    return watchers if watchers[0] is hub else None


def _wait_once(fd: int, reading: bool, timeout: float | None) -> None:
    from gevent.socket import wait_read, wait_write

    if reading:
        wait_read(fd, timeout=timeout)
    else:
        wait_write(fd, timeout=timeout)
