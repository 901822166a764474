"""The document store: one behaviour suite run on every engine (memory, SQLite, PostgreSQL,
and MongoDB when SOCKETIFY_MONGO_URL names a server), plus the SQL engines inside requests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pony.orm import db_session

import socketify.db
from socketify import Request, Response, Server
from socketify.db import documents
from socketify.db.documents import DocumentStore, DuplicateKeyError, InvalidQuery
from socketify.testing import TestClient
from tests.support.services import require_service

ENGINES = ["memory", "sqlite", "postgres", "mongo"]


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest) -> Iterator[DocumentStore]:
    engine = request.param
    if engine == "memory":
        yield documents.open("memory://")
    elif engine == "sqlite":
        yield documents.open(request.getfixturevalue("sqlite_url"))
    elif engine == "postgres":
        yield documents.open(socketify.db.connect(request.getfixturevalue("pg_url")))
    else:
        url = os.environ.get("SOCKETIFY_MONGO_URL")
        if not url:
            pytest.skip("MongoDB engine: set SOCKETIFY_MONGO_URL=mongodb://host/db to run")
        require_service("MongoDB", "127.0.0.1", 27017)
        opened = documents.open(url.rstrip("/") + f"/t_{uuid.uuid4().hex[:10]}")
        yield opened
        opened.engine._client.drop_database(opened.engine.database_name)  # type: ignore[attr-defined]
        opened.close()


# name -> value of "v"; insertion order matters for ties.
MIXED = [
    ("int3", 3),
    ("str_b", "b"),
    ("null", None),
    ("float2.5", 2.5),
    ("true", True),
    ("missing", "-"),
    ("int10", 10),
    ("str_a", "a"),
    ("obj", {"k": 1}),
    ("list", [1, 2]),
    ("false", False),
    ("int3bis", 3),
]


def fill(store: DocumentStore) -> Any:
    things = store["things"]
    things.insert_many([{"name": n} if v == "-" else {"name": n, "v": v} for n, v in MIXED])
    return things


def names(docs: list[dict[str, Any]]) -> list[str]:
    return [doc["name"] for doc in docs]


def test_insert_returns_a_copy_with_its_id(store: DocumentStore) -> None:
    notes = store["notes"]
    note = notes.insert({"title": "hi", "tags": ["a"]})
    assert next(iter(note)) == "_id" and len(note["_id"]) == 32
    note["title"] = "changed here only"
    assert notes.get(note["_id"]) == {"_id": note["_id"], "title": "hi", "tags": ["a"]}
    assert notes.insert({"_id": "mine", "x": 1})["_id"] == "mine"
    with pytest.raises(DuplicateKeyError) as caught:
        notes.insert({"_id": "mine"})
    assert caught.value.field == "_id"
    assert notes.get("nope") is None


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"v": 3}, ["int3", "int3bis"]),
        ({"v": 3.0}, ["int3", "int3bis"]),
        ({"v": True}, ["true"]),  # booleans are not numbers
        ({"v": 1}, []),
        ({"v": None}, ["null", "missing"]),  # None matches a missing field too
        ({"v": {"$ne": 3}}, [n for n, _ in MIXED if n not in ("int3", "int3bis")]),
        ({"v": {"$gt": 2.5}}, ["int3", "int10", "int3bis"]),
        ({"v": {"$gte": 2.5, "$lt": 10}}, ["int3", "float2.5", "int3bis"]),
        ({"v": {"$lte": "a"}}, ["str_a"]),  # strings compare only with strings
        ({"v": {"$in": [3, "b", None]}}, ["int3", "str_b", "null", "missing", "int3bis"]),
        ({"v": {"$in": []}}, []),  # an empty IN matches nothing
        ({"v": {"$nin": []}}, [n for n, _ in MIXED]),
        ({"v": {"$nin": [3, True]}}, [n for n, _ in MIXED if n not in ("int3", "int3bis", "true")]),
        ({"v": {"$exists": False}}, ["missing"]),
        ({"v": {"$exists": True}, "name": {"$in": ["null", "int3"]}}, ["int3", "null"]),
        ({"v": {"k": 1}}, ["obj"]),
        ({"v": [1, 2]}, ["list"]),
        ({"v": {"$ne": {"k": 1}}}, [n for n, _ in MIXED if n != "obj"]),
    ],
)
def test_filter_operators(
    store: DocumentStore, filter: dict[str, Any], expected: list[str]
) -> None:
    things = fill(store)
    if store.engine.__class__.__name__ == "MongoEngine" and "list" in str(filter):
        pytest.skip("MongoDB matches arrays by element")
    assert names(things.find(filter)) == expected
    assert things.count(filter) == len(expected)


def test_sort_orders_kinds_then_values_with_ties_in_insertion_order(store: DocumentStore) -> None:
    things = fill(store)
    ascending = names(things.find({"name": {"$nin": ["obj", "list"]}}, sort="v"))
    assert ascending == [
        "null", "missing", "float2.5", "int3", "int3bis", "int10", "str_a", "str_b",
        "false", "true",
    ]  # fmt: skip
    descending = names(things.find({"name": {"$nin": ["obj", "list"]}}, sort="-v"))
    assert descending[:4] == ["true", "false", "str_b", "str_a"]
    assert descending[-2:] == ["null", "missing"]  # ties keep insertion order either way


def test_sort_applies_before_skip_and_limit(store: DocumentStore) -> None:
    items = store["items"]
    items.insert_many([{"n": n} for n in (5, 1, 4, 2, 3)])
    assert [d["n"] for d in items.find(sort=[("n", 1)], skip=1, limit=2)] == [2, 3]
    assert [d["n"] for d in items.find(sort="-n", limit=1)] == [5]
    assert [d["n"] for d in items.find(limit=0)] == []
    assert [d["n"] for d in items.find(skip=3)] == [2, 3]  # insertion order without sort
    assert items.find_one({"n": {"$gt": 1}}, sort="n")["n"] == 2


def test_multi_key_and_dotted_sort(store: DocumentStore) -> None:
    people = store["people"]
    people.insert_many(
        [
            {"name": "c", "team": {"id": 2}, "age": 30},
            {"name": "a", "team": {"id": 1}, "age": 40},
            {"name": "b", "team": {"id": 2}, "age": 20},
            {"name": "d", "team": {"id": 1}, "age": 40},
        ]
    )
    ordered = people.find(sort=[("team.id", 1), ("age", -1)])
    assert names(ordered) == ["a", "d", "c", "b"]
    assert names(people.find({"team.id": 2}, sort="name")) == ["b", "c"]


def test_update_sets_fields_on_every_match(store: DocumentStore) -> None:
    items = store["items"]
    first = items.insert({"n": 1, "meta": {"a": 1}})
    items.insert({"n": 2})
    assert items.update({"n": {"$gte": 1}}, {"seen": True, "meta.b": 2}) == 2
    assert items.get(first["_id"]) == {
        "_id": first["_id"], "n": 1, "meta": {"a": 1, "b": 2}, "seen": True,
    }  # fmt: skip
    assert items.update({"n": 99}, {"seen": False}) == 0
    with pytest.raises(InvalidQuery, match="_id cannot change"):
        items.update({"n": 1}, {"_id": "x"})


def test_delete_needs_a_filter_and_clear_empties(store: DocumentStore) -> None:
    items = store["items"]
    items.insert_many([{"n": n} for n in range(5)])
    assert items.delete({"n": {"$lt": 2}}) == 2
    with pytest.raises(InvalidQuery, match="needs a filter"):
        items.delete({})
    assert items.count() == 3
    assert items.clear() == 3
    assert items.count() == 0


def test_unique_index_is_enforced_and_failed_writes_change_nothing(store: DocumentStore) -> None:
    users = store["users"]
    users.create_index("email", unique=True)
    users.create_index("age")  # a plain index only speeds lookups
    users.insert({"email": "a@x", "age": 1})
    users.insert({"email": "b@x"})
    users.insert({"age": 2})
    users.insert({"age": 3})  # any number of documents may lack the field
    with pytest.raises(DuplicateKeyError) as caught:
        users.insert({"email": "a@x"})
    assert caught.value.field == "email"
    with pytest.raises(DuplicateKeyError):
        users.insert_many([{"email": "c@x"}, {"email": "c@x"}])
    assert users.count({"email": "c@x"}) == 0  # all or none
    with pytest.raises(DuplicateKeyError):
        users.update({"email": {"$in": ["a@x", "b@x"]}}, {"email": "same@x"})
    assert sorted(d["email"] for d in users.find({"email": {"$exists": True}})) == ["a@x", "b@x"]


def test_unique_index_over_existing_duplicates_is_refused(store: DocumentStore) -> None:
    tags = store["tags"]
    tags.insert_many([{"slug": "x"}, {"slug": "x"}])
    with pytest.raises(DuplicateKeyError):
        tags.create_index("slug", unique=True)


def test_unique_keys_compare_numbers_by_value_but_not_booleans(store: DocumentStore) -> None:
    if store.engine.__class__.__name__ == "MongoEngine":
        pytest.skip("MongoDB's own type rules")
    codes = store["codes"]
    codes.create_index("code", unique=True)
    codes.insert({"code": 1})
    codes.insert({"code": True})
    codes.insert({"code": "1"})
    with pytest.raises(DuplicateKeyError):
        codes.insert({"code": 1.0})


@pytest.mark.parametrize(
    "bad",
    [
        {"v": {"$regex": "a"}},
        {"$or": [{"v": 1}]},
        {"v": {"$in": 3}},
        {"v": {"$gt": {"a": 1}}},
        {"v": {"$exists": "yes"}},
        {"v": {"$gt": 1, "plain": 2}},
        {"a b": 1},
        {"v": {"$eq": {1, 2}}},
    ],
)
def test_invalid_filters_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidQuery):
        documents.open("memory://")["c"].find(bad)


def test_invalid_collection_names_are_refused() -> None:
    for name in ("", "a-b", "1st", "x__y", "drop;table"):
        with pytest.raises(InvalidQuery):
            documents.open("memory://")[name]


# -- the SQL engines inside a request -------------------------------------------------------------


@pytest.mark.usefixtures("fast_path")
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_documents_join_the_request_transaction(
    engine: str, request: pytest.FixtureRequest
) -> None:
    db = socketify.db.connect(
        request.getfixturevalue("pg_url" if engine == "postgres" else "sqlite_url")
    )
    notes = documents.open(db)["notes"]
    notes.create_index("slug", unique=True)
    server = Server()
    server.use(socketify.db.middleware(db))

    @server.post("/notes")
    def create(req: Request, res: Response) -> None:
        body = req.json()
        note = notes.insert(body)
        if body.get("fail"):
            raise RuntimeError("after the insert")
        res.status(201).json(note)

    @server.post("/notes/recover")
    def recover(req: Request, res: Response) -> None:
        try:
            notes.insert({"slug": "taken"})
        except DuplicateKeyError:
            pass  # the savepoint undid only that insert; the transaction goes on
        res.json(notes.insert({"slug": "fresh"}))

    client = TestClient(server)
    assert client.post("/notes", json={"slug": "taken"}).status == 201
    assert client.post("/notes", json={"slug": "ghost", "fail": True}).status == 500
    duplicate = client.post("/notes", json={"slug": "taken"})
    assert duplicate.status == 409
    assert duplicate.json() == {"error": "already exists", "field": "slug"}
    assert client.post("/notes/recover").status == 200
    with db_session:
        assert sorted(d["slug"] for d in notes.find()) == ["fresh", "taken"]
    db.disconnect()


def test_mongo_engine_passes_validated_filters_through_unchanged() -> None:
    """The MongoDB engine's only translation (no server needed)."""
    from socketify.db.documents.mongo import _filter
    from socketify.db.documents.query import parse_filter

    conditions = parse_filter({"a.b": 1, "n": {"$gte": 2, "$nin": [5]}})
    assert _filter(conditions) == {
        "$and": [{"a.b": {"$eq": 1}}, {"n": {"$gte": 2}}, {"n": {"$nin": [5]}}]
    }
    assert _filter([]) == {}
