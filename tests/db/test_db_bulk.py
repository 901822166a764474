"""`select_columns` and `update_rows`: many rows of an entity's table in one statement."""

from __future__ import annotations

import pytest
from pony.orm import ObjectNotFound, db_session

import socketify.db
from tests.db.db_models import define

pytestmark = pytest.mark.usefixtures("fast_path")


def test_select_columns_reads_tuples_in_primary_key_order(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=2)
    m = define(db)
    with db_session:
        for name in ("Cid", "Ann", "Bob"):
            m.User(name=name, email=f"{name}@x")
    with db_session:
        assert socketify.db.select_columns(m.User, "id", "name") == [
            (1, "Cid"),
            (2, "Ann"),
            (3, "Bob"),
        ]
        assert socketify.db.select_columns(m.User, "email") == [("cid@x",), ("ann@x",), ("bob@x",)]
    db.disconnect()


def test_update_rows_writes_every_row_in_the_sessions_transaction(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=2)
    m = define(db)
    with db_session:
        for n in range(150):
            m.User(name=f"u{n}", email=f"u{n}@x", age=1)
    with db_session:
        # more rows than one statement carries; a text value lands in an integer column too
        socketify.db.update_rows(
            m.User,
            ["name", "age"],
            [(n + 1, f"v{n}", n % 100) for n in range(149)] + [(150, "last", None)],
        )
    with db_session:
        rows = socketify.db.select_columns(m.User, "id", "name", "age")
        assert rows[:2] == [(1, "v0", 0), (2, "v1", 1)]
        assert rows[100] == (101, "v100", 0)
        assert rows[-1] == (150, "last", None)
    with pytest.raises(LookupError), db_session:
        socketify.db.update_rows(m.User, ["age"], [(1, 77)])
        raise LookupError("rolled back")
    with db_session:
        assert m.User[1].age == 0
    db.disconnect()


def test_update_rows_refuses_rows_of_the_wrong_shape_and_unknown_attributes(
    sqlite_url: str,
) -> None:
    db = socketify.db.connect(sqlite_url)
    m = define(db)
    with db_session:
        with pytest.raises(TypeError, match="primary key, age"):
            socketify.db.update_rows(m.User, ["age"], [(1,)])
        with pytest.raises(AttributeError, match="no attribute 'shoe_size'"):
            socketify.db.update_rows(m.User, ["shoe_size"], [(1, 44)])
        with pytest.raises(ValueError, match="not stored in one column"):
            socketify.db.select_columns(m.User, "todos")
    db.disconnect()


def test_get_columns_reads_each_key_in_the_order_given_and_404s_a_missing_one(
    any_url: str,
) -> None:
    db = socketify.db.connect(any_url, pool_size=2)
    m = define(db)
    with db_session:
        for name in ("Ann", "Bob", "Cid"):
            m.User(name=name, email=f"{name}@x", age=len(name))
    with db_session:
        assert socketify.db.get_columns(m.User, [3, 1, 3], "name", "age") == [
            ("Cid", 3),
            ("Ann", 3),
            ("Cid", 3),
        ]
        assert socketify.db.get_columns(m.User, [], "name") == []
        with pytest.raises(ObjectNotFound):
            socketify.db.get_columns(m.User, [2, 99], "name")
    db.disconnect()
