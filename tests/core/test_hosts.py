"""Per-host routers: chosen by host name (exact, then one-label wildcard), with their own
routes and middleware, falling back to the server's routes for other hosts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from socketify import Request, Response, Server
from socketify.testing import TestClient


def says(text: str) -> Callable[[Request, Response], None]:
    def handler(req: Request, res: Response) -> None:
        res.send(text)

    return handler


@pytest.fixture(scope="module")
def client() -> TestClient:
    server = Server()
    seen: list[str] = []
    server.use(lambda req, res, next: (seen.append("global"), next()))
    server.get("/", says("default"))
    server.get("/only-default", says("default only"))
    api = server.host("api.example.com")
    api.use(lambda req, res, next: (res.set_header("X-Host", "api"), next()))
    api.get("/", says("api"))
    api.get("/users/:id", lambda req, res: res.send(f"user {req.params['id']}"))
    v1 = api.group("/v1")
    v1.use(lambda req, res, next: (res.set_header("X-Version", "1"), next()))
    v1.get("/ping", says("api v1 pong"))
    server.host("*.example.com").get("/", says("wildcard"))
    server.host("*.deep.example.com").get("/", says("deep wildcard"))
    server.host("Admin.Example.COM.").get("/", says("admin"))
    blocked = server.host("blocked.example.com")
    blocked.use(lambda req, res, next: None)  # stops without answering
    blocked.get("/", says("never"))
    test_client = TestClient(server)
    test_client.seen = seen  # type: ignore[attr-defined]
    return test_client


@pytest.mark.parametrize(
    ("host", "body"),
    [
        ("api.example.com", "api"),
        ("API.Example.Com:8443", "api"),  # case-insensitive, port stripped
        ("api.example.com.", "api"),  # a fully-qualified name with its trailing dot
        ("www.example.com", "wildcard"),
        ("x.deep.example.com", "deep wildcard"),  # the longer wildcard's own label
        ("a.b.example.com", "default"),  # a wildcard covers one label only
        ("example.com", "default"),
        ("admin.example.com", "admin"),  # an exact name over the wildcard
        ("other.test", "default"),
        ("127.0.0.1:8080", "default"),
        ("[::1]:8080", "default"),
    ],
)
def test_the_host_picks_the_router(client: TestClient, host: str, body: str) -> None:
    response = client.get("/", headers={"Host": host})
    assert response.status_code == 200 and response.text == body


def test_host_routes_params_groups_and_middleware(client: TestClient) -> None:
    response = client.get("/users/7", headers={"Host": "api.example.com"})
    assert response.text == "user 7" and response.headers["x-host"] == "api"
    response = client.get("/v1/ping", headers={"Host": "api.example.com"})
    assert response.text == "api v1 pong" and response.headers["x-version"] == "1"


def test_global_middleware_runs_before_the_host_router(client: TestClient) -> None:
    before = len(client.seen)  # type: ignore[attr-defined]
    client.get("/", headers={"Host": "api.example.com"})
    assert client.seen[before:] == ["global"]  # type: ignore[attr-defined]


def test_a_matched_host_does_not_fall_back_to_the_default_routes(client: TestClient) -> None:
    response = client.get("/only-default", headers={"Host": "api.example.com"})
    assert response.status_code == 404
    response = client.post("/", headers={"Host": "api.example.com"})
    assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD"
    assert client.get("/only-default", headers={"Host": "nope.test"}).text == "default only"


def test_a_host_middleware_that_stops_gives_404(client: TestClient) -> None:
    assert client.get("/", headers={"Host": "blocked.example.com"}).status_code == 404


@pytest.mark.parametrize("pattern", ["*", "*.*.example.com", "exa mple.com", "a.*.com", "-a.com"])
def test_malformed_host_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="is not a host name or a"):
        Server().host(pattern)


def test_the_same_pattern_gives_the_same_router() -> None:
    server = Server()
    assert server.host("a.example.com") is server.host("A.example.com")


def test_no_host_after_the_routes_are_frozen() -> None:
    server = Server()
    server.freeze()
    with pytest.raises(RuntimeError):
        server.host("a.example.com")
