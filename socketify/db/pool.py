"""`BoundedPool`: at most `size` database connections per process, shared by all greenlets.

Theory of operation. Pony keeps one connection per thread, and under gevent every request
greenlet is a thread, so 500 concurrent requests would open 500 connections
(https://github.com/ponyorm/pony/issues/564).
This pool replaces Pony's per-thread pool: `connect()` takes a slot from a semaphore of `size`
slots, waiting at most `timeout` seconds (then `PoolTimeout`, a 503), and hands out an idle
connection or opens a new one; `release()` resets the connection and puts it back; `drop()`
discards a broken one and frees its slot. Pony calls these at the start and end of every
`db_session`, so a connection is held only while a session uses the database.

The pool never blocks the gevent hub. Its semaphore is built when the pool is first used in
a process: gevent's in a monkey-patched process, so a waiting greenlet parks while others
run, and the kernel's with plain threads. The per-process state is rebuilt when the pid
changes (after fork: connections inherited from the parent are never reused, and never
closed either — closing a PostgreSQL connection sends a goodbye over the socket the parent
still uses) and when `threading.Lock` changes (the process was monkey-patched after the pool
was first used, as with `--preload`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Protocol

from socketify.core.errors import HTTPError
from socketify.metrics.builtin import DB_POOL_WAITS
from socketify.metrics.recorder import count_one

__all__ = [
    "BoundedPool",
    "ConnectionRecipe",
    "DatabaseUnavailable",
    "PoolStats",
    "PoolTimeout",
    "pools",
]

log = logging.getLogger("socketify.db")

# Connections inherited across fork: referenced forever so their finalizers never run in the
# child (a finalizer would close the parent's server session). Empty in the usual case, since
# the master closes idle connections before it forks.
_inherited: list[Any] = []

# Every pool made in this process, for the metrics sampler (`pools()`).
_pools: weakref.WeakSet[BoundedPool] = weakref.WeakSet()

# Guards the rebuild of a pool's per-process state; held only while building, never across a
# yield, so a kernel lock cannot stall the hub.
_rebuild_lock = threading.Lock()

# PERF: this process's pid, refreshed in a forked child, so that the two pool calls of every
# session compare an int instead of each making a getpid() system call.
_pid = os.getpid()


def _refresh_pid() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_refresh_pid)


class DatabaseUnavailable(HTTPError):
    """The database cannot be reached right now: answered 503 with `Retry-After`."""

    def __init__(self, message: str) -> None:
        super().__init__(503, message, {"Retry-After": "1"})


class PoolTimeout(DatabaseUnavailable):
    """Every pooled connection stayed busy for `pool_timeout` seconds."""


class ConnectionRecipe(Protocol):
    """How the pool opens, resets and closes one kind of DB-API connection."""

    def open(self) -> Any:
        """A new connection (may raise the driver's error)."""

    def reset(self, con: Any) -> None:
        """Make a used connection ready for the next session; raise if it is unusable.

        A recipe whose `reset` is exactly `con.rollback()` may say so with a true class
        attribute `reset_is_rollback`: the pool then calls `con.rollback()` itself."""

    def usable(self, con: Any) -> bool:
        """Cheap check, without a round trip, that an idle connection is still open.

        A recipe whose connections cannot tell sets `check_usable = False`: the pool then
        hands idle connections out without calling this. One whose check is exactly `not
        con.closed` may say so with a true class attribute `usable_unless_closed`: the pool
        then reads that flag itself."""

    def close(self, con: Any) -> None:
        """Close a connection the pool gives up."""


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of one process's pool."""

    size: int
    in_use: int
    idle: int
    waiting: int
    peak_in_use: int
    opened: int
    timeouts: int


class _State:
    """The pool as it exists in one process under one flavour of `threading`."""

    def __init__(self, size: int, carried: _State | None) -> None:
        self.pid = _pid
        self.lock_type: Any = threading.Lock
        self.slots = _semaphore(size)
        self.idle: list[Any] = []
        self.owned: set[int] = set()  # id() of connections checked out of *this* state
        self.waiting = 0
        self.peak = 0
        self.opened = 0
        self.timeouts = 0
        if carried is not None and carried.pid == self.pid:
            # Same process, newly monkey-patched: its connections are still ours to use.
            self.idle = carried.idle
            self.owned = carried.owned
            self.opened = carried.opened
            for _ in carried.owned:
                self.slots.acquire(blocking=False)
        elif carried is not None:
            _inherited.extend(carried.idle)


class BoundedPool:
    """A per-process pool of at most `size` connections; the waiting is cooperative."""

    def __init__(self, recipe: ConnectionRecipe, size: int = 8, timeout: float = 5.0) -> None:
        if size < 1:
            raise ValueError("pool_size must be at least 1")
        if timeout < 0:
            raise ValueError("pool_timeout must not be negative")
        self.recipe = recipe
        # Whether an idle connection must be checked before reuse (SQLite's need not).
        self._check_usable = getattr(recipe, "check_usable", True)
        self._usable_unless_closed = getattr(recipe, "usable_unless_closed", False)
        # PERF: `con.rollback()` called here, not through the recipe's `reset`: one Python
        # call less on every session's release.
        self._reset_is_rollback = getattr(recipe, "reset_is_rollback", False)
        self.size = size
        self.timeout = timeout
        self._state: _State | None = None
        _pools.add(self)

    def _current(self) -> _State:
        state = self._state
        if state is None or state.pid != _pid or state.lock_type is not threading.Lock:
            with _rebuild_lock:
                state = self._state
                stale = state is None or state.pid != _pid or state.lock_type is not threading.Lock
                if stale:
                    state = self._state = _State(self.size, state)
        assert state is not None
        return state

    # -- Pony's pool interface ------------------------------------------------------------------

    def connect(self) -> tuple[Any, bool]:
        """Check a connection out: `(connection, is_new)`; `PoolTimeout` when none frees up."""
        state = self._state
        if state is None or state.pid != _pid or state.lock_type is not threading.Lock:
            state = self._current()
        # PERF: a free slot is taken without a waiter's bookkeeping; acquire(timeout=...) takes
        # the same free slot the same way, so only a request that must wait pays for it.
        if not state.slots.acquire(False):
            self._wait_for_slot(state)
        idle = state.idle
        # PERF: the warmest idle connection (LIFO) is taken here when it needs no check, or
        # the check is a flag read here (PostgreSQL's), rather than through `_checkout`.
        if idle and (
            not self._check_usable or (self._usable_unless_closed and not idle[-1].closed)
        ):
            con, is_new = idle.pop(), False
        else:
            try:
                con, is_new = self._checkout(state)
            except BaseException:
                state.slots.release()
                raise
        owned = state.owned
        owned.add(id(con))
        if len(owned) > state.peak:
            state.peak = len(owned)
        return con, is_new

    def _wait_for_slot(self, state: _State) -> None:
        state.waiting += 1
        count_one(DB_POOL_WAITS)
        try:
            granted = state.slots.acquire(timeout=self.timeout)
        finally:
            state.waiting -= 1
        if not granted:
            state.timeouts += 1
            log.warning(
                "database pool exhausted: %d connections busy for %.1fs", self.size, self.timeout
            )
            raise PoolTimeout(f"all {self.size} database connections are busy; retry shortly")

    def _checkout(self, state: _State) -> tuple[Any, bool]:
        recipe = self.recipe
        while state.idle:
            con = state.idle.pop()  # LIFO: the warmest; one the server dropped is replaced on use
            if recipe.usable(con):
                return con, False
            state.opened -= 1
            _close_quietly(recipe, con)
        try:
            con = recipe.open()
        except Exception as exc:
            raise DatabaseUnavailable(f"cannot connect to the database: {exc}") from exc
        state.opened += 1
        return con, True

    def release(self, con: Any) -> None:
        """Return a connection at the end of a session, reset; a failed reset discards it."""
        state = self._state
        if state is None or state.pid != _pid or state.lock_type is not threading.Lock:
            state = self._current()
        try:
            state.owned.remove(id(con))
        except KeyError:
            return  # checked out before a fork or before patching rebuilt the state: not ours
        try:
            if self._reset_is_rollback:
                con.rollback()
            else:
                self.recipe.reset(con)
        except Exception as exc:
            # The session's work is already committed or rolled back; the connection is
            # merely not reusable (server restarted, network gone), so recycle it quietly.
            log.info("discarding a database connection that failed to reset: %s", exc)
            state.opened -= 1
            _close_quietly(self.recipe, con)
        else:
            state.idle.append(con)
        finally:
            state.slots.release()

    def drop(self, con: Any) -> None:
        """Discard a connection Pony found broken; its slot is freed for a new one."""
        state = self._current()
        if not self._give_back(state, con):
            return
        state.opened -= 1
        try:
            _close_quietly(self.recipe, con)
        finally:
            state.slots.release()

    def disconnect(self) -> None:
        """Close the idle connections of this process (busy ones close when returned)."""
        self.close_idle()

    # -- housekeeping -----------------------------------------------------------------------------

    def _give_back(self, state: _State, con: Any) -> bool:
        try:
            state.owned.remove(id(con))
        except KeyError:
            # Checked out before a fork or before patching rebuilt the state: not ours.
            return False
        return True

    def close_idle(self) -> int:
        """Close every idle connection of this process; returns how many were closed."""
        state = self._state
        if state is None or state.pid != _pid:
            return 0
        closed = 0
        while state.idle:
            con = state.idle.pop()
            state.opened -= 1
            _close_quietly(self.recipe, con)
            closed += 1
        return closed

    def stats(self) -> PoolStats:
        """How this process's pool is doing right now."""
        state = self._current()
        return PoolStats(
            size=self.size,
            in_use=len(state.owned),
            idle=len(state.idle),
            waiting=state.waiting,
            peak_in_use=state.peak,
            opened=state.opened,
            timeouts=state.timeouts,
        )

    def __repr__(self) -> str:
        return f"<BoundedPool size={self.size} timeout={self.timeout}>"


def pools() -> list[BoundedPool]:
    """The pools of this process that are still in use."""
    return list(_pools)


def _semaphore(size: int) -> Any:
    """gevent's semaphore in a monkey-patched process, the kernel's otherwise.

    Not `threading.BoundedSemaphore` after patching: its Condition probes its own lock with
    a failing non-blocking acquire on every release, which gevent answers with a yield.
    """
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        from gevent.lock import BoundedSemaphore

        return BoundedSemaphore(size)
    return threading.BoundedSemaphore(size)


def _close_quietly(recipe: ConnectionRecipe, con: Any) -> None:
    try:
        recipe.close(con)
    except Exception as exc:  # a connection already dead on the server cannot close cleanly
        log.debug("closing a database connection failed: %s", exc)
