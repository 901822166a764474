"""The per-request path of a read: one statement on the wire, and the shortcuts the providers
take around Pony's decorators still behave as Pony does (modes, commits, error types)."""

from __future__ import annotations

from typing import Any

import pytest
from db_models import define
from db_support import pg_admin
from pony.orm import db_session
from pony.orm.dbapiprovider import DBException, IntegrityError

import socketify.db
from socketify import Request, Response, Server
from socketify.testing import TestClient


def user_app(url: str) -> tuple[TestClient, Any, Any]:
    """GET /users/:id through the middleware, one pooled connection; user 1 exists."""
    db = socketify.db.connect(url, pool_size=1)
    m = define(db)
    with db_session:
        m.User(id=1, name="Ann", email="ann@x")
    server = Server()
    server.use(socketify.db.middleware(db))

    @server.get("/users/:id")
    def get_user(req: Request, res: Response) -> None:
        user = m.User[int(req.params["id"])]
        res.json({"id": user.id, "name": user.name})

    return TestClient(server), db, m


def test_a_read_only_request_sends_only_its_select_on_sqlite(sqlite_url: str) -> None:
    client, db, _ = user_app(sqlite_url)
    with db_session:
        con = db.get_connection()  # the pool's only connection: every request gets it
    statements: list[str] = []
    con.set_trace_callback(statements.append)
    for _ in range(3):
        assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    con.set_trace_callback(None)
    # No BEGIN, COMMIT or ROLLBACK: a read runs in autocommit mode and ends without a trip.
    assert len(statements) == 3
    assert all(s.lstrip().upper().startswith("SELECT") for s in statements), statements
    db.disconnect()


def test_a_read_only_request_leaves_its_select_as_the_last_statement_on_postgres(
    pg_url: str,
) -> None:
    client, db, _ = user_app(pg_url)
    application_name = pg_url.rpartition("application_name=")[2]
    admin = pg_admin()
    for _ in range(3):
        assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT state, query FROM pg_stat_activity WHERE application_name = %s",
                (application_name,),
            )
            ((state, query),) = cursor.fetchall()
        # `query` is the backend's most recent statement: a COMMIT, ROLLBACK or DISCARD sent
        # after the SELECT would show there, and an open transaction as "idle in transaction".
        assert state == "idle"
        assert query.lstrip().upper().startswith("SELECT"), query
    admin.close()
    db.disconnect()


def test_reads_then_writes_in_one_session_are_committed(any_url: str) -> None:
    """A session starts in read mode and switches to a transaction at its first write."""
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)
    for name in ("Ann", "Bob"):
        with db_session:
            assert m.User.get(name=name) is None  # read first, on the pooled connection
            m.User(name=name, email=f"{name}@x")
    with db_session:
        assert sorted(u.name for u in m.User.select()) == ["Ann", "Bob"]
    db.disconnect()


def test_a_read_after_a_rolled_back_write_sees_the_database_as_it_was(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)
    with pytest.raises(RuntimeError), db_session:
        m.User(name="Ghost", email="ghost@x")
        m.User.select().count()  # flushed: the INSERT ran inside the transaction
        raise RuntimeError("roll back")
    with db_session:  # same connection, now reading in autocommit mode
        assert m.User.select().count() == 0
    db.disconnect()


def test_driver_errors_in_statements_become_pony_errors(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)
    table = db.provider.quote_name(m.User._table_)
    with pytest.raises(DBException) as bad_sql, db_session:
        db.select("SELECT no_such_column FROM " + table)
    assert type(bad_sql.value.original_exc).__module__.split(".")[0] in (
        "sqlite3",
        "psycopg2",
        "pymysql",
    )
    with db_session:
        m.User(name="Ann", email="a@x")
    with pytest.raises(IntegrityError), db_session:
        db.execute(f"INSERT INTO {table} (name, email) VALUES ('Bob', 'a@x')")
    db.disconnect()
