"""`Entity[pk]` through the compiled loader is Pony's `Entity[pk]`: the same object state, the
same identity map, the same lazy loading, writes, optimistic checks and errors; shapes it
does not handle go to Pony. `get_row` agrees with `Entity[pk].to_dict()`."""

from __future__ import annotations

import datetime
import threading
import uuid
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from pony.orm import (
    Json,
    LongStr,
    ObjectNotFound,
    Optional,
    PrimaryKey,
    Required,
    Set,
    composite_key,
    db_session,
)
from pony.orm import core as pony_core
from pony.orm.core import EntityMeta, OptimisticCheckError
from pony.orm.ormtypes import TrackedValue

import socketify.db
from socketify import Request, Response, Server
from socketify.db.fastpath.loader import ineligibility, loader_for
from socketify.db.fastpath.session import LeanSessionCache
from socketify.testing import TestClient

pytestmark = [pytest.mark.usefixtures("fast_path"), pytest.mark.fast_path_only]

STAMP = datetime.datetime(2024, 5, 17, 13, 45, 12, 345678)


def define_things(db: Any) -> SimpleNamespace:
    """Owner and Thing (every common column type, a foreign key, keys, a lazy attribute)."""

    class Owner(db.Entity):  # type: ignore[name-defined,misc]
        name = Required(str)
        things = Set("Thing")

    class Thing(db.Entity):  # type: ignore[name-defined,misc]
        id = PrimaryKey(int, auto=True)
        label = Required(str, unique=True)
        price = Required(Decimal, precision=10, scale=2)
        created = Required(datetime.datetime, precision=6)
        day = Optional(datetime.date)
        flag = Required(bool)
        ratio = Optional(float)
        data = Optional(Json)
        note = Optional(str, nullable=True)
        uid = Optional(uuid.UUID)
        body = Optional(LongStr, lazy=True)
        owner = Optional(Owner)
        code = Optional(str)
        number = Optional(int)
        composite_key(code, number)

    db.generate_mapping(create_tables=True)
    with db_session:
        ann = Owner(name="Ann")
        Thing(
            label="full", price=Decimal("12.50"), created=STAMP, day=STAMP.date(), flag=True,
            ratio=0.25, data={"tags": ["a", "b"], "n": 1}, note=None,
            uid=uuid.UUID("12345678-1234-5678-1234-567812345678"), body="long text",
            owner=ann, code="c", number=7,
        )  # fmt: skip
        Thing(label="bare", price=Decimal("0.00"), created=STAMP, flag=False)
    return SimpleNamespace(Owner=Owner, Thing=Thing)


@pytest.fixture
def things(any_url: str) -> Any:
    db = socketify.db.connect(any_url, pool_size=2)
    models = define_things(db)
    models.db = db
    yield models
    db.disconnect()


