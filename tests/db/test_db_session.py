"""`run_in_db_session` ends sessions as Pony's `db_session` does: reads release the connection,
writes commit (with hooks), errors roll back, and no session state outlives the call."""

from __future__ import annotations

from typing import Any

import pytest
from pony.orm import core as pony_core
from pony.orm import db_session

import socketify.db
from socketify.db.fastpath.session import run_in_db_session
from tests.db.db_models import define

pytestmark = [pytest.mark.usefixtures("fast_path"), pytest.mark.fast_path_only]


def assert_no_session_left(*databases: Any) -> None:
    state = pony_core.local
    assert state.db_session is None and state.db_context_counter == 0
    assert state.db2cache == {}
    for db in databases:
        assert db.pool_stats().in_use == 0


def test_a_read_releases_its_connection_and_leaves_no_state(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)
    with db_session:
        m.User(name="Ann", email="ann@x")
    assert run_in_db_session(lambda: m.User[1].name) == "Ann"
    assert_no_session_left(db)
    db.disconnect()


def test_writes_commit_with_hooks_and_errors_roll_back(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)

    def create() -> None:
        ann = m.User(name="Ann", email="ANN@X")
        m.Todo(title="write", owner=ann)

    run_in_db_session(create)
    assert_no_session_left(db)
    assert m.events == [("after_insert", "write")]

    def fail_after_writing() -> None:
        m.User[1].name = "Changed"
        m.User(name="Bob", email="bob@x")
        raise LookupError("nope")

    with pytest.raises(LookupError):
        run_in_db_session(fail_after_writing)
    assert_no_session_left(db)
    with db_session:
        assert m.User[1].email == "ann@x"  # before_insert ran
        assert m.User[1].name == "Ann" and m.User.select().count() == 1
    db.disconnect()


def test_two_databases_in_one_session_both_commit(sqlite_url: str, tmp_path: Any) -> None:
    first = socketify.db.connect(sqlite_url, pool_size=1)
    second = socketify.db.connect(f"sqlite:///{tmp_path / 'second.db'}", pool_size=1)
    a, b = define(first), define(second)

    def both() -> None:
        a.User(name="Ann", email="ann@x")
        b.User(name="Bob", email="bob@x")

    run_in_db_session(both)
    assert_no_session_left(first, second)
    with db_session:
        assert a.User[1].name == "Ann" and b.User[1].name == "Bob"
    first.disconnect()
    second.disconnect()


def test_it_refuses_to_run_inside_a_session(sqlite_url: str) -> None:
    db = socketify.db.connect(sqlite_url, pool_size=1)
    define(db)
    with pytest.raises(RuntimeError, match="inside a db_session"), db_session:
        run_in_db_session(lambda: None)
    assert_no_session_left(db)
    db.disconnect()


def detached(cache: Any, objects: list[Any]) -> dict[str, Any]:
    """What a released session leaves on its cache and on the objects it loaded."""
    fields = [
        "objects", "objects_to_save", "saved_objects", "query_results", "indexes", "seeds",
        "for_update", "max_id_cache", "modified_collections", "collection_statistics",
        "dbvals_deduplication_cache", "is_alive", "connection",
    ]  # fmt: skip
    return {
        "cache": {name: getattr(cache, name) for name in fields},
        "objects": [
            (
                type(obj).__name__,
                obj._pkval_,
                obj._dbvals_,
                obj._session_cache_,
                sorted((attr.name, value is None) for attr, value in obj._vals_.items()),
            )
            for obj in objects
        ],
    }


@pytest.mark.parametrize("collection", ["partly loaded", "fully loaded"])
def test_a_read_only_end_releases_the_cache_as_ponys_own_end(any_url: str, collection: str) -> None:
    """The fast end of a read is Pony's commit-and-release, compared field by field (Pony's
    commit also sets `immediate` on the cache it then throws away, which is not compared)."""
    db = socketify.db.connect(any_url, pool_size=1)
    m = define(db)
    with db_session:
        ann = m.User(name="Ann", email="ann@x")
        m.Todo(title="one", owner=ann)
        m.Todo(title="two", owner=ann)

    def read() -> tuple[Any, list[Any]]:
        user = m.User[1]
        todo = m.Todo[1]  # its owner is loaded: Pony adds it to user.todos, not fully loaded
        if collection == "fully loaded":
            assert len(list(user.todos)) == 2
        return pony_core.local.db2cache[db], [user, todo]

    ours = run_in_db_session(read)
    assert_no_session_left(db)
    with db_session:
        theirs = read()
    assert detached(*ours) == detached(*theirs)
    assert ours[1][0]._vals_[m.User.todos] is None if collection == "partly loaded" else True
    db.disconnect()
