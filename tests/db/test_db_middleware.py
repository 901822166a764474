"""The database middleware: a `db_session` per request, commit or roll back, and Pony's errors
answered as HTTP (404, 409, 422, 503), through the in-process TestClient."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from db_models import define
from pony.orm import db_session

import socketify.db
from socketify import Request, Response, Server
from socketify.db import transactional
from socketify.testing import TestClient


def build(url: str, **pool: Any) -> tuple[Server, SimpleNamespace, Any]:
    db = socketify.db.connect(url, **pool)
    m = define(db)
    server = Server()
    server.use(lambda req, res, next: (res.set_header("X-Trace", "t1"), next()))
    server.use(socketify.db.middleware(db))
    release = threading.Event()
    holding = threading.Event()

    @server.get("/users/:id")
    def get_user(req: Request, res: Response) -> None:
        user = m.User[int(req.params["id"])]
        res.json({"id": user.id, "name": user.name, "todos": [t.title for t in user.todos]})

    @server.post("/users")
    def create_user(req: Request, res: Response) -> None:
        user = m.User(**req.json())
        m.User.select().count()  # flush now, so a duplicate in the database shows up here
        res.status(201).json({"id": user.id})

    @server.post("/users/twice")
    def create_twice(req: Request, res: Response) -> None:
        m.User(name="One", email="same@x")
        m.User(name="Two", email="same@x")

    @server.post("/users/then-crash")
    def then_crash(req: Request, res: Response) -> None:
        m.User(name="Ghost", email="ghost@x")
        m.User.select().count()
        raise RuntimeError("bug after the INSERT")

    @server.post("/users/then-value-error")
    def then_value_error(req: Request, res: Response) -> None:
        raise ValueError("the application's own ValueError is a bug, not a 422")

    @server.post("/users/nested")
    @transactional
    def nested(req: Request, res: Response) -> None:
        m.User(name="Ghost", email="ghost@x")
        m.User.select().count()
        m.User[999]  # ObjectNotFound: the whole request must roll back

    @server.get("/hold")
    def hold(req: Request, res: Response) -> None:
        m.User.select().count()  # takes the only pooled connection
        holding.set()
        release.wait(5)
        res.send("held")

    tools = SimpleNamespace(release=release, holding=holding)
    return server, m, SimpleNamespace(db=db, **vars(tools))


@pytest.fixture
def app(sqlite_url: str) -> tuple[TestClient, SimpleNamespace, Any]:
    server, m, tools = build(sqlite_url, pool_size=1, pool_timeout=0.2)
    return TestClient(server), m, tools


def count_users(m: SimpleNamespace) -> int:
    with db_session:
        return int(m.User.select().count())


def test_success_commits(app: tuple[TestClient, SimpleNamespace, Any]) -> None:
    client, _, _ = app
    created = client.post("/users", json={"name": "Ann", "email": "a@x"})
    assert created.status == 201
    fetched = client.get(f"/users/{created.json()['id']}")
    assert fetched.json() == {"id": created.json()["id"], "name": "Ann", "todos": []}


def test_missing_object_is_404(app: tuple[TestClient, SimpleNamespace, Any]) -> None:
    client, _, _ = app
    response = client.get("/users/41")
    assert response.status == 404
    assert response.json() == {"error": "not found"}
    assert response.headers["X-Trace"] == "t1"  # headers set before the error are kept


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "x" * 41, "email": "a@x"}, "name"),
        ({"name": "Ann", "email": "a@x", "age": 200}, "age"),
        ({"name": "Ann", "email": "a@x", "age": "old"}, "age"),
        ({"email": "a@x"}, "name"),
        ({"name": "Ann", "email": "a@x", "nickname": "A"}, "nickname"),
    ],
)
def test_validation_failure_is_422_naming_the_field(
    app: tuple[TestClient, SimpleNamespace, Any], payload: dict[str, Any], field: str
) -> None:
    client, m, _ = app
    response = client.post("/users", json=payload)
    assert response.status == 422
    body = response.json()
    assert body["error"] == "validation failed"
    assert list(body["errors"]) == [field]
    assert count_users(m) == 0


def test_unique_violation_in_the_database_is_409_on_every_engine(any_url: str) -> None:
    server, m, _ = build(any_url, pool_size=1)
    client = TestClient(server)
    assert client.post("/users", json={"name": "Ann", "email": "a@x"}).status == 201
    response = client.post("/users", json={"name": "Imposter", "email": "a@x"})
    assert response.status == 409
    assert response.json() == {"error": "already exists", "field": "email"}
    assert count_users(m) == 1


def test_unique_violation_inside_one_session_is_409(
    app: tuple[TestClient, SimpleNamespace, Any],
) -> None:
    client, m, _ = app
    response = client.post("/users/twice")
    assert response.status == 409
    assert response.json()["field"] == "email"
    assert count_users(m) == 0


def test_unmapped_exception_is_500_and_rolls_back(
    app: tuple[TestClient, SimpleNamespace, Any],
) -> None:
    client, m, _ = app
    assert client.post("/users/then-crash").status == 500
    assert client.post("/users/then-value-error").status == 500
    assert count_users(m) == 0


def test_mapped_error_in_a_nested_session_still_rolls_back_everything(
    app: tuple[TestClient, SimpleNamespace, Any],
) -> None:
    client, m, _ = app
    assert client.post("/users/nested").status == 404
    assert count_users(m) == 0


def test_pool_exhaustion_is_503_with_retry_after(
    app: tuple[TestClient, SimpleNamespace, Any],
) -> None:
    client, _, tools = app
    results: list[int] = []
    holder = threading.Thread(target=lambda: results.append(client.get("/hold").status))
    holder.start()
    assert tools.holding.wait(5)
    response = TestClient(client.server).get("/users/1")
    tools.release.set()
    holder.join(5)
    assert response.status == 503
    assert response.headers["Retry-After"] == "1"
    assert "busy" in response.json()["error"]
    assert results == [200]


def test_transactional_decorator_alone_maps_errors(sqlite_url: str) -> None:
    db = socketify.db.connect(sqlite_url)
    m = define(db)
    server = Server()
    handler: Callable[[Request, Response], Any] = transactional(
        lambda req, res: res.json({"name": m.User[1].name})
    )
    server.get("/first", handler)
    assert TestClient(server).get("/first").status == 404
    with db_session:
        m.User(name="Ann", email="a@x")
    assert TestClient(server).get("/first").json() == {"name": "Ann"}


def test_middleware_refuses_an_unbound_database() -> None:
    from pony.orm import Database

    with pytest.raises(ValueError, match="bind the database"):
        socketify.db.middleware(Database())
