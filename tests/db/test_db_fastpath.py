"""The fast path's switch: `connect(..., fast_path=)`, SOCKETIFY_DB_FAST_PATH and the Pony
releases it was verified against; off, a database is Pony's own code and no module of the fast
path is even imported."""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import textwrap
from typing import Any

import pony
import pytest
from pony.orm import Json, Optional, Required, db_session
from pony.orm import core as pony_core
from pony.orm.core import EntityMeta

import socketify.db
from socketify import Request, Response, Server
from socketify.core import chain
from socketify.db import fastpath
from socketify.testing import TestClient

# The plain hooks (`socketify.db.middleware` is also the name of the function).
plain_hooks = importlib.import_module("socketify.db.middleware")


@pytest.fixture(autouse=True)
def unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from the default: the variable unset."""
    monkeypatch.delenv(fastpath.ENV, raising=False)


def define(db: Any) -> Any:
    class Item(db.Entity):  # type: ignore[name-defined,misc]
        name = Required(str)
        data = Optional(Json)

    db.generate_mapping(create_tables=True)
    with db_session:
        Item(name="one", data={"tags": ["a"]})
    return Item


@pytest.mark.parametrize(
    ("setting", "requested", "expected"),
    [
        (None, True, True),
        ("1", True, True),
        ("on", True, True),
        ("0", True, False),
        ("off", True, False),
        ("false", True, False),
        ("No", True, False),
        (None, False, False),
        ("1", False, False),  # the application's False wins
        ("force", False, False),
    ],
)
def test_the_fast_path_is_on_unless_the_application_or_the_environment_says_off(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, requested: bool, expected: bool
) -> None:
    if fastpath.refusal() is not None:
        monkeypatch.setattr(pony, "__version__", "0.7.20")
    if setting is not None:
        monkeypatch.setenv(fastpath.ENV, setting)
    assert fastpath.resolve(requested) is expected


def test_an_unknown_setting_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    monkeypatch.setenv(fastpath.ENV, "sometimes")
    with pytest.raises(ValueError, match="SOCKETIFY_DB_FAST_PATH='sometimes'"):
        socketify.db.connect(sqlite_url)


@pytest.mark.parametrize(
    ("version", "verified"),
    [
        ("0.7.19", True),
        ("0.7.20", True),
        ("0.7.18", False),
        ("0.7.21", False),
        ("0.8.0rc1", False),
        ("1.0", False),
        ("unknown", False),
    ],
)
def test_only_the_verified_pony_releases_get_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, version: str, verified: bool
) -> None:
    monkeypatch.setattr(pony, "__version__", version)
    assert (fastpath.refusal() is None) is verified
    assert fastpath.resolve() is verified


def test_an_unverified_pony_gets_plain_pony_and_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, sqlite_url: str
) -> None:
    monkeypatch.setattr(pony, "__version__", "0.99.1")  # a release no other test names
    with caplog.at_level(logging.WARNING, logger="socketify.db"):
        first = socketify.db.connect(sqlite_url)
        second = socketify.db.connect(sqlite_url)
    assert not first.fast_path and not second.fast_path
    assert type(first.Entity) is EntityMeta
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "Pony 0.99.1" in warnings[0] and "0.7.19 to 0.7.20" in warnings[0]
    assert f"{fastpath.ENV}=force" in warnings[0]
    Item = define(first)
    client = TestClient(served(first, Item))
    assert client.get("/items/1").json() == {"name": "one", "row": {"id": 1, **ROW}}
    monkeypatch.setenv(fastpath.ENV, "force")  # trying the new release on purpose
    assert socketify.db.connect(sqlite_url).fast_path
    first.disconnect()
    second.disconnect()


ROW = {"name": "one", "data": {"tags": ["a"]}}


def served(db: Any, Item: Any) -> Server:
    server = Server()
    server.use(socketify.db.middleware(db))

    @server.get("/items/:id")
    def show(req: Request, res: Response) -> None:
        key = int(req.params["id"])
        res.json({"name": Item[key].name, "row": socketify.db.get_row(Item, key)})

    return server


def test_a_plain_database_is_ponys_own_code(sqlite_url: str) -> None:
    db = socketify.db.connect(sqlite_url, fast_path=False)
    assert db.fast_path is False
    Item = define(db)
    assert type(Item) is EntityMeta
    assert type(Item.name) is Required and type(Item.data) is Optional
    assert type(db.provider).__module__ == "socketify.db.providers.sqlite"
    hooked = socketify.db.middleware(db)
    assert (hooked.before, hooked.after) == (plain_hooks.open_session, plain_hooks.close_session)
    client = TestClient(served(db, Item))
    assert client.get("/items/1").json() == {"name": "one", "row": {"id": 1, **ROW}}
    assert client.get("/items/2").status == 404
    with db_session:
        row = socketify.db.get_row(Item, 1)
    assert type(row["data"]) is dict and type(row["data"]["tags"]) is list  # untracked
    assert db.pool_stats().in_use == 0
    db.disconnect()


def test_with_the_switch_off_no_module_of_the_fast_path_is_imported(sqlite_url: str) -> None:
    script = textwrap.dedent(
        f"""
        import json, sys
        from pony.orm import Required, db_session
        import socketify.db
        from socketify import Server
        from socketify.testing import TestClient

        db = socketify.db.connect({sqlite_url!r})

        class Item(db.Entity):
            name = Required(str)

        db.generate_mapping(create_tables=True)
        with db_session:
            Item(name="one")
        server = Server()
        server.use(socketify.db.middleware(db))
        server.get("/a", lambda req, res: res.json(socketify.db.get_row(Item, 1)))
        server.get("/b", socketify.db.transactional(lambda req, res: res.send(Item[1].name)))
        client = TestClient(server)
        answers = [client.get("/a").json(), client.get("/b").text]
        loaded = sorted(m for m in sys.modules if m.startswith("socketify.db.fastpath."))
        print(json.dumps([db.fast_path, answers, loaded]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, fastpath.ENV: "0"},
    )
    assert done.returncode == 0, done.stderr
    fast, answers, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert fast is False
    assert answers == [{"id": 1, "name": "one"}, "one"]
    assert loaded == []


