"""examples/rest_api.py: its statuses (201, 204, 400, 404, 422) and JSON errors in-process, then
2 real workers."""

from __future__ import annotations

import http.client
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from socketify.testing import TestClient
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)

APP = "examples.rest_api"
NO_SUCH_TODO = {"error": "no such todo"}
NEED_TITLE = {"error": "body must be JSON with a string 'title'"}


@pytest.fixture
def database(tmp_path: Path) -> str:
    return str(tmp_path / "todos.db")


@pytest.fixture
def rest_api(database: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("REST_API_DB", database)
    sys.modules.pop(APP, None)
    yield importlib.import_module(APP)
    sys.modules.pop(APP, None)


def test_a_todo_is_created_listed_changed_and_deleted(rest_api: ModuleType) -> None:
    client = TestClient(rest_api.server)
    assert client.get("/api/todos").json() == []
    created = client.post("/api/todos", json={"title": " write docs "})
    assert (created.status, created.json()) == (
        201,
        {"id": 1, "title": "write docs", "done": False},
    )
    client.post("/api/todos", json={"title": "ship"})
    assert [todo["title"] for todo in client.get("/api/todos").json()] == ["write docs", "ship"]
    assert client.get("/api/todos/1").json()["title"] == "write docs"
    done = client.patch("/api/todos/1", json={"done": True})
    assert (done.status, done.json()) == (200, {"id": 1, "title": "write docs", "done": True})
    renamed = client.patch("/api/todos/1", json={"title": "write more docs"})
    assert renamed.json() == {"id": 1, "title": "write more docs", "done": True}  # done kept
    deleted = client.delete("/api/todos/1")
    # A 204 carries neither a body nor a Content-Length.
    assert (deleted.status, deleted.body) == (204, b"")
    assert "Content-Length" not in deleted.headers
    assert [todo["id"] for todo in client.get("/api/todos").json()] == [2]


def test_a_missing_todo_is_a_json_404_for_every_method(rest_api: ModuleType) -> None:
    client = TestClient(rest_api.server)
    for answer in (
        client.get("/api/todos/7"),
        client.patch("/api/todos/7", json={"done": True}),
        client.delete("/api/todos/7"),
    ):
        assert (answer.status, answer.json()) == (404, NO_SUCH_TODO)


def test_ids_that_are_not_positive_numbers_are_unknown_not_todo_zero(rest_api: ModuleType) -> None:
    client = TestClient(rest_api.server)
    client.post("/api/todos", json={"title": "the only one"})
    # The original parsed ids with atol: "abc" was todo 0 and "1abc" was todo 1.
    for raw in ("abc", "0", "-1", "1abc", "1.0", "01", "%C2%B9", "9" * 30):
        answer = client.get(f"/api/todos/{raw}")
        assert (answer.status, answer.json()) == (404, NO_SUCH_TODO), raw
        assert client.delete(f"/api/todos/{raw}").status == 404
    assert len(client.get("/api/todos").json()) == 1


def test_a_todo_needs_a_json_string_title(rest_api: ModuleType) -> None:
    client = TestClient(rest_api.server)
    json_type = {"Content-Type": "application/json"}
    for answer in (
        client.post("/api/todos", json={}),
        client.post("/api/todos", json={"title": 5}),
        client.post("/api/todos", json={"title": "   "}),
        client.post("/api/todos", json=["title"]),
        client.post("/api/todos", data=b"{not json", headers=json_type),
        client.post("/api/todos", data=b"", headers=json_type),
    ):
        assert (answer.status, answer.json()) == (422, NEED_TITLE)
    assert client.get("/api/todos").json() == []


def test_patch_refuses_bad_json_with_400_and_bad_fields_with_422(rest_api: ModuleType) -> None:
    client = TestClient(rest_api.server)
    client.post("/api/todos", json={"title": "keep me"})
    broken = client.patch(
        "/api/todos/1", data=b"{oops", headers={"Content-Type": "application/json"}
    )
    assert (broken.status, broken.json()) == (400, {"error": "invalid JSON"})
    for changes in ({"done": "yes"}, {"title": ""}, {"title": None}, [1]):
        assert client.patch("/api/todos/1", json=changes).status == 422
    assert client.get("/api/todos/1").json() == {"id": 1, "title": "keep me", "done": False}


def _request(
    server: ServerProcess, method: str, path: str, body: object = None
) -> tuple[int, object]:
    """One request on a fresh connection, so that consecutive requests spread over workers."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        data = None if body is None else json.dumps(body)
        connection.request(method, path, body=data)
        answer = connection.getresponse()
        raw = answer.read()
        return answer.status, json.loads(raw) if raw else None
    finally:
        connection.close()


def test_two_workers_see_the_same_todos(serve: Launcher, database: str) -> None:
    env = {"REST_API_DB": database}
    with serve(f"{APP}:server", workers=2, env=env) as server:
        status, todo = _request(server, "POST", "/api/todos", {"title": "seen everywhere"})
        assert status == 201, server.output()
        path = f"/api/todos/{todo['id']}"  # type: ignore[index]
        for _ in range(12):
            assert _request(server, "GET", path) == (200, todo), server.output()
        assert _request(server, "PATCH", path, {"done": True})[0] == 200
        for _ in range(12):
            assert _request(server, "GET", "/api/todos")[1] == [{**todo, "done": True}]  # type: ignore[dict-item]
        assert _request(server, "DELETE", path) == (204, None)
        for _ in range(12):
            assert _request(server, "GET", path) == (404, NO_SUCH_TODO)
