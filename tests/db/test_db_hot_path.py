"""The per-request path of a read: one statement on the wire, with the fast path and without,
and the fast path's shortcuts around Pony's decorators still behave as Pony does (modes,
commits, error types); the PostgreSQL prepared reads are the fast path's own."""

from __future__ import annotations

from typing import Any

import pytest
from pony.orm import ObjectNotFound, db_session
from pony.orm.dbapiprovider import DBException, IntegrityError

import socketify.db
from socketify import Request, Response, Server
from socketify.db.fastpath.loader import loader_for
from socketify.testing import TestClient
from tests.db.db_models import define
from tests.db.db_support import pg_admin

pytestmark = pytest.mark.usefixtures("fast_path")


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


def test_a_read_only_request_leaves_its_read_as_the_last_statement_on_postgres(
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
        # The SELECT, prepared once per connection: the first request may show its PREPARE.
        assert query.lstrip().upper().startswith(("SELECT", "EXECUTE", "PREPARE")), query
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


@pytest.mark.fast_path_only
def test_postgres_reads_by_key_run_as_a_statement_prepared_once_per_connection(
    pg_url: str,
) -> None:
    client, db, _ = user_app(pg_url)
    for _ in range(3):
        assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    assert client.get("/users/2").status == 404
    with db_session:
        con = db.get_connection()
        cursor = con.cursor()
        cursor.execute("SELECT name, statement FROM pg_prepared_statements")
        ((name, statement),) = cursor.fetchall()
    assert con.prepared_statements == {name}
    assert "$1" in statement and statement.upper().startswith("PREPARE")
    assert "WHERE" in db.last_sql and "%(" in db.last_sql  # the statistics show the SELECT
    assert db.pool_stats().opened == 1
    db.disconnect()


@pytest.mark.fast_path_only
@pytest.mark.parametrize("change", ["statements dropped", "result type changed"])
def test_postgres_reads_fall_back_to_text_when_the_prepared_statement_fails(
    pg_url: str, change: str
) -> None:
    """A pooler that forgets prepared statements, or a migration that changes the result's
    type: the read still answers, as plain text, and the prepared path is switched off."""
    client, db, m = user_app(pg_url)
    assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    with db_session:
        cursor = db.get_connection().cursor()
        if change == "statements dropped":
            cursor.execute("DEALLOCATE ALL")
        else:
            table = db.provider.quote_name(m.User._table_)
            cursor.execute(f"ALTER TABLE {table} ALTER COLUMN name TYPE VARCHAR(60)")
            cursor.connection.commit()
    for _ in range(2):
        assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    assert client.get("/users/2").status == 404
    loader = loader_for(m.User)
    assert loader is not None and loader.prepared is not None and not loader.prepared.enabled
    assert db.pool_stats().in_use == 0
    db.disconnect()


@pytest.mark.fast_path_only
def test_postgres_reads_keep_preparing_after_the_server_dropped_the_connection(
    pg_url: str,
) -> None:
    """A lost connection is not the statement's fault: the read reconnects, as Pony would,
    and the statement is prepared again on the new connection."""
    client, db, m = user_app(pg_url)
    assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    admin = pg_admin()
    with admin.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (pg_url.rpartition("application_name=")[2],),
        )
    admin.close()
    for _ in range(2):
        assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    loader = loader_for(m.User)
    assert loader is not None and loader.prepared is not None and loader.prepared.enabled
    with db_session:
        assert db.get_connection().prepared_statements == {loader.prepared.name}
    db.disconnect()


@pytest.mark.fast_path_only
def test_postgres_get_row_reads_through_the_prepared_statement_too(pg_url: str) -> None:
    _, db, m = user_app(pg_url)
    loader = loader_for(m.User)
    assert loader is not None and loader.prepared is not None
    for _ in range(2):
        with db_session:
            row = socketify.db.get_row(m.User, 1)
            assert row == {"id": 1, "name": "Ann", "email": "ann@x", "age": None}
    with db_session:
        assert db.get_connection().prepared_statements == {loader.prepared.name}
        with pytest.raises(ObjectNotFound):
            socketify.db.get_row(m.User, 2)
    assert loader.prepared.enabled and db.pool_stats().in_use == 0
    db.disconnect()


@pytest.mark.fast_path_only
def test_prepared_statement_names_follow_their_text_never_a_counter() -> None:
    # Behind a pooler that moves server connections between clients, a name must always
    # stand for the same statement, whoever prepared it.
    from socketify.db.fastpath.pg_prepared import PreparedSelect

    sql = 'SELECT "id", "name" FROM "user" WHERE "id" = %(p1)s'
    first = PreparedSelect.for_statement(sql, "p1")
    again = PreparedSelect.for_statement(sql, "p1")
    other = PreparedSelect.for_statement(sql.replace('"user"', '"team"'), "p1")
    assert first is not None and again is not None and other is not None
    assert first.name == again.name != other.name
    assert (
        first.prepare_sql
        == f'PREPARE {first.name} AS SELECT "id", "name" FROM "user" WHERE "id" = $1'
    )
    assert PreparedSelect.for_statement(sql + " AND x LIKE '%%'", "p1") is None


