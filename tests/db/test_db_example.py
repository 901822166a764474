"""examples/todos_db.py works as documented: in-process, and served by two real workers."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from socketify.testing import TestClient
from tests.db.test_db_live import get
from tests.support.serve import Launcher

pytestmark = pytest.mark.usefixtures("fast_path")


@pytest.fixture
def example(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    sys.modules.pop("examples.todos_db", None)
    yield importlib.import_module("examples.todos_db")
    sys.modules.pop("examples.todos_db", None)


def test_the_documented_session(example: ModuleType) -> None:
    client = TestClient(example.server)
    ann = client.post("/users", json={"name": "Ann", "email": " Ann@Example.com "})
    assert ann.status == 201 and ann.json()["email"] == "ann@example.com"
    todo = client.post("/users/1/todos", json={"title": "write docs", "priority": 1})
    assert todo.status == 201
    assert client.patch("/todos/1", json={"done": True}).json()["done"] is True
    assert client.get("/users/1").json()["todos"] == [
        {"id": 1, "title": "write docs", "done": True, "priority": 1}
    ]
    assert client.get("/todos", query={"done": "false"}).json() == []
    assert client.get("/users/99").status == 404
    duplicate = client.post("/users", json={"name": "Bob", "email": "ann@example.com"})
    assert (duplicate.status, duplicate.json()["field"]) == (409, "email")
    blank = client.post("/users/1/todos", json={"title": "  "})
    assert (blank.status, list(blank.json()["errors"])) == (422, ["title"])
    assert client.post("/users/1/todos", json={"title": "x", "priority": 9}).status == 422
    assert client.delete("/todos/1").status == 204
    events = [entry["event"] for entry in client.get("/activity").json()]
    # Newest first; the failed requests left no entry (their transactions rolled back).
    assert events == ["todo deleted", "todo updated", "todo added", "user created"]


def test_two_workers_share_one_sqlite_database(serve: Launcher, sqlite_url: str) -> None:
    env = {"DATABASE_URL": sqlite_url}
    with serve("examples.todos_db:server", workers=2, env=env) as server:
        for number in range(10):  # spread over both workers by the kernel
            con_status = post(server.port, "/users", {"name": f"u{number}", "email": f"{number}@x"})
            assert con_status == 201, server.output()
        status, body = get(server.port, "/activity?limit=100")
    assert status == 200
    assert len(json.loads(body)) == 10


def post(port: int, path: str, payload: object) -> int:
    import http.client

    con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        con.request("POST", path, body=json.dumps(payload).encode(),
                    headers={"Content-Type": "application/json"})  # fmt: skip
        response = con.getresponse()
        response.read()
        return response.status
    finally:
        con.close()
