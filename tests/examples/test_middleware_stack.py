"""examples/middleware_stack.py: each middleware in-process, then sessions and the rate limit
shared by 2 real workers."""

from __future__ import annotations

import http.client
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from socketify.testing import TestClient
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)

APP = "examples.middleware_stack"
BAD_KEY = {"error": "missing or bad X-Api-Key"}


@pytest.fixture
def load_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Callable[..., ModuleType]]:
    monkeypatch.chdir(tmp_path)  # no stray .env from the repository
    monkeypatch.delenv("ADMIN_API_KEY", raising=False)

    def load(**env: str) -> ModuleType:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        sys.modules.pop(APP, None)
        return importlib.import_module(APP)

    yield load
    sys.modules.pop(APP, None)


def test_every_answer_carries_a_request_id_and_the_rate_limit(
    load_app: Callable[..., ModuleType],
) -> None:
    client = TestClient(load_app().server)
    index = client.get("/")
    assert index.status == 200 and "/visits" in index.text
    assert len(index.headers["X-Request-Id"]) >= 8
    assert index.headers["RateLimit-Limit"] == "10"
    assert client.get("/").headers["X-Request-Id"] != index.headers["X-Request-Id"]


def test_cors_defaults_answer_any_origin_and_preflights(
    load_app: Callable[..., ModuleType],
) -> None:
    client = TestClient(load_app().server)
    simple = client.get("/visits", headers={"Origin": "https://elsewhere.example"})
    assert simple.headers["Access-Control-Allow-Origin"] == "*"
    preflight = client.options(
        "/admin",
        headers={
            "Origin": "https://elsewhere.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "X-Api-Key",
        },
    )
    assert preflight.status == 204
    assert "GET" in preflight.headers["Access-Control-Allow-Methods"]
    assert preflight.headers["Access-Control-Allow-Headers"].lower() == "x-api-key"


def test_visits_count_per_session(load_app: Callable[..., ModuleType]) -> None:
    server = load_app().server
    ann, bob = TestClient(server), TestClient(server)
    first = ann.get("/visits").json()
    assert first["visits"] == 1 and first["session_id"]
    assert ann.get("/visits").json() == {"visits": 2, "session_id": first["session_id"]}
    assert bob.get("/visits").json()["visits"] == 1  # another cookie jar, another session
    assert ann.get("/visits").json()["visits"] == 3


def test_admin_needs_the_api_key(load_app: Callable[..., ModuleType]) -> None:
    client = TestClient(load_app().server)
    for headers in ({}, {"X-Api-Key": "wrong"}, {"X-Api-Key": "secre"}, {"X-Api-Key": "Secret"}):
        answer = client.get("/admin", headers=headers)
        assert (answer.status, answer.json()) == (401, BAD_KEY), headers
    granted = client.get("/admin", headers={"X-Api-Key": "secret"})
    assert (granted.status, granted.json()) == (200, {"admin": True})
    # The key is per route: the other routes need none.
    assert client.get("/visits").status == 200


def test_the_api_key_comes_from_the_environment_or_a_dot_env_file(
    load_app: Callable[..., ModuleType], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("ADMIN_API_KEY=from-dotenv\n")
    client = TestClient(load_app(ADMIN_API_KEY="from-env").server)  # the environment wins
    assert client.get("/admin", headers={"X-Api-Key": "secret"}).status == 401
    assert client.get("/admin", headers={"X-Api-Key": "from-dotenv"}).status == 401
    assert client.get("/admin", headers={"X-Api-Key": "from-env"}).status == 200
    monkeypatch.delenv("ADMIN_API_KEY")
    client = TestClient(load_app().server)
    assert client.get("/admin", headers={"X-Api-Key": "from-dotenv"}).status == 200


def test_a_client_gets_a_burst_of_ten_then_429(load_app: Callable[..., ModuleType]) -> None:
    client = TestClient(load_app().server)
    statuses = [client.get("/").status for _ in range(11)]
    assert statuses == [200] * 10 + [429]
    refused = client.get("/")
    assert refused.headers["Retry-After"] == "1" and "X-Request-Id" in refused.headers


def _get(server: ServerProcess, path: str, cookie: str = "") -> http.client.HTTPResponse:
    """GET on a fresh connection, so that consecutive requests spread over the workers."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    connection.request("GET", path, headers={"Cookie": cookie} if cookie else {})
    answer = connection.getresponse()
    answer.read()
    connection.close()
    return answer


def test_sessions_and_the_rate_limit_span_both_workers(serve: Launcher) -> None:
    with serve(f"{APP}:server", workers=2) as server:
        first = _get(server, "/visits")
        cookie = first.headers["Set-Cookie"].split(";", 1)[0]
        counts = []
        for _ in range(4):
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
            connection.request("GET", "/visits", headers={"Cookie": cookie})
            counts.append(json.loads(connection.getresponse().read())["visits"])
            connection.close()
        # A per-worker session store would restart the count on the other worker.
        assert counts == [2, 3, 4, 5], server.output()
        # 5 of the 10 tokens are gone; a per-worker limiter would allow 15 more, not ~5.
        allowed = 0
        while _get(server, "/").status == 200:
            allowed += 1
            assert allowed < 10, "the rate limit is not shared by the workers"
        assert allowed >= 5
