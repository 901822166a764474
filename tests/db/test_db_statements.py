"""`db.statement(sql)`: raw SQL with `$n` parameters, rows as tuples, Pony's session rules."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from pony.orm import TransactionError, db_session
from pony.orm.core import IntegrityError
from pony.orm.dbapiprovider import DataError

import socketify.db
from tests.db.db_models import define

pytestmark = pytest.mark.usefixtures("fast_path")


def users_table(db: Any) -> str:
    """The quoted table Pony mapped `User` to (its name differs by dialect)."""
    return str(db.provider.quote_name(db.entities["User"]._table_))


def seeded(url: str, pool_size: int = 2) -> tuple[Any, Any]:
    db = socketify.db.connect(url, pool_size=pool_size)
    m = define(db)
    with db_session:
        m.User(name="Ann", email="ann@x", age=30)
        m.User(name="Bob", email="bob@x", age=40)
    return db, m


def test_one_and_all_return_tuples_and_one_returns_none_without_a_row(any_url: str) -> None:
    db, _ = seeded(any_url)
    by_id = db.statement(f"SELECT id, name, age FROM {users_table(db)} WHERE id = $1")
    older = db.statement(f"SELECT name FROM {users_table(db)} WHERE age > $1 ORDER BY id")
    with db_session:
        assert by_id.one(1) == (1, "Ann", 30)
        assert by_id.one(99) is None
        assert older.all(10) == [("Ann",), ("Bob",)]
        assert older.all(35) == [("Bob",)]
        assert by_id.one(2) == (2, "Bob", 40)  # again: the prepared form on PostgreSQL
    assert db.pool_stats().in_use == 0
    db.disconnect()


def test_values_are_never_spliced_into_the_sql(any_url: str) -> None:
    db, _ = seeded(any_url)
    by_name = db.statement(f"SELECT id FROM {users_table(db)} WHERE name = $1")
    with db_session:
        assert by_name.all("x' OR '1'='1") == []
        assert by_name.all("Ann") == [(1,)]
    db.disconnect()


def test_a_parameter_may_appear_twice_and_out_of_order_beside_a_literal_percent(
    any_url: str,
) -> None:
    db, _ = seeded(any_url)
    query = db.statement(
        f"SELECT id FROM {users_table(db)}"
        " WHERE (name = $2 OR email = $2) AND age >= $1 AND email LIKE '%@x'"
    )
    with db_session:
        assert query.all(20, "Bob") == [(2,)]
        assert query.all(50, "Bob") == []
    db.disconnect()


def test_a_write_commits_with_the_session_and_rolls_back_when_it_fails(any_url: str) -> None:
    db, m = seeded(any_url)
    rename = db.statement(f"UPDATE {users_table(db)} SET name = $2 WHERE id = $1")
    with db_session:
        assert rename.run(1, "Anna") == 1
    with pytest.raises(LookupError), db_session:
        rename.run(2, "Robert")
        raise LookupError("the handler failed after writing")
    with db_session:
        assert [u.name for u in m.User.select().order_by(m.User.id)] == ["Anna", "Bob"]
    db.disconnect()


def test_run_many_runs_the_statement_once_per_row_in_the_session(any_url: str) -> None:
    db, m = seeded(any_url)
    set_age = db.statement(f"UPDATE {users_table(db)} SET age = $2 WHERE id = $1")
    with db_session:
        set_age.run_many([(1, 31), (2, 41)], page_size=1)
        set_age.run_many([])
    with db_session:
        assert [(u.id, u.age) for u in m.User.select().order_by(m.User.id)] == [(1, 31), (2, 41)]
    with pytest.raises(LookupError), db_session:
        set_age.run_many([(1, 99), (2, 99)])
        raise LookupError("rolled back")
    with db_session:
        assert m.User[1].age == 31
    db.disconnect()


def test_a_read_sees_what_the_session_changed_through_entities(any_url: str) -> None:
    db, m = seeded(any_url)
    by_id = db.statement(f"SELECT name FROM {users_table(db)} WHERE id = $1")
    with db_session:
        m.User[1].name = "Changed"
        m.User(name="Cid", email="cid@x")
        assert by_id.one(1) == ("Changed",)  # Pony flushed the session's changes first
        assert by_id.one(3) == ("Cid",)
    with db_session:
        assert by_id.one(1) == ("Changed",)
    db.disconnect()


def test_a_driver_error_is_raised_as_pony_error(any_url: str) -> None:
    db, _ = seeded(any_url)
    steal_email = db.statement(f"UPDATE {users_table(db)} SET email = $1 WHERE id = $2")
    with pytest.raises(IntegrityError), db_session:
        steal_email.run("bob@x", 1)
    db.disconnect()


def test_outside_a_db_session_a_statement_raises_transaction_error(sqlite_url: str) -> None:
    db, _ = seeded(sqlite_url)
    by_id = db.statement(f"SELECT name FROM {users_table(db)} WHERE id = $1")
    with pytest.raises(TransactionError):
        by_id.one(1)
    db.disconnect()


def test_wrong_numbering_and_wrong_value_counts_are_refused(sqlite_url: str) -> None:
    db, _ = seeded(sqlite_url)
    with pytest.raises(ValueError, match="without gaps"):
        db.statement("SELECT $1, $3")
    pair = db.statement("SELECT $1, $2")
    with db_session, pytest.raises(TypeError, match="takes 2 values"):
        pair.one(1)
    db.disconnect()


def test_postgres_prepares_a_statement_once_per_connection(pg_url: str) -> None:
    db, _ = seeded(pg_url, pool_size=1)
    by_id = db.statement(f"SELECT name FROM {users_table(db)} WHERE id = $1")
    prepared = db.statement(
        "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'socketify_s_%'"
    )
    with db_session:
        for _ in range(3):
            assert by_id.one(1) == ("Ann",)
        # by_id and this count itself, on the pool's one connection
        assert prepared.one() == (2,)
    db.disconnect()


def test_a_statement_the_server_will_not_prepare_runs_as_text(pg_url: str) -> None:
    db, _ = seeded(pg_url, pool_size=1)
    # PREPARE refuses a parameter whose type it cannot infer; as text, psycopg2 fills it in.
    untyped = db.statement("SELECT $1 IS NULL")
    with db_session:
        assert untyped.one(None) == (True,)
        assert untyped.one(1) == (False,)
    db.disconnect()


def test_one_each_answers_each_row_of_values_in_order(any_url: str) -> None:
    db, _ = seeded(any_url)
    by_id = db.statement(f"SELECT id, name FROM {users_table(db)} WHERE id = $1")
    with db_session:
        assert by_id.one_each([(2,), (99,), (1,)]) == [(2, "Bob"), None, (1, "Ann")]
        assert by_id.one_each([]) == []
    with db_session:
        by_id.one(1)  # the session holds a connection now: one by one on it
        assert by_id.one_each([(1,), (2,)]) == [(1, "Ann"), (2, "Bob")]
    db.disconnect()


def test_one_each_pipelines_on_psycopg3_connections_of_their_own_bounded_pool(
    pg_url: str,
) -> None:
    pytest.importorskip("psycopg", reason="pip install 'psycopg[binary]'")
    db, _ = seeded(pg_url, pool_size=2)
    by_id = db.statement(f"SELECT id, name FROM {users_table(db)} WHERE id = $1")
    with db_session:
        assert by_id.one_each([(1,), (2,)]) == [(1, "Ann"), (2, "Bob")]
    reads = db.pipeline_reads()
    assert reads is not None
    stats = reads.pool.stats()
    assert (stats.size, stats.in_use, stats.opened) == (2, 0, 1)
    db.disconnect()
    assert reads.pool.stats().idle == 0


def test_a_failing_execution_in_a_pipelined_batch_raises_and_the_next_batch_runs(
    pg_url: str,
) -> None:
    pytest.importorskip("psycopg", reason="pip install 'psycopg[binary]'")
    db, _ = seeded(pg_url, pool_size=1)
    ratio = db.statement("SELECT 10 / $1::int")
    with pytest.raises(DataError, match="division by zero"), db_session:
        ratio.one_each([(2,), (0,), (5,)])
    with db_session:
        assert ratio.one_each([(2,), (5,)]) == [(5,), (2,)]
    db.disconnect()


def test_without_psycopg3_one_each_reads_one_by_one_and_says_why_once(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    db, _ = seeded(pg_url)
    by_id = db.statement(f"SELECT name FROM {users_table(db)} WHERE id = $1")
    with db_session:
        assert by_id.one_each([(2,), (1,)]) == [("Bob",), ("Ann",)]
    with db_session:
        assert by_id.one_each([(1,)]) == [("Ann",)]
    assert db.pipeline_reads() is None
    refusals = [r for r in caplog.records if "pipelined reads off" in r.getMessage()]
    assert len(refusals) == 1 and "psycopg 3 is not installed" in refusals[0].getMessage()
    db.disconnect()
