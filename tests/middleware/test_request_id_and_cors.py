"""request_id(), which reuses only a well-formed incoming X-Request-Id, and the CORS middleware."""

from __future__ import annotations

import os
import re

import pytest

from socketify import Request, Response, Server, cors
from socketify.core.chain import hooked
from socketify.middleware import request_id, request_ids
from socketify.protocol.http11 import RequestHead
from socketify.testing import TestClient, TestResponse


def app(*middleware: object) -> TestClient:
    server = Server()
    for mw in middleware:
        server.use(mw)  # type: ignore[arg-type]

    @server.get("/rid")
    def rid(req, res):
        res.json({"header": req.header("X-Request-Id")})

    @server.any("/thing")
    def thing(req, res):
        res.send(f"{req.method} thing")

    return TestClient(server)


# -- request_id -----------------------------------------------------------------------------


def test_request_id_is_generated_16_hex_and_visible_everywhere() -> None:
    r = app(request_id()).get("/rid")
    rid = r.headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{16}", rid)
    assert r.json() == {"header": rid}


def test_request_ids_differ() -> None:
    client = app(request_id())
    assert client.get("/rid").headers["X-Request-Id"] != client.get("/rid").headers["X-Request-Id"]


def test_well_formed_incoming_id_is_reused() -> None:
    r = app(request_id()).get("/rid", headers={"X-Request-Id": "trace-42/abc:1"})
    assert r.headers["X-Request-Id"] == "trace-42/abc:1"
    assert r.json()["header"] == "trace-42/abc:1"


@pytest.mark.parametrize("bad", ["a b", "x" * 129, "caf\u00e9", "tab\there", '"quoted" <x>'[:0]])
def test_malformed_incoming_id_is_replaced(bad: str) -> None:
    headers = {"X-Request-Id": bad} if bad else {}
    r = app(request_id()).get("/rid", headers=headers)
    rid = r.headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{16}", rid)
    assert r.json()["header"] == rid


def test_an_empty_incoming_id_is_replaced_not_joined() -> None:
    r = app(request_id()).get("/rid", headers={"X-Request-Id": ""})
    rid = r.headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{16}", rid)
    assert r.json()["header"] == rid


def test_incoming_id_can_be_ignored_and_header_renamed() -> None:
    r = app(request_id("X-Trace", trust_incoming=False, generate=lambda: "fixed")).get(
        "/rid", headers={"X-Trace": "theirs"}
    )
    assert r.headers["X-Trace"] == "fixed"


def test_a_custom_generator_id_is_checked_as_any_header_value() -> None:
    spaced = app(request_id(generate=lambda: "id with spaces")).get("/rid")
    assert spaced.headers["X-Request-Id"] == "id with spaces"
    assert spaced.json() == {"header": "id with spaces"}
    broken = app(request_id(generate=lambda: "forged\r\nSet-Cookie: x=1")).get("/rid")
    assert broken.status == 500 and "Set-Cookie" not in broken.headers


def test_a_custom_generator_still_reuses_a_well_formed_incoming_id() -> None:
    r = app(request_id(generate=lambda: "mine")).get("/rid", headers={"X-Request-Id": "theirs"})
    assert r.headers["X-Request-Id"] == "theirs" and r.json() == {"header": "theirs"}
    fresh = app(request_id(generate=lambda: "mine")).get("/rid", headers={"X-Request-Id": "a b"})
    assert fresh.headers["X-Request-Id"] == "mine" and fresh.json() == {"header": "mine"}


def _reads_headers_first(req: Request, res: Response) -> bool:
    """A middleware that builds the request's Headers mapping before the others run."""
    assert req.headers["host"]
    return True


def test_an_id_set_after_the_headers_mapping_was_built_is_read_through_it() -> None:
    client = app(hooked(_reads_headers_first), request_id())
    r = client.get("/rid")
    rid = r.headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{16}", rid) and r.json() == {"header": rid}
    reused = client.get("/rid", headers={"X-Request-Id": "theirs"})
    assert reused.headers["X-Request-Id"] == "theirs" and reused.json() == {"header": "theirs"}


def test_each_request_sees_its_own_id_though_identical_requests_share_a_head() -> None:
    server = Server()
    server.use(request_id())
    server.get("/rid", lambda req, res: res.send(req.header("x-request-id")))
    # One head for every request, as the parser gives a keep-alive client's repeats.
    head = RequestHead("GET", "/rid", "/rid", "", "HTTP/1.1", [("host", "x")])
    answers = []
    for _ in range(300):  # more than one lot of made ids
        req = Request(head, b"", "127.0.0.1")
        res = Response(req)
        server.handle(req, res)
        answers.append((res.get_header("X-Request-Id"), res.body.decode()))
    ids = [rid for rid, _ in answers]
    assert [text for _, text in answers] == ids and len(set(ids)) == len(ids)
    assert dict(head.names) == {"host": "x"}  # the shared head never saw an id


