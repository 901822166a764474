"""psycopg2 under gevent: queries wait for the server by parking the greenlet, not the hub.

Theory of operation. psycopg2 talks to the server from C (libpq), out of monkey-patching's
reach. With a wait callback installed it runs each query asynchronously and calls the callback
until the connection is ready; the callback polls, and parks the greenlet on a gevent watcher
for the connection's socket until the server answers. The callback is global: once installed,
every psycopg2 connection of the process waits this way, the app's own included.

PERF: a connection with a `green_watchers` attribute (socketify.db's pooled connections) keeps
its read and write watchers from one query to the next. gevent's `wait_read(fd)` builds a
watcher per wait, which costs an allocation and an `fcntl` system call to check the descriptor:
about a tenth of the driver's CPU time for a primary-key select. Other connections wait the
usual way.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["cooperate_with_gevent"]

_READ, _WRITE = 1, 2  # libev's event masks


# psycopg2's poll states (psycopg2.extensions.POLL_*), fixed by its API.
_POLL_OK, _POLL_READ, _POLL_WRITE = 0, 1, 2
# Set when the callback is installed: gevent's get_hub and psycopg2's OperationalError.
_get_hub: Any = None
_operational_error: type[Exception] = OSError


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


def _wait(con: Any, timeout: float | None = None) -> None:
    """The wait callback: poll, and park on the socket until libpq can go on."""
    while True:
        state = con.poll()
        if state == _POLL_OK:
            return
        if state != _POLL_READ and state != _POLL_WRITE:
            raise _operational_error(f"unexpected psycopg2 poll state {state}")
        hub = _get_hub()
        # PERF: a pooled connection's watchers are read inline, made on its first wait.
        watchers: Any = getattr(con, "green_watchers", False) if timeout is None else False
        if watchers is None:
            watchers = _kept_watchers(con, hub)
        if watchers and watchers[0] is hub:
            hub.wait(watchers[1] if state == _POLL_READ else watchers[2])
        else:  # not a pooled connection, another thread's hub, or a timeout to honour
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
