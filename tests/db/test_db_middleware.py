"""The database middleware: a `db_session` per request, commit or roll back, and Pony's errors
answered as HTTP (404, 409, 422, 503), through the in-process TestClient; with the fast path's
hooks and with the plain ones on Pony's public `db_session`."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from pony.orm import db_session

import socketify.db
from socketify import Request, Response, Server
from socketify.core import chain
from socketify.db import fastpath, transactional
from socketify.testing import TestClient
from tests.db.db_models import define

pytestmark = pytest.mark.usefixtures("fast_path")

# The plain hooks (`socketify.db.middleware` is also the name of the function).
plain_hooks = importlib.import_module("socketify.db.middleware")

# The middleware's two forms: `(req, res, next)` (what `transactional` uses), and the hooks
# the chain calls directly (what `socketify.db.middleware` returns).
FORMS = ("next", "hooked")


def hooks() -> Any:
    """The module whose `open_session`, `close_session` and `in_db_session` this run uses."""
    if fastpath.resolve():
        from socketify.db.fastpath import session

        return session
    return plain_hooks


def db_middleware(form: str) -> Any:
    """The database middleware in the given form."""
    if form == "next":
        return hooks().in_db_session
    return chain.hooked(hooks().open_session, hooks().close_session, name="db_session")


def build(url: str, form: str = "next", **pool: Any) -> tuple[Server, SimpleNamespace, Any]:
    db = socketify.db.connect(url, **pool)
    m = define(db)
    server = Server()
    server.use(lambda req, res, next: (res.set_header("X-Trace", "t1"), next()))
    server.use(db_middleware(form))
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

    def write_then_miss(req: Request, res: Response) -> None:
        m.User(name="Ghost", email="ghost@x")
        m.User.select().count()
        m.User[999]  # ObjectNotFound: the outermost session answers it after its rollback

    # The route's own database middleware, nested in the server's.
    server.post("/users/nested-middleware", write_then_miss).use(db_middleware(form))

    @server.get("/hold")
    def hold(req: Request, res: Response) -> None:
        m.User.select().count()  # takes the only pooled connection
        holding.set()
        release.wait(5)
        res.send("held")

    tools = SimpleNamespace(release=release, holding=holding)
    return server, m, SimpleNamespace(db=db, **vars(tools))


@pytest.fixture(params=FORMS)
def app(request: pytest.FixtureRequest, sqlite_url: str) -> tuple[TestClient, SimpleNamespace, Any]:
    server, m, tools = build(sqlite_url, request.param, pool_size=1, pool_timeout=0.2)
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


def test_a_route_middleware_nested_in_the_servers_leaves_the_ending_to_it(
    app: tuple[TestClient, SimpleNamespace, Any],
) -> None:
    client, m, _ = app
    response = client.post("/users/nested-middleware")
    assert response.status == 404
    assert response.headers["X-Trace"] == "t1"
    assert count_users(m) == 0
    assert client.get("/users/41").status == 404  # the session state was left clean


@pytest.mark.parametrize("form", FORMS)
def test_a_route_middleware_alone_commits_rolls_back_and_answers(
    sqlite_url: str, form: str
) -> None:
    db = socketify.db.connect(sqlite_url, pool_size=1)
    m = define(db)
    server = Server()

    def create(req: Request, res: Response) -> None:
        body = req.json()
        m.User(name=body["name"], email=body["email"])
        if body.get("then") == "commit":
            res.status(201).send("made")
            return  # the INSERT runs at the commit, after the handler
        m.User.select().count()  # flush, so a duplicate shows up in this handler
        if body.get("then") == "crash":
            raise RuntimeError("bug after the INSERT")
        res.status(201).send("made")

    def show(req: Request, res: Response) -> None:
        res.json({"name": m.User[int(req.params["id"])].name})

    server.post("/users", create).use(db_middleware(form))
    server.get("/users/:id", show).use(db_middleware(form))
    client = TestClient(server)
    assert client.post("/users", json={"name": "Ann", "email": "a@x"}).status == 201
    assert client.get("/users/1").json() == {"name": "Ann"}
    assert client.get("/users/2").status == 404
    duplicate = client.post("/users", json={"name": "Bob", "email": "a@x"})
    assert (duplicate.status, duplicate.json()["field"]) == (409, "email")
    at_commit = client.post("/users", json={"name": "Bob", "email": "a@x", "then": "commit"})
    assert (at_commit.status, at_commit.json()["field"]) == (409, "email")  # not the 201
    assert client.post("/users", json={"name": "Cy", "email": "c@x", "then": "crash"}).status == 500
    assert count_users(m) == 1
    assert db.pool_stats().in_use == 0
    db.disconnect()


def test_close_session_answers_mapped_errors_and_leaves_the_rest_to_the_chain(
    sqlite_url: str,
) -> None:
    db = socketify.db.connect(sqlite_url, pool_size=1)
    m = define(db)
    answered: list[tuple[int, Any]] = []
    res = SimpleNamespace(
        reset_for_error=lambda: None,
        set_header=lambda name, value: None,
        status=lambda code: SimpleNamespace(json=lambda body: answered.append((code, body))),
    )
    open_session, close_session = hooks().open_session, hooks().close_session
    for make_error, expected in [
        (lambda: m.User[5], True),  # ObjectNotFound: 404
        (lambda: 1 / 0, False),  # a bug: the chain re-raises it
    ]:
        assert open_session(None, res) is True
        try:
            make_error()
        except Exception as exc:
            error = exc
        assert close_session(None, res, error) is expected
        assert pony_state()["db_session"] is None and pony_state()["db_context_counter"] == 0
    assert answered == [(404, {"error": "not found"})]
    assert open_session(None, res) is True
    assert close_session(None, res, None) is False  # nothing to answer, the session ended
    assert pony_state()["db_session"] is None
    db.disconnect()


def test_close_session_answers_a_commit_that_fails(sqlite_url: str) -> None:
    db = socketify.db.connect(sqlite_url, pool_size=1)
    m = define(db)
    with db_session:
        m.User(name="Ann", email="a@x")
    answered: list[int] = []
    res = SimpleNamespace(
        reset_for_error=lambda: None,
        set_header=lambda name, value: None,
        status=lambda code: SimpleNamespace(json=lambda body: answered.append(code)),
    )
    hooks().open_session(None, res)
    m.User(name="Imposter", email="a@x")  # flushed only at the commit, which fails
    assert hooks().close_session(None, res, None) is True
    assert answered == [409]
    assert pony_state()["db_session"] is None
    assert count_users(m) == 1
    db.disconnect()


def test_middleware_is_the_hooked_form_of_the_databases_path(
    sqlite_url: str, fast_path: bool
) -> None:
    db = socketify.db.connect(sqlite_url)
    assert db.fast_path is fast_path
    hooked = socketify.db.middleware(db)
    assert isinstance(hooked, chain.Hooked)
    assert (hooked.before, hooked.after) == (hooks().open_session, hooks().close_session)
    plain = socketify.db.middleware(socketify.db.connect(sqlite_url, fast_path=False))
    assert (plain.before, plain.after) == (plain_hooks.open_session, plain_hooks.close_session)


def pony_state() -> dict[str, Any]:
    from pony.orm import core

    return core.local.__dict__


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


def test_errors_of_a_lost_connection_are_503_and_other_driver_errors_are_not() -> None:
    import psycopg2
    import pymysql
    from pony.orm import dbapiprovider

    from socketify.db.errors import answer_for, connection_lost

    lost = [
        psycopg2.OperationalError("server closed the connection unexpectedly"),
        psycopg2.InterfaceError("connection already closed"),
        pymysql.err.OperationalError(2013, "Lost connection to server during query"),
        pymysql.err.OperationalError(2006, "MySQL server has gone away"),
        pymysql.err.InterfaceError(0, ""),
    ]
    for error in lost:
        wrapped = dbapiprovider.OperationalError(error)
        assert connection_lost(error) and connection_lost(wrapped), error
        answer = answer_for(wrapped)
        assert answer is not None
        assert (answer.status, answer.headers) == (503, {"Retry-After": "1"})
    kept = [
        pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"),
        pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax"),
        psycopg2.ProgrammingError("syntax error"),
    ]
    for error in kept:
        assert not connection_lost(error), error
