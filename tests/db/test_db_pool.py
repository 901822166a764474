"""BoundedPool on its own, with fake connections and real threads (gevent: test_db_gevent)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
from pony.orm import db_session

import socketify.db
from socketify.db import pool as pool_module
from socketify.db.pool import BoundedPool, DatabaseUnavailable, PoolTimeout


class FakeConnection:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False
        self.resets = 0


class FakeRecipe:
    """Counts what the pool does; can be told to fail."""

    def __init__(self) -> None:
        self.opened: list[FakeConnection] = []
        self.fail_open: Exception | None = None
        self.fail_reset = False

    def open(self) -> FakeConnection:
        if self.fail_open is not None:
            raise self.fail_open
        con = FakeConnection(len(self.opened))
        self.opened.append(con)
        return con

    def reset(self, con: FakeConnection) -> None:
        if self.fail_reset:
            raise RuntimeError("server went away")
        con.resets += 1

    def usable(self, con: FakeConnection) -> bool:
        return not con.closed

    def close(self, con: FakeConnection) -> None:
        con.closed = True


@pytest.fixture
def recipe() -> FakeRecipe:
    return FakeRecipe()


def test_a_released_connection_is_reused_not_reopened(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=2, timeout=1)
    first, is_new = pool.connect()
    assert is_new
    pool.release(first)
    again, is_new = pool.connect()
    assert again is first and not is_new
    assert first.resets == 1
    assert len(recipe.opened) == 1


def test_never_more_than_size_connections_under_thread_contention(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=3, timeout=5)
    in_use = 0
    peak = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal in_use, peak
        con, _ = pool.connect()
        with guard:
            in_use += 1
            peak = max(peak, in_use)
        time.sleep(0.01)
        with guard:
            in_use -= 1
        pool.release(con)

    threads = [threading.Thread(target=work) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak == 3
    assert len(recipe.opened) <= 3
    stats = pool.stats()
    assert (stats.in_use, stats.peak_in_use, stats.idle) == (0, 3, len(recipe.opened))


def test_waiting_past_the_timeout_raises_pool_timeout_a_503(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=1, timeout=0.1)
    held, _ = pool.connect()
    started = time.monotonic()
    with pytest.raises(PoolTimeout) as caught:
        pool.connect()
    assert 0.09 <= time.monotonic() - started < 1.0
    assert caught.value.status == 503
    assert caught.value.headers == {"Retry-After": "1"}
    assert pool.stats().timeouts == 1
    pool.release(held)
    pool.release(pool.connect()[0])  # the slot came back


def test_a_waiter_gets_the_connection_as_soon_as_it_is_released(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=1, timeout=5)
    held, _ = pool.connect()
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pool.connect()[0]))
    waiter.start()
    time.sleep(0.05)
    assert not got and pool.stats().waiting == 1
    pool.release(held)
    waiter.join(2)
    assert got == [held]


def test_a_connection_that_fails_to_reset_is_discarded_and_its_slot_freed(
    recipe: FakeRecipe,
) -> None:
    pool = BoundedPool(recipe, size=1, timeout=0.2)
    con, _ = pool.connect()
    recipe.fail_reset = True
    pool.release(con)  # no error reaches the caller: the session already ended
    assert con.closed
    recipe.fail_reset = False
    fresh, is_new = pool.connect()
    assert is_new and fresh is not con


def test_drop_closes_and_frees_the_slot(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=1, timeout=0.2)
    con, _ = pool.connect()
    pool.drop(con)
    assert con.closed
    assert pool.connect()[0] is not con


def test_an_idle_connection_found_closed_is_replaced(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=1, timeout=0.2)
    con, _ = pool.connect()
    pool.release(con)
    con.closed = True  # e.g. the server closed it while idle
    fresh, is_new = pool.connect()
    assert is_new and fresh is not con
    assert pool.stats().opened == 1


def test_a_recipe_that_cannot_check_hands_idle_connections_out_unchecked(
    recipe: FakeRecipe,
) -> None:
    recipe.check_usable = False  # type: ignore[attr-defined]  # as SQLite's recipe says
    recipe.usable = lambda con: pytest.fail("usable() called")  # type: ignore[method-assign]
    pool = BoundedPool(recipe, size=1, timeout=0.2)
    con, _ = pool.connect()
    pool.release(con)
    again, is_new = pool.connect()
    assert again is con and not is_new
    assert pool.stats() == pool_module.PoolStats(1, 1, 0, 0, 1, 1, 0)


def test_a_recipe_whose_check_is_the_closed_flag_is_checked_by_the_pool_itself(
    recipe: FakeRecipe,
) -> None:
    recipe.usable_unless_closed = True  # type: ignore[attr-defined]  # as PostgreSQL's says
    recipe.usable = lambda con: pytest.fail("usable() called")  # type: ignore[method-assign]
    pool = BoundedPool(recipe, size=1, timeout=0.2)
    con, _ = pool.connect()
    pool.release(con)
    again, is_new = pool.connect()
    assert again is con and not is_new
    pool.release(con)
    con.closed = True  # the server closed it while idle: replaced, through `usable` again
    recipe.usable = lambda con: not con.closed  # type: ignore[method-assign]
    fresh, is_new = pool.connect()
    assert is_new and fresh is not con
    assert pool.stats().opened == 1


def test_a_recipe_whose_reset_is_a_rollback_is_rolled_back_by_the_pool_itself(
    recipe: FakeRecipe,
) -> None:
    recipe.reset_is_rollback = True  # type: ignore[attr-defined]  # as Pony's recipes say
    recipe.reset = lambda con: pytest.fail("reset() called")  # type: ignore[method-assign]
    rollbacks: list[FakeConnection] = []
    pool = BoundedPool(recipe, size=1, timeout=0.2)
    con, _ = pool.connect()
    con.rollback = lambda: rollbacks.append(con)  # type: ignore[attr-defined]
    pool.release(con)
    assert rollbacks == [con]
    assert pool.connect()[0] is con

    def server_gone() -> None:
        raise RuntimeError("server went away")

    con.rollback = server_gone  # type: ignore[attr-defined]
    pool.release(con)  # a failed rollback discards the connection, as a failed reset does
    assert con.closed and pool.stats().idle == 0


def test_only_recipes_with_ponys_reset_say_it_is_a_rollback() -> None:
    from socketify.db.providers.base import PonyRecipe
    from socketify.db.providers.postgres import PostgresRecipe
    from socketify.db.providers.sqlite import SQLiteRecipe

    class Resetting(PonyRecipe):
        def reset(self, con: Any) -> None:
            con.execute("DISCARD ALL")

    assert PonyRecipe.reset_is_rollback and SQLiteRecipe.reset_is_rollback
    assert PostgresRecipe.reset_is_rollback
    assert not Resetting.reset_is_rollback


def test_a_postgres_connection_closed_while_idle_is_replaced(pg_url: str) -> None:
    db = socketify.db.connect(pg_url, pool_size=1)
    with db_session:
        con = db.get_connection()
    con.close()  # e.g. the server ended the session while the connection sat idle
    with db_session:
        assert db.get_connection() is not con
    assert db.pool_stats().opened == 1
    db.disconnect()


def test_a_failed_open_is_a_503_and_does_not_leak_the_slot(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=1, timeout=0.1)
    recipe.fail_open = ConnectionRefusedError("connection refused")
    with pytest.raises(DatabaseUnavailable, match="cannot connect to the database"):
        pool.connect()
    recipe.fail_open = None
    pool.release(pool.connect()[0])


def test_releasing_twice_does_not_create_a_slot(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=1, timeout=0.1)
    con, _ = pool.connect()
    pool.release(con)
    pool.release(con)  # ignored: not checked out
    held, _ = pool.connect()
    with pytest.raises(PoolTimeout):
        pool.connect()
    pool.release(held)


def test_after_fork_inherited_connections_are_neither_reused_nor_closed(
    recipe: FakeRecipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = BoundedPool(recipe, size=1, timeout=0.1)
    parent_con, _ = pool.connect()
    pool.release(parent_con)
    monkeypatch.setattr(pool_module, "_pid", -12345)  # "we are the child now"
    child_con, is_new = pool.connect()
    assert is_new and child_con is not parent_con
    assert not parent_con.closed  # closing it would end the parent's server session
    assert parent_con in pool_module._inherited
    pool_module._inherited.remove(parent_con)


def test_a_forked_child_knows_its_own_pid_without_asking_per_checkout() -> None:
    """The pool compares a pid noted at fork time; the child must note its own."""
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the pool's idea of the pid is right
        os._exit(0 if pool_module._pid == os.getpid() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert pool_module._pid == os.getpid()


def test_close_idle_closes_only_idle_connections(recipe: FakeRecipe) -> None:
    pool = BoundedPool(recipe, size=2, timeout=0.1)
    busy, _ = pool.connect()
    idle, _ = pool.connect()
    pool.release(idle)
    assert pool.close_idle() == 1
    assert idle.closed and not busy.closed
    pool.release(busy)


@pytest.mark.parametrize(("size", "timeout"), [(0, 1.0), (1, -1.0)])
def test_invalid_settings_are_refused(size: int, timeout: float, recipe: FakeRecipe) -> None:
    with pytest.raises(ValueError):
        BoundedPool(recipe, size=size, timeout=timeout)