@pytest.mark.fast_path_only
def test_a_key_read_after_a_write_on_the_same_postgres_connection_reads_in_autocommit(
    pg_url: str,
) -> None:
    """The loader's own `prepare_read` step: the write left the connection out of autocommit."""
    db = socketify.db.connect(pg_url, pool_size=1)
    m = define(db)
    with db_session:
        m.User(id=1, name="Ann", email="a@x")  # a transaction: autocommit switched off
    con, _ = db.pool.connect()  # the pool's only connection, as the write left it
    assert not con.autocommit
    db.pool.release(con)
    assert loader_for(m.User).prepare_read is not None  # type: ignore[union-attr]
    with db_session:
        assert m.User[1].name == "Ann"
        assert db._get_cache().connection is con
        assert con.autocommit  # the read ran outside any transaction
    db.disconnect()


@pytest.mark.fast_path_only
def test_sqlite_key_reads_skip_the_read_preparation_that_has_nothing_to_do(
    sqlite_url: str,
) -> None:
    db = socketify.db.connect(sqlite_url, pool_size=1)
    m = define(db)
    assert loader_for(m.User).prepare_read is None  # type: ignore[union-attr]
    db.disconnect()


@pytest.mark.fast_path_only
def test_postgres_key_reads_reuse_one_cursor_per_connection_until_it_closes(
    pg_url: str,
) -> None:
    client, db, _ = user_app(pg_url)
    assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    con, _ = db.pool.connect()  # the pool's only connection
    cursor = con.key_read_cursor
    db.pool.release(con)
    assert cursor is not None and not cursor.closed
    for _ in range(3):
        assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    assert client.get("/users/2").status == 404  # a miss leaves the cursor usable
    assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}
    assert con.key_read_cursor is cursor
    db.pool.close_idle()
    assert con.closed and con.key_read_cursor is None  # no connection-cursor cycle left
    assert client.get("/users/1").json() == {"id": 1, "name": "Ann"}  # a new connection
    db.disconnect()


@pytest.mark.fast_path_only
def test_prepared_queries_number_named_parameters_by_first_appearance() -> None:
    from socketify.db.fastpath.pg_prepared import PreparedQuery

    query = PreparedQuery.for_statement(
        "SELECT a FROM t WHERE b = %(p2)s OR c = %(p1)s OR d = %(p2)s"
    )
    assert query is not None and query.name.startswith("socketify_q_")
    assert query.prepare_sql == (
        f"PREPARE {query.name} AS SELECT a FROM t WHERE b = $1 OR c = $2 OR d = $1"
    )
    assert query.execute_sql == f"EXECUTE {query.name}(%(p2)s, %(p1)s)"
    plain = PreparedQuery.for_statement('SELECT "f"."id" FROM "fortune" "f"')
    assert plain is not None and plain.execute_sql == f"EXECUTE {plain.name}"
    # Writes, positional parameters and literal percent signs stay text.
    assert PreparedQuery.for_statement("UPDATE t SET a = %(p1)s") is None
    assert PreparedQuery.for_statement("SELECT a FROM t WHERE b = %s") is None
    assert PreparedQuery.for_statement("SELECT a FROM t WHERE b LIKE 'x%%'") is None


@pytest.mark.fast_path_only
def test_a_query_text_is_prepared_only_once_it_repeats() -> None:
    from socketify.db.fastpath.pg_prepared import prepared_query

    sql = f"SELECT a FROM t WHERE b = %(p1)s -- {id(object())}"
    assert prepared_query(sql) is None  # seen once: SQL with inlined values never repeats
    again = prepared_query(sql)
    assert again is not None and prepared_query(sql) is again


@pytest.mark.fast_path_only
def test_postgres_raw_and_query_reads_run_prepared_once_their_text_repeats(pg_url: str) -> None:
    db = socketify.db.connect(pg_url, pool_size=1)
    m = define(db)
    with db_session:
        m.User(id=1, name="Ann", email="ann@x")
        m.User(id=2, name="Bob", email="bob@x")
    table = db.provider.quote_name(m.User._table_)
    read = f"SELECT id, name FROM {table} WHERE id = $user_id"
    for _ in range(3):
        for user_id, name in ((1, "Ann"), (2, "Bob")):
            with db_session:
                row = db.get(read, {"user_id": user_id})
                assert (row.id, row.name) == (user_id, name)
                assert sorted(u.name for u in m.User.select()) == ["Ann", "Bob"]
    with db_session:
        assert db.get("SELECT $value AS v", {"value": "x"}) == "x"
        assert db.get("SELECT $value AS v", {"value": "y"}) == "y"
        con = db.get_connection()
        cursor = con.cursor()
        cursor.execute(
            "SELECT statement FROM pg_prepared_statements WHERE name LIKE 'socketify_q_%%'"
        )
        statements = [statement for (statement,) in cursor.fetchall()]
        # A pooler that forgets prepared statements: the read still answers, as text.
        cursor.execute("DEALLOCATE ALL")
    with db_session:
        assert db.get(read, {"user_id": 2}).name == "Bob"
    # The raw reads and the entity query.
    assert len(statements) == 3, statements
    assert any("WHERE id = $1" in s for s in statements)
    assert all(s.startswith("PREPARE socketify_q_") for s in statements)
    assert db.pool_stats().in_use == 0
    db.disconnect()