@pytest.mark.usefixtures("fast_path")
@pytest.mark.fast_path_only
@pytest.mark.parametrize(("outer", "inner"), [("fast", "plain"), ("plain", "fast")])
def test_a_session_nested_across_the_two_paths_rolls_back_and_answers_once(
    sqlite_url: str, outer: str, inner: str
) -> None:
    """A route's middleware of one path inside the server's of the other (two databases
    connected with different settings share the greenlet's one Pony session)."""
    from socketify.db.fastpath import session as fast_hooks

    def session_middleware(path: str) -> chain.Hooked:
        hooks = fast_hooks if path == "fast" else plain_hooks
        return chain.hooked(hooks.open_session, hooks.close_session, name="db_session")

    db = socketify.db.connect(sqlite_url)
    Item = define(db)
    server = Server()
    server.use(session_middleware(outer))

    def write_then_miss(req: Request, res: Response) -> None:
        Item(name="ghost")
        Item.select().count()  # flushed: the INSERT ran inside the transaction
        Item[999]  # ObjectNotFound: the whole request must roll back

    def write(req: Request, res: Response) -> None:
        Item(name="kept")
        res.status(201).send("made")

    server.post("/miss", write_then_miss).use(session_middleware(inner))
    server.post("/write", write).use(session_middleware(inner))
    client = TestClient(server)
    missed = client.post("/miss")
    assert (missed.status, missed.json()) == (404, {"error": "not found"})
    assert client.post("/write").status == 201
    state = pony_core.local
    assert state.db_session is None and state.db_context_counter == 0
    with db_session:
        assert sorted(item.name for item in Item.select()) == ["kept", "one"]
    assert db.pool_stats().in_use == 0
    db.disconnect()
