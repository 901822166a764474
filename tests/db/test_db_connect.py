"""`socketify.db.connect` on SQLite, PostgreSQL and MariaDB: Pony's models, relations, hooks,
validations and transactions through the bounded pool; per-dialect set-up."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pony.orm import TransactionIntegrityError, commit, db_session, rollback

import socketify.db
from socketify.db import PoolTimeout
from tests.db.db_models import define
from tests.db.db_support import pg_admin

pytestmark = pytest.mark.usefixtures("fast_path")


def test_models_relations_and_hooks_work_on_every_engine(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=2)
    m = define(db)
    with db_session:
        ann = m.User(name="Ann", email="Ann@Example.COM", age=30)
        m.Todo(title="write tests", owner=ann)
        m.Todo(title="ship", owner=ann)
    with db_session:
        ann = m.User.get(email="ann@example.com")  # before_insert lower-cased it
        assert sorted(todo.title for todo in ann.todos) == ["ship", "write tests"]
        todo = m.Todo.get(title="ship")
        assert todo.owner.name == "Ann"
        todo.done = True
    with db_session:
        assert m.Todo.get(title="ship").revision == 2  # before_update ran once
    assert ("after_insert", "ship") in m.events
    assert ("after_update", "ship") in m.events
    db.disconnect()


def test_validation_errors_come_from_attribute_checks(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)
    with db_session:
        ann = m.User(name="Ann", email="a@x")
    for bad in (
        lambda: m.User(name="x" * 41, email="b@x"),
        lambda: m.User(name="Bob", email="b@x", age=151),
        lambda: m.Todo(title="   ", owner=ann.id),
    ):
        with pytest.raises(ValueError), db_session:
            bad()
    db.disconnect()


def test_an_exception_rolls_the_whole_session_back(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)
    with pytest.raises(RuntimeError), db_session:
        m.User(name="Ann", email="a@x")
        m.User.select().count()  # flushes: the INSERT reached the database
        raise RuntimeError("handler failed")
    with db_session:
        assert m.User.select().count() == 0
        m.User(name="Ann", email="a@x")
        commit()
        m.User(name="Bob", email="b@x")
        rollback()
    with db_session:
        assert [u.name for u in m.User.select()] == ["Ann"]
    db.disconnect()


def test_a_unique_violation_in_the_database_is_an_integrity_error(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)
    with db_session:
        m.User(name="Ann", email="a@x")
    with pytest.raises(TransactionIntegrityError), db_session:
        m.User(name="Other", email="a@x")
    db.disconnect()


def test_a_session_returns_its_connection_to_the_pool(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=2)
    m = define(db)
    with db_session:
        m.User.select().count()
        assert db.pool_stats().in_use == 1
    stats = db.pool_stats()
    assert (stats.in_use, stats.idle) == (0, 1)
    db.disconnect()
    assert db.pool_stats().idle == 0


def test_nested_sessions_share_one_connection_so_pool_size_one_cannot_deadlock(
    sqlite_url: str,
) -> None:
    db = socketify.db.connect(sqlite_url, pool_size=1, pool_timeout=0.5)
    m = define(db)
    with db_session:
        m.User(name="Ann", email="a@x")
        with db_session:  # Pony joins the outer session: no second connection
            assert m.User.select().count() == 1
    db.disconnect()


def test_threads_beyond_pool_size_wait_then_time_out(sqlite_url: str) -> None:
    db = socketify.db.connect(sqlite_url, pool_size=1, pool_timeout=0.2)
    m = define(db)
    holding = threading.Event()
    done = threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        with db_session:
            m.User.select().count()
            holding.set()
            done.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(5)
    try:
        with db_session:
            m.User.select().count()
    except PoolTimeout as exc:
        errors.append(exc)
    done.set()
    holder.join()
    assert len(errors) == 1
    db.disconnect()


def test_sqlite_runs_wal_with_foreign_keys_and_a_busy_timeout(sqlite_url: str) -> None:
    db = socketify.db.connect(sqlite_url + "?timeout=3")
    define(db)
    with db_session:
        con = db.get_connection()
        pragma = {
            name: con.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")
        }
    assert pragma == {
        "journal_mode": "wal",
        "foreign_keys": 1,
        "busy_timeout": 3000,
        "synchronous": 1,
    }
    db.disconnect()


def test_two_memory_databases_are_separate() -> None:
    first = socketify.db.connect("sqlite://")
    second = socketify.db.connect("sqlite://")
    m1 = define(first)
    m2 = define(second)
    with db_session:
        m1.User(name="Ann", email="a@x")
    with db_session:
        assert m1.User.select().count() == 1
        assert m2.User.select().count() == 0


def test_a_memory_database_survives_its_connections_being_closed() -> None:
    db = socketify.db.connect("sqlite://")
    m = define(db)
    with db_session:
        m.User(name="Ann", email="a@x")
    db.pool.close_idle()
    with db_session:
        assert m.User.select().count() == 1


def test_postgres_schema_from_the_url_holds_the_tables(pg_url: str) -> None:
    db = socketify.db.connect(pg_url)
    define(db)
    schema = pg_url.split("schema=")[1].split("&")[0]
    admin: Any = pg_admin()
    with admin.cursor() as cursor:
        cursor.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'user'"
        )
        assert (schema,) in cursor.fetchall()
    admin.close()
    db.disconnect()


def test_postgres_connection_killed_by_the_server_is_replaced_transparently(
    pg_url: str,
) -> None:
    db = socketify.db.connect(pg_url, pool_size=1)
    m = define(db)
    with db_session:
        before = db.select("SELECT pg_backend_pid()")[0]
    admin: Any = pg_admin()
    with admin.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", (before,))
    admin.close()
    with db_session:  # the pool hands out the dead connection; Pony reconnects, pool recycles
        after = db.select("SELECT pg_backend_pid()")[0]
        assert m.User.select().count() == 0
    assert after != before
    assert db.pool_stats().opened == 1
    db.disconnect()


def test_postgres_failed_statement_does_not_poison_the_pooled_connection(pg_url: str) -> None:
    db = socketify.db.connect(pg_url, pool_size=1)
    m = define(db)
    with pytest.raises(Exception, match="no_such_table"), db_session:
        db.select("SELECT * FROM no_such_table")
    with db_session:
        assert m.User.select().count() == 0
    db.disconnect()


def test_on_connect_hooks_run_once_per_new_connection_and_a_failing_one_frees_its_slot(
    sqlite_url: str,
) -> None:
    db = socketify.db.connect(sqlite_url, pool_size=1, pool_timeout=0.2)
    seen: list[int] = []
    fail = [True]

    @db.on_connect(provider="sqlite")
    def setup(database: Any, connection: Any) -> None:
        seen.append(id(connection))
        if fail[0]:
            raise RuntimeError("hook failed")

    m = define(db)
    db.pool.close_idle()
    with pytest.raises(RuntimeError, match="hook failed"), db_session:
        m.User.select().count()
    fail[0] = False
    for _ in range(3):  # the slot came back; the hook runs for the new connection only
        with db_session:
            m.User.select().count()
    assert len(seen) == 2
    db.disconnect()


def test_on_connect_hooks_run_for_a_connection_the_primary_key_read_opens(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1, pool_timeout=0.2)
    seen: list[int] = []
    fail = [False]

    @db.on_connect()
    def setup(database: Any, connection: Any) -> None:
        seen.append(id(connection))
        if fail[0]:
            raise RuntimeError("hook failed")

    m = define(db)
    with db_session:
        m.User(name="Ann", email="a@x")
    db.pool.close_idle()
    seen.clear()
    fail[0] = True
    # `User[1]` takes the compiled loader's way to the pool (socketify.db.fastload).
    with pytest.raises(RuntimeError, match="hook failed"), db_session:
        m.User[1]
    fail[0] = False
    for _ in range(3):  # the failed connection's slot came back; one new connection since
        with db_session:
            assert m.User[1].name == "Ann"
    assert len(seen) == 2
    assert db.pool_stats().in_use == 0
    db.disconnect()
