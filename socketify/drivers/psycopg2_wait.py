"""psycopg2 under gevent: queries wait for the server by parking the greenlet, not the hub.

Theory of operation. psycopg2 talks to the server from C (libpq), out of monkey-patching's
reach. With a wait callback installed it runs each query asynchronously and calls the callback
until the connection is ready; the callback polls, and parks the greenlet on a gevent watcher
for the connection's socket until the server answers. The callback is global: once installed,
every psycopg2 connection of the process waits this way, the app's own included.

PERF: every connection waits on two watchers (read, write) kept for its socket from one
query to the next, in a table by descriptor that names the connection they were made for: a
new connection that is given a closed one's descriptor gets watchers of its own, and a process
forked from this one starts with an empty table (the watchers belong to the parent's loop).
gevent's `wait_read(fd)` would build a watcher, and check the descriptor with a system call,
on every wait: about a tenth of the instructions of a pooled primary-key read.

The kept watchers wait at a priority above gevent's default. A greenlet that waits for the
database holds one of the app's few pooled connections while other requests queue for it;
when its answer is ready in the same turn of the loop as other sockets, it resumes first and
gives the connection back, instead of after every one of those requests has run as far as
its own wait.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

__all__ = ["cooperate_with_gevent", "kept_watchers"]

_READ, _WRITE = 1, 2  # libev's event masks
# Above the default (0) of every other watcher in the worker; libev's highest is 2.
DATABASE_PRIORITY = 1

# psycopg2's poll states (psycopg2.extensions.POLL_*), fixed by its API.
_POLL_OK, _POLL_READ, _POLL_WRITE = 0, 1, 2
# Set when the callback is installed: gevent's get_hub and psycopg2's OperationalError.
_get_hub: Any = None
_operational_error: type[Exception] = OSError

# descriptor -> (weak reference to its connection, hub, read watcher, write watcher)
_kept: dict[int, tuple[weakref.ref[Any], Any, Any, Any]] = {}
os.register_at_fork(after_in_child=_kept.clear)


def cooperate_with_gevent() -> bool:
    """In a monkey-patched process, install psycopg2's wait callback (once); True when it is.

    A callback the app installed itself (psycogreen's, say) is left in place.
    """
    global _get_hub, _operational_error
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("socket"):
        return False
    import psycopg2
    import psycopg2.extensions as extensions
    from gevent.hub import get_hub  # here, not at import: only a patched process needs it

    if extensions.get_wait_callback() is None:
        _get_hub, _operational_error = get_hub, psycopg2.OperationalError
        extensions.set_wait_callback(_wait)
    return True


def kept_watchers(con: Any) -> tuple[Any, Any] | None:
    """The (read, write) watchers `con` waits on in this thread, None before its first wait."""
    kept = _kept.get(con.fileno())
    if kept is None or kept[0]() is not con or kept[1] is not _get_hub():
        return None
    return kept[2], kept[3]


def _wait(con: Any, timeout: float | None = None) -> None:
    """The wait callback: poll, and park on the socket until libpq can go on."""
    while True:
        state = con.poll()
        if state == _POLL_OK:
            return
        if state != _POLL_READ and state != _POLL_WRITE:
            raise _operational_error(f"unexpected psycopg2 poll state {state}")
        if timeout is not None:  # only psycogreen-style callers pass one; psycopg2 never does
            _wait_once(con.fileno(), state == _POLL_READ, timeout)
            continue
        hub, fd = _get_hub(), con.fileno()
        kept = _kept.get(fd)
        if kept is None or kept[1] is not hub or kept[0]() is not con:
            kept = _kept[fd] = _watchers_for(con, fd, hub)
        hub.wait(kept[2] if state == _POLL_READ else kept[3])


def _watchers_for(con: Any, fd: int, hub: Any) -> tuple[weakref.ref[Any], Any, Any, Any]:
    loop = hub.loop
    read = loop.io(fd, _READ, priority=DATABASE_PRIORITY)
    write = loop.io(fd, _WRITE, priority=DATABASE_PRIORITY)
    return weakref.ref(con), hub, read, write


def _wait_once(fd: int, reading: bool, timeout: float) -> None:
    from gevent.socket import wait_read, wait_write

    if reading:
        wait_read(fd, timeout=timeout)
    else:
        wait_write(fd, timeout=timeout)