@pytest.fixture
def pony_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the entities Pony's generic path selected from the database."""
    calls: list[str] = []
    original = EntityMeta._find_in_db_

    def spy(cls: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(cls.__name__)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(EntityMeta, "_find_in_db_", spy)
    return calls


def pony_getitem(cls: Any, key: Any) -> Any:
    """`cls[key]` the way Pony itself does it."""
    return EntityMeta.__getitem__(cls, key)


def described(value: Any) -> Any:
    if isinstance(value, pony_core.Entity):
        return ("entity", type(value).__name__, value._pkval_, sorted(a.name for a in value._vals_))
    return (type(value).__name__, value)


def snapshot(obj: Any) -> dict[str, Any]:
    """Everything Pony keeps on an object, values with their types, in Pony's order."""
    return {
        "class": type(obj).__name__,
        "status": obj._status_,
        "pk": obj._pkval_,
        "rbits": obj._rbits_,
        "wbits": obj._wbits_,
        "newid": obj._newid_,
        "save_pos": obj._save_pos_,
        "vals": [(a.name, described(v)) for a, v in obj._vals_.items()],
        "dbvals": [(a.name, described(v)) for a, v in obj._dbvals_.items()],
    }


def cache_snapshot(cache: Any) -> dict[str, Any]:
    """The session cache's identity map, key indexes and seeds, comparable across sessions."""

    def key_name(key: Any) -> str:
        return ",".join(a.name for a in key) if isinstance(key, tuple) else key.name

    def key_value(value: Any) -> Any:
        if isinstance(value, tuple):
            return tuple(key_value(v) for v in value)
        return described(value) if isinstance(value, pony_core.Entity) else value

    return {
        "objects": sorted((type(o).__name__, o._pkval_) for o in cache.objects),
        "indexes": {
            key_name(key): sorted((repr(key_value(k)), o._pkval_) for k, o in index.items())
            for key, index in cache.indexes.items()
            if index
        },
        "seeds": {key_name(k): sorted(o._pkval_ for o in s) for k, s in cache.seeds.items() if s},
    }


def plain_type(value: Any) -> type:
    """The type of `value`, a tracked JSON value counting as the dict or list it wraps."""
    if isinstance(value, TrackedValue):
        return dict if isinstance(value, dict) else list
    return type(value)


def current_cache(db: Any) -> Any:
    return pony_core.local.db2cache[db]


def test_the_loaded_object_is_the_one_pony_builds(things: Any, pony_loads: list[str]) -> None:
    Thing, db = things.Thing, things.db
    assert ineligibility(Thing) is None
    for label in ("full", "bare"):
        with db_session:
            key = Thing.get(label=label).id
        with db_session:
            reference = pony_getitem(Thing, key)
            expected, expected_cache = snapshot(reference), cache_snapshot(current_cache(db))
        pony_loads.clear()
        with db_session:
            fast = Thing[key]
            assert pony_loads == []  # the compiled loader, not Pony's generic path
            assert snapshot(fast) == expected
            assert cache_snapshot(current_cache(db)) == expected_cache
            assert Thing[key] is fast  # the identity map
            assert Thing.get(label=label) is fast
            assert Thing.select(lambda t: t.label == label).first() is fast  # noqa: B023
            assert db.last_sql is not None and "WHERE" in db.last_sql


def test_values_relations_and_lazy_attributes_read_as_with_pony(things: Any) -> None:
    Thing = things.Thing
    with db_session:
        key = Thing.get(label="full").id
    with db_session:
        reference = pony_getitem(Thing, key)
        expected = {
            "values": reference.to_dict(),
            "owner": reference.owner.name,
            "body": reference.body,
            "types": [type(v) for v in reference.to_dict().values()],
        }
    with db_session:
        thing = Thing[key]
        owner = thing._vals_[Thing.owner]
        assert things.Owner.name not in owner._vals_  # a seed: loaded on first use
        assert Thing.body not in thing._vals_  # lazy: not selected
        assert thing.to_dict() == expected["values"]
        assert [type(v) for v in thing.to_dict().values()] == expected["types"]
        assert thing.owner.name == expected["owner"]
        assert thing.body == expected["body"]
        assert thing in thing.owner.things
        assert isinstance(thing.price, Decimal) and isinstance(thing.created, datetime.datetime)
        assert thing.flag is True and thing.note is None and thing.data["tags"] == ["a", "b"]


def test_writes_after_a_fast_read_are_committed_with_hooks(things: Any) -> None:
    Thing = things.Thing
    # Pony's optimistic check of a JSON column it read uses CAST(... AS JSON), which MariaDB
    # rejects whichever way the object was loaded; there only the label changes.
    json_checked = things.db.dialect != "mysql"
    with db_session:
        key = Thing.get(label="full").id
    with db_session:
        thing = Thing[key]
        thing.label = "renamed"
        if json_checked:
            thing.data["tags"].append("c")  # JSON changes are tracked on the loaded value
    with db_session:
        again = Thing[key]
        assert again.label == "renamed"
        assert again.data["tags"] == (["a", "b", "c"] if json_checked else ["a", "b"])
        assert Thing.get(label="full") is None


@pytest.mark.parametrize("load", ["fast", "pony"])
def test_a_concurrent_change_fails_the_optimistic_check(things: Any, load: str) -> None:
    Thing, db = things.Thing, things.db
    with db_session:
        key = Thing.get(label="full").id

    def rename_elsewhere() -> None:
        with db_session:
            Thing[key].label = "theirs"

    with pytest.raises(OptimisticCheckError, match="updated outside"), db_session:
        thing = Thing[key] if load == "fast" else pony_getitem(Thing, key)
        assert thing.label == "full"  # read: now part of the optimistic check
        worker = threading.Thread(target=rename_elsewhere)  # its own session and connection
        worker.start()
        worker.join()
        thing.ratio = 0.5
    with db_session:
        assert Thing[key].label == "theirs" and Thing[key].ratio == 0.25
    assert db.pool_stats().in_use == 0


def test_a_missing_row_is_object_not_found_and_a_404(things: Any) -> None:
    Thing, db = things.Thing, things.db
    with pytest.raises(ObjectNotFound, match=r"Thing\[999\]"), db_session:
        Thing[999]
    server = Server()
    server.use(socketify.db.middleware(db))

    @server.get("/things/:id")
    def get_thing(req: Request, res: Response) -> None:
        res.json({"label": Thing[int(req.params["id"])].label})

    @server.get("/rows/:id")
    def get_thing_row(req: Request, res: Response) -> None:
        res.json({"label": socketify.db.get_row(Thing, int(req.params["id"]))["label"]})

    client = TestClient(server)
    assert client.get("/things/999").status == 404
    assert client.get("/rows/999").status == 404
    assert client.get("/things/1").json() == {"label": "full"}
    assert client.get("/rows/2").json() == {"label": "bare"}
    assert db.pool_stats().in_use == 0


def test_pony_serves_the_session_states_the_loader_leaves_to_it(
    things: Any, pony_loads: list[str]
) -> None:
    Thing = things.Thing
    with db_session:
        thing = Thing[2]
        thing.ratio = 1.5  # unflushed: Pony flushes before its SELECT
        other = Thing[1]
        assert pony_loads == ["Thing"]
        assert Thing[2] is thing and other.id == 1
        assert Thing["1"] is other  # a key Pony converts: validated the same way
    with pytest.raises(ValueError), db_session:
        Thing[-(2**70)]  # out of range: Pony's own error


def test_unsupported_shapes_take_pony_path_with_the_same_answers(any_url: str) -> None:
    db = socketify.db.connect(any_url, pool_size=1)

    class Person(db.Entity):  # type: ignore[name-defined,misc]
        name = Required(str)

    class Student(Person):  # type: ignore[misc]
        school = Required(str)

    class Pair(db.Entity):  # type: ignore[name-defined,misc]
        left = Required(int)
        right = Required(int)
        PrimaryKey(left, right)

    class Checked(db.Entity):  # type: ignore[name-defined,misc]
        code = PrimaryKey(str, py_check=lambda code: code.isupper())

    db.generate_mapping(create_tables=True)
    with db_session:
        Student(name="Bo", school="North")
        Pair(left=1, right=2)
        Checked(code="AB")
    assert ineligibility(Person) == "inheritance"
    assert ineligibility(Pair) == "composite primary key"
    assert ineligibility(Checked) == "the primary key has py_check"
    with db_session:
        bo = Person[1]
        assert type(bo) is Student and bo.school == "North"
        assert Pair[1, 2].right == 2
        assert Checked["AB"].code == "AB"
        assert socketify.db.get_row(Person, 1) == bo.to_dict()  # the subclass's attributes too
    for entity in (Person, Pair, Checked):
        assert loader_for(entity) is None
    db.disconnect()


def test_get_row_agrees_with_to_dict_without_making_objects(
    things: Any, pony_loads: list[str]
) -> None:
    Thing, Owner, db = things.Thing, things.Owner, things.db
    for label in ("full", "bare"):
        with db_session:
            thing = Thing.get(label=label)
            key, expected = thing.id, thing.to_dict()
        pony_loads.clear()
        with db_session:
            row = socketify.db.get_row(Thing, key)  # the session's first use of the database
            assert db not in pony_core.local.db2cache  # no session cache, no object
            assert db.pool_stats().in_use == 0  # the borrowed connection is back already
            Owner[1]  # now the session has a cache: get_row reads through it
            assert socketify.db.get_row(Thing, key) == row
            assert {type(o) for o in current_cache(db).objects} == {Owner}
        assert pony_loads == []
        assert row == expected
        assert [type(v) for v in row.values()] == [plain_type(v) for v in expected.values()]
    with db_session:
        thing = Thing[1]
        thing.label = "changed"  # a loaded, changed object: its own values win
        assert socketify.db.get_row(Thing, 1)["label"] == "changed"
    for first_use in (True, False):
        with pytest.raises(ObjectNotFound, match=r"Thing\[999\]"), db_session:
            if not first_use:
                Owner[1]
            socketify.db.get_row(Thing, 999)
    with pytest.raises(pony_core.TransactionError):
        socketify.db.get_row(Thing, 1)  # outside a db_session, like Thing[1]
    with db_session(immediate=True):  # a transaction from the start: Pony's connection
        assert socketify.db.get_row(Thing, 2)["label"] == "bare"
        assert current_cache(db).in_transaction
    assert db.pool_stats().in_use == 0


def test_the_lean_session_cache_has_every_field_of_ponys(things: Any) -> None:
    db = things.db
    with db_session:
        pony_cache = pony_core.SessionCache(db)
        lean = LeanSessionCache(db, pony_core.local.db_session)
        eager = set(vars(lean))
        made_on_use, defaults = LeanSessionCache._MADE_ON_USE, LeanSessionCache._CLASS_DEFAULTS
        assert eager | set(made_on_use) | set(defaults) == set(vars(pony_cache))
        for name in made_on_use:
            assert type(getattr(lean, name)) is type(getattr(pony_cache, name))
        for name in defaults:  # constants: equal and immutable
            assert getattr(lean, name) == getattr(pony_cache, name)
            assert type(getattr(lean, name)) in (bool, int, type(None))
        with pytest.raises(AttributeError):
            lean.no_such_field  # noqa: B018


def test_query_statistics_count_fast_loads_as_pony_counts_its_own(
    things: Any, pony_loads: list[str]
) -> None:
    Thing, db = things.Thing, things.db
    counted = []
    for load in (pony_getitem, Thing.__class__.__getitem__):
        db.merge_local_stats()  # local statistics start over
        for key in (1, 2, 1):
            with db_session:
                load(Thing, key)
        stats = db.local_stats
        counted.append(
            {
                "last_sql": db.last_sql,
                "counts": {sql: (s.db_count, s.cache_count) for sql, s in stats.items()},
                "ordered": all(s.min_time <= s.sum_time / s.db_count <= s.max_time
                               for s in stats.values()),
            }
        )  # fmt: skip
    assert pony_loads == ["Thing"] * 3  # the first round only: Pony's own path
    assert counted[0] == counted[1]
    assert counted[1]["counts"][None] == (3, 1) and counted[1]["ordered"]


def connection_mode(cache: Any) -> tuple[Any, ...]:
    """The transaction state Pony keeps for a session, and its connection's own."""
    con = cache.connection
    driver_mode = getattr(con, "autocommit", None)
    if driver_mode is None or callable(driver_mode):
        driver_mode = getattr(con, "in_transaction", None)  # sqlite3 before Python 3.12
    return cache.immediate, cache.in_transaction, driver_mode


def test_a_fast_read_leaves_the_session_in_the_mode_pony_would(
    things: Any, pony_loads: list[str]
) -> None:
    """Pony's connect sets the transaction mode per dialect (MySQL marks the session
    immediate, PostgreSQL switches to autocommit): the loader's connect must agree."""
    Thing, db = things.Thing, things.db
    modes = []
    for load in (pony_getitem, Thing.__class__.__getitem__):
        with db_session:
            load(Thing, 1)
            modes.append(connection_mode(current_cache(db)))
            Thing[2]  # a second read on the same connection, through the loader
            modes.append(connection_mode(current_cache(db)))
    assert pony_loads == ["Thing"]
    assert modes[:2] == modes[2:]


def test_an_entity_of_plain_columns_is_built_as_pony_builds_it(
    any_url: str, pony_loads: list[str]
) -> None:
    """The loader's shortcut for entities without relations, keys or converter steps."""
    db = socketify.db.connect(any_url, pool_size=1)

    class Plain(db.Entity):  # type: ignore[name-defined,misc]
        name = Required(str)
        alias = Optional(str)
        score = Optional(float)
        amount = Optional(Decimal, precision=10, scale=2)
        born = Optional(datetime.date)
        seen = Optional(datetime.datetime, precision=6)
        active = Required(bool)
        count = Optional(int)

    db.generate_mapping(create_tables=True)
    with db_session:
        Plain(name="same", alias="same", score=0.5, amount=Decimal("3.10"), born=STAMP.date(),
              seen=STAMP, active=True, count=7)  # fmt: skip
        Plain(name="bare", active=False)
    loader = loader_for(Plain)
    assert loader is not None and loader.plain_columns is not None
    for key in (1, 2):
        with db_session:
            reference = pony_getitem(Plain, key)
            expected, expected_cache = snapshot(reference), cache_snapshot(current_cache(db))
            shared = reference._vals_[Plain.name] is reference._vals_[Plain.alias]
        pony_loads.clear()
        with db_session:
            fast = Plain[key]
            assert pony_loads == []
            assert snapshot(fast) == expected
            assert cache_snapshot(current_cache(db)) == expected_cache
            # Pony's deduplication: equal values read in one session share one object.
            assert (fast._vals_[Plain.name] is fast._vals_[Plain.alias]) == shared
            assert Plain[key] is fast and fast.to_dict() == reference.to_dict()
    db.disconnect()


def test_a_first_read_in_sql_debug_mode_is_ponys(things: Any, pony_loads: list[str]) -> None:
    """Debug mode logs each statement, which Pony does: the loader leaves a new session to it."""
    from pony.orm import set_sql_debug

    set_sql_debug(True)
    try:
        with db_session:
            assert things.Thing[1].label == "full"
    finally:
        set_sql_debug(False)
    assert pony_loads == ["Thing"]
    with db_session:
        assert things.Thing[1].label == "full"
    assert pony_loads == ["Thing"]  # and takes the new session again outside it