def test_a_forked_child_never_gives_out_the_ids_its_parent_had_made() -> None:
    request_ids._fresh_id()  # the parent now holds made ids
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover  (the child process)
        os.write(write, request_ids._fresh_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    theirs = os.read(read, 64).decode()
    os.close(read)
    ours = [request_ids._fresh_id() for _ in range(request_ids._IDS_MADE)]
    assert re.fullmatch(r"[0-9a-f]{16}", theirs) and theirs not in ours


# -- CORS -----------------------------------------------------------------------------------

ORIGIN = "https://app.example"


def test_no_origin_means_no_cors_headers() -> None:
    r = app(cors.middleware()).get("/thing")
    assert not [h for h in r.headers if h.lower().startswith("access-control")]
    assert "Vary" not in r.headers


def test_cors_reads_the_origin_through_a_headers_mapping_built_earlier() -> None:
    client = app(hooked(_reads_headers_first), cors.middleware(allow_origin="*"))
    r = client.get("/thing", headers={"Origin": ORIGIN})
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Origin" not in client.get("/thing").headers


def test_wildcard_without_credentials() -> None:
    r = app(cors.middleware()).get("/thing", headers={"Origin": ORIGIN})
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    assert "Vary" not in r.headers and "Access-Control-Allow-Credentials" not in r.headers


def test_wildcard_replaces_an_allow_origin_set_earlier_and_keeps_other_headers() -> None:
    def earlier(req, res, next):
        res.set_header("Access-Control-Allow-Origin", "https://stale.example")
        res.set_header("X-Earlier", "kept")
        next()

    for chain in ([earlier, cors.middleware()], [request_id(), earlier, cors.middleware()]):
        r = app(*chain).get("/thing", headers={"Origin": ORIGIN})
        assert r.headers.getall("Access-Control-Allow-Origin") == ["*"]
        assert r.headers["X-Earlier"] == "kept"


def test_wildcard_with_credentials_allows_nothing() -> None:
    r = app(cors.middleware(allow_credentials=True)).get("/thing", headers={"Origin": ORIGIN})
    assert "Access-Control-Allow-Origin" not in r.headers


def test_configured_origin_matches_case_insensitively_with_vary() -> None:
    client = app(cors.middleware(allow_origin=ORIGIN, allow_credentials=True))
    r = client.get("/thing", headers={"Origin": "HTTPS://APP.EXAMPLE"})
    assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert r.headers["Access-Control-Allow-Credentials"] == "true"
    assert r.headers["Vary"] == "Origin"
    denied = client.get("/thing", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in denied.headers
    assert denied.headers["Vary"] == "Origin"  # the answer depends on Origin either way
    assert client.get("/thing").headers["Vary"] == "Origin"  # even without one (caches)


def test_origin_list_and_callable() -> None:
    listed = app(cors.middleware(allow_origin=[ORIGIN, "https://b.example"]))
    r = listed.get("/thing", headers={"Origin": "https://b.example"})
    assert r.headers["Access-Control-Allow-Origin"] == "https://b.example"
    judged = app(cors.middleware(allow_origin=lambda o: o.endswith(".example")))
    r = judged.get("/thing", headers={"Origin": "https://c.example"})
    assert r.headers["Access-Control-Allow-Origin"] == "https://c.example"
    r = judged.get("/thing", headers={"Origin": "https://c.evil"})
    assert "Access-Control-Allow-Origin" not in r.headers


def test_reflect_origin() -> None:
    r = app(cors.middleware(reflect_origin=True)).get("/thing", headers={"Origin": ORIGIN})
    assert r.headers["Access-Control-Allow-Origin"] == ORIGIN and r.headers["Vary"] == "Origin"


def test_vary_is_appended_not_replaced() -> None:
    def vary_first(req, res, next):
        res.set_header("Vary", "Accept-Language")
        next()

    r = app(vary_first, cors.middleware(allow_origin=ORIGIN)).get(
        "/thing", headers={"Origin": ORIGIN}
    )
    assert r.headers["Vary"] == "Accept-Language, Origin"


def test_expose_headers_on_simple_requests() -> None:
    client = app(cors.middleware(expose_headers=["X-Total", "X-Page"]))
    r = client.get("/thing", headers={"Origin": ORIGIN})
    assert r.headers["Access-Control-Expose-Headers"] == "X-Total,X-Page"


def preflight(client: TestClient, **extra: str) -> TestResponse:
    headers = {"Origin": ORIGIN, "Access-Control-Request-Method": "PUT", **extra}
    return client.options("/thing", headers=headers)


def test_preflight_defaults() -> None:
    r = preflight(app(cors.middleware()), **{"Access-Control-Request-Headers": "X-A, X-B"})
    assert r.status == 204 and r.body == b""
    h = r.headers
    assert h["Access-Control-Allow-Origin"] == "*"
    assert h["Access-Control-Allow-Methods"] == "GET,POST,PUT,PATCH,DELETE,OPTIONS,HEAD"
    assert h["Access-Control-Allow-Headers"] == "X-A, X-B"
    assert "Access-Control-Request-Headers" in h["Vary"]
    assert h["Access-Control-Max-Age"] == "600"


def test_preflight_with_configured_values_and_no_max_age() -> None:
    client = app(
        cors.middleware(allow_methods="GET, PUT", allow_headers="Content-Type", max_age_seconds=0)
    )
    h = preflight(client).headers
    assert h["Access-Control-Allow-Methods"] == "GET,PUT"
    assert h["Access-Control-Allow-Headers"] == "Content-Type"
    assert "Access-Control-Max-Age" not in h


def test_preflight_echoes_the_method_when_methods_are_empty() -> None:
    h = preflight(app(cors.middleware(allow_methods=""))).headers
    assert h["Access-Control-Allow-Methods"] == "PUT"


def test_preflight_private_network() -> None:
    client = app(cors.middleware(allow_private_network=True))
    h = preflight(client, **{"Access-Control-Request-Private-Network": "true"}).headers
    assert h["Access-Control-Allow-Private-Network"] == "true"
    assert "Access-Control-Allow-Private-Network" not in preflight(client).headers


def test_preflight_from_a_disallowed_origin_gets_204_without_allow_origin() -> None:
    client = app(cors.middleware(allow_origin="https://other.example"))
    r = preflight(client)
    assert r.status == 204
    assert "Access-Control-Allow-Origin" not in r.headers


def test_preflight_continue_reaches_the_handler() -> None:
    r = preflight(app(cors.middleware(preflight_continue=True)))
    assert r.status == 200 and r.body == b"OPTIONS thing"
    assert r.headers["Access-Control-Allow-Methods"]


def test_preflight_is_answered_even_without_a_route() -> None:
    r = app(cors.middleware()).options(
        "/no-route", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET"}
    )
    assert r.status == 204 and r.headers["Access-Control-Allow-Origin"] == "*"


def test_plain_options_is_not_a_preflight() -> None:
    r = app(cors.middleware()).options("/thing", headers={"Origin": ORIGIN})
    assert r.body == b"OPTIONS thing"


@pytest.mark.parametrize(
    "options",
    [
        {"reflect_origin": True},
        {"allow_origin": ["null", ORIGIN]},
        {"allow_origin": "null", "allow_credentials": True},
        {"allow_origin": lambda origin: True, "allow_credentials": True},
        {"reflect_origin": True, "allow_credentials": True, "allow_origin": [ORIGIN, "null"]},
        {
            "reflect_origin": True,
            "allow_credentials": True,
            "unsafe_reflect_any_origin_with_credentials": True,
        },
    ],
    ids=["reflect", "listed", "only-null", "callable", "reflect-listed", "unsafe-reflect-any"],
)
def test_the_null_origin_is_never_allowed(options: dict) -> None:
    client = app(cors.middleware(**options))
    answer = client.get("/thing", headers={"Origin": "null"})
    assert "Access-Control-Allow-Origin" not in answer.headers
    preflight = client.options(
        "/thing", headers={"Origin": "null", "Access-Control-Request-Method": "PUT"}
    )
    assert "Access-Control-Allow-Origin" not in preflight.headers


def test_the_public_wildcard_answers_a_null_origin_with_the_wildcard_not_null() -> None:
    answer = app(cors.middleware()).get("/thing", headers={"Origin": "null"})
    assert answer.headers["Access-Control-Allow-Origin"] == "*"


def test_reflecting_any_origin_with_credentials_is_refused_at_creation() -> None:
    with pytest.raises(ValueError, match="unsafe_reflect_any_origin_with_credentials"):
        cors.middleware(reflect_origin=True, allow_credentials=True)
    with pytest.raises(ValueError):
        cors.middleware(allow_origin=["*"], reflect_origin=True, allow_credentials=True)


def test_reflecting_any_origin_with_credentials_needs_the_unsafe_opt_in() -> None:
    client = app(
        cors.middleware(
            reflect_origin=True,
            allow_credentials=True,
            unsafe_reflect_any_origin_with_credentials=True,
        )
    )
    answer = client.get("/thing", headers={"Origin": "https://anyone.example"})
    assert answer.headers["Access-Control-Allow-Origin"] == "https://anyone.example"
    assert answer.headers["Access-Control-Allow-Credentials"] == "true"


def test_reflecting_listed_origins_with_credentials_needs_no_opt_in() -> None:
    client = app(
        cors.middleware(allow_origin=[ORIGIN], reflect_origin=True, allow_credentials=True)
    )
    assert (
        client.get("/thing", headers={"Origin": ORIGIN}).headers["Access-Control-Allow-Origin"]
        == ORIGIN
    )
    denied = client.get("/thing", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in denied.headers
