"""Server.handle: middleware order, auto-finalize, 404s and error answers."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from socketify import HTTPError, Request, Response, Server, ServerOptions
from tests.support.wire import wire_bytes


def ok(req: Request, res: Response) -> None:
    res.send("ok")


def tag(name: str, log: list[str]):
    """A middleware that records before/after next()."""

    def middleware(req: Request, res: Response, next) -> None:
        log.append(f"{name}>")
        next()
        log.append(f"<{name}")

    return middleware


# -- options --------------------------------------------------------------------------------


def test_defaults_are_frozen_server_options() -> None:
    server = Server()
    assert server.settings == ServerOptions()
    assert server.settings.max_body_size == 16 * 1024 * 1024
    assert server.settings.backlog == 2048
    with pytest.raises(AttributeError):
        server.settings.debug = True  # type: ignore[misc]


def test_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Server(max_body=1)


@pytest.mark.parametrize(
    "option",
    [
        {"header_timeout": 0},
        {"workers": -1},
        {"max_requests": -1},
        {"backlog": "x"},
        {"http2_max_concurrent_streams": 0},
        {"http2_max_resets_per_second": 0},
        {"http2_send_timeout": 0},
        {"http2_max_frame_size": 1024},
        {"http2_max_frame_size": 1 << 24},
        {"http2_max_frame_size": True},
    ],
)
def test_out_of_range_option_is_a_value_error(option: dict) -> None:
    with pytest.raises(ValueError):
        Server(**option)


def test_import_socketify_does_not_import_gevent() -> None:
    code = "import sys, socketify; assert 'gevent' not in sys.modules, 'gevent imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_serving_before_listen_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError):
        Server().wait()


# -- middleware order -----------------------------------------------------------------------


def test_full_order_global_group_route_handler(call) -> None:
    log: list[str] = []
    server = Server()
    server.use(tag("g1", log)).use(tag("g2", log))
    api = server.group("/api")
    api.use(tag("grp", log))

    def handler(req: Request, res: Response) -> None:
        log.append("handler")
        res.send("done")

    server.get("/api/x", handler).use(tag("route", log))
    assert call(server, "GET", "/api/x").body == b"done"
    assert log == ["g1>", "g2>", "grp>", "route>", "handler", "<route", "<grp", "<g2", "<g1"]


def test_middleware_can_add_headers_and_cookies_after_next(call) -> None:
    server = Server()

    def timing(req: Request, res: Response, next) -> None:
        next()
        res.set_header("Server-Timing", "app;dur=1").set_cookie("seen", "1")

    server.use(timing)
    server.get("/", ok)
    wire = wire_bytes(call(server))
    assert b"Server-Timing: app;dur=1\r\n" in wire
    assert b"Set-Cookie: seen=1; Path=/\r\n" in wire


def test_global_middleware_runs_for_404_and_sees_the_404_after_next(call) -> None:
    seen: list[int] = []
    server = Server()

    def logger(req: Request, res: Response, next) -> None:
        next()
        seen.append(res.status_code)

    server.use(logger)
    server.get("/x", ok)
    res = call(server, "GET", "/nope")
    assert res.status_code == 404 and seen == [404]


def test_global_middleware_that_stops_gives_404_keeping_its_headers(call) -> None:
    server = Server()

    def stopper(req: Request, res: Response, next) -> None:
        res.set_header("X-Request-Id", "abc")
        res.set_header("Content-Type", "application/json")

    server.use(stopper)
    server.get("/", ok)
    res = call(server)
    assert res.status_code == 404
    assert res.body == b"Not Found\n"
    assert res.get_header("X-Request-Id") == "abc"
    assert res.content_type == "application/json"  # a type set by middleware stays


def test_not_found_is_text_plain_by_default(call) -> None:
    res = call(Server(), "GET", "/nope")
    assert (res.status_code, res.body, res.content_type) == (
        404,
        b"Not Found\n",
        "text/plain; charset=utf-8",
    )


def test_route_middleware_that_stops_auto_finalizes_200(call) -> None:
    server = Server()

    def stopper(req: Request, res: Response, next) -> None:
        res.write("partial")

    server.get("/", ok).use(stopper)
    res = call(server)
    assert (res.status_code, res.body) == (200, b"partial")


def test_group_middleware_that_stops_keeps_its_status(call) -> None:
    server = Server()
    server.group("/g").use(lambda req, res, next: res.status(202))
    server.get("/g/x", ok)
    res = call(server, "GET", "/g/x")
    assert res.status_code == 202 and res.ended and res.body == b""


def test_middleware_that_ends_short_circuits(call) -> None:
    log: list[str] = []
    server = Server()

    def deny(req: Request, res: Response, next) -> None:
        res.json_error(401, "unauthorized")
        next()  # after end: does nothing

    server.use(deny)
    server.use(tag("after", log))
    server.get("/", ok)
    res = call(server)
    assert res.status_code == 401 and res.body == b'{"error":"unauthorized"}'
    assert log == []


def test_next_called_twice_runs_the_rest_once(call) -> None:
    count = []
    server = Server()

    def twice(req: Request, res: Response, next) -> None:
        next()
        next()

    def handler(req: Request, res: Response) -> None:
        count.append(1)

    server.use(twice)
    server.get("/", handler)
    call(server)
    assert count == [1]


def test_handler_without_end_is_auto_finalized(call) -> None:
    server = Server()

    def handler(req: Request, res: Response) -> None:
        res.status(201).write("a")
        res.write(b"b")

    server.post("/", handler)
    res = call(server, "POST", "/")
    assert (res.status_code, res.body, res.ended) == (201, b"ab", True)


def test_handler_doing_nothing_gives_empty_200(call) -> None:
    server = Server()
    server.get("/", lambda req, res: None)
    res = call(server)
    wire = wire_bytes(res)
    assert wire.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Length: 0\r\n" in wire and b"Content-Type" not in wire


# -- groups ---------------------------------------------------------------------------------


def test_group_middleware_applies_at_path_boundaries_only(call) -> None:
    hits: list[str] = []
    server = Server()
    server.group("/api").use(lambda req, res, next: (hits.append(req.path), next()))
    server.get("/api", ok)
    server.get("/api/x", ok)
    server.get("/apiv2/x", ok)  # registered on the server, not the group
    for target in ("/api", "/api/x", "/apiv2/x"):
        call(server, "GET", target)
    assert hits == ["/api", "/api/x"]


def test_root_group_covers_every_route(call) -> None:
    hits: list[str] = []
    server = Server()
    server.group("/").use(lambda req, res, next: (hits.append(req.path), next()))
    server.get("/a", ok)
    server.get("/b/c", ok)
    call(server, "GET", "/a")
    call(server, "GET", "/b/c")
    assert hits == ["/a", "/b/c"]


def test_several_groups_with_same_prefix_apply_in_creation_order(call) -> None:
    log: list[str] = []
    server = Server()
    first = server.group("/api")
    second = server.group("/api")
    second.use(tag("second", log))
    first.use(tag("first", log))
    second.get("/x", ok)
    call(server, "GET", "/api/x")
    assert log == ["first>", "second>", "<second", "<first"]


def test_group_middleware_used_after_routes_still_applies(call) -> None:
    log: list[str] = []
    server = Server()
    api = server.group("/api")
    api.get("/x", ok)
    api.use(tag("late", log))
    call(server, "GET", "/api/x")
    assert log == ["late>", "<late"]


def test_group_with_param_prefix_covers_routes_whatever_param_names(call) -> None:
    log: list[str] = []
    server = Server()
    server.group("/u/:id").use(tag("u", log))
    server.get("/u/{uid}/x", ok)
    call(server, "GET", "/u/1/x")
    assert log == ["u>", "<u"]


def test_group_middleware_does_not_run_for_404_or_405(call) -> None:
    log: list[str] = []
    server = Server()
    server.group("/api").use(tag("grp", log))
    server.get("/api/x", ok)
    assert call(server, "POST", "/api/x").status_code == 405
    assert call(server, "GET", "/api/nope").status_code == 404
    assert log == []


# -- errors ---------------------------------------------------------------------------------


def test_http_error_gives_status_message_and_headers_keeping_earlier_ones(call) -> None:
    server = Server()

    def cors(req: Request, res: Response, next) -> None:
        res.set_header("Access-Control-Allow-Origin", "*").set_cookie("a", "1")
        next()

    def handler(req: Request, res: Response) -> None:
        res.set_header("Content-Type", "application/json")
        raise HTTPError(429, "slow down", headers={"Retry-After": "3"})

    server.use(cors)
    server.get("/", handler)
    res = call(server)
    assert res.status_code == 429
    assert res.body == b"slow down\n"
    assert res.content_type == "text/plain; charset=utf-8"
    assert res.get_header("Retry-After") == "3"
    assert res.get_header("Access-Control-Allow-Origin") == "*"
    assert res.cookies == ["a=1; Path=/"]


def test_http_error_without_message_uses_reason(call) -> None:
    server = Server()

    def handler(req: Request, res: Response) -> None:
        raise HTTPError(403)

    server.get("/", handler)
    assert call(server).body == b"Forbidden\n"


def test_http_error_raised_in_global_middleware(call) -> None:
    server = Server()

    def guard(req: Request, res: Response, next) -> None:
        raise HTTPError(401, "no")

    server.use(guard)
    res = call(server, "GET", "/anything")
    assert (res.status_code, res.body) == (401, b"no\n")


def test_exception_gives_500_keeping_headers_and_cookies(call, caplog) -> None:
    server = Server()

    def mw(req: Request, res: Response, next) -> None:
        res.set_header("X-Request-Id", "r1").set_cookie("sid", "x")
        next()

    def handler(req: Request, res: Response) -> None:
        raise RuntimeError("secret detail")

    server.use(mw)
    server.get("/", handler)
    with caplog.at_level(logging.ERROR, logger="socketify.error"):
        res = call(server)
    assert res.status_code == 500
    assert res.body == b"Internal Server Error\n"
    assert res.get_header("X-Request-Id") == "r1"
    assert res.cookies == ["sid=x; Path=/"]
    assert any("secret detail" in (r.exc_text or "") for r in caplog.records)


def test_exception_after_end_replaces_the_body(call) -> None:
    server = Server()

    def late(req: Request, res: Response, next) -> None:
        next()
        raise ValueError("boom")

    def handler(req: Request, res: Response) -> None:
        res.set_header("Content-Disposition", "attachment")
        res.json({"a": 1})

    server.use(late)
    server.get("/", handler)
    res = call(server)
    assert res.status_code == 500 and res.body == b"Internal Server Error\n"
    assert res.content_type == "text/plain; charset=utf-8"
    assert res.get_header("Content-Disposition") is None


def test_debug_mode_shows_traceback(call) -> None:
    server = Server(debug=True)

    def handler(req: Request, res: Response) -> None:
        raise KeyError("missing-thing")

    server.get("/", handler)
    body = call(server).body.decode()
    assert body.startswith("Internal Server Error\n\nTraceback")
    assert "missing-thing" in body


def test_exceptions_propagate_through_next_so_middleware_can_map_them(call) -> None:
    server = Server()

    def mapper(req: Request, res: Response, next) -> None:
        try:
            next()
        except LookupError:
            res.reset_for_error()
            res.json_error(404, "no such row")

    def handler(req: Request, res: Response) -> None:
        raise LookupError("row")

    server.use(mapper)
    server.get("/", handler)
    res = call(server)
    assert (res.status_code, res.body) == (404, b'{"error":"no such row"}')


def test_on_error_customises(call) -> None:
    server = Server()
    server.get("/", lambda req, res: 1 / 0)

    @server.on_error
    def handle(req: Request, res: Response, exc: Exception) -> None:
        res.json_error(500, type(exc).__name__)

    res = call(server)
    assert (res.status_code, res.body) == (500, b'{"error":"ZeroDivisionError"}')


def test_on_error_that_raises_falls_back_to_generic_500(call) -> None:
    server = Server()
    server.get("/", lambda req, res: 1 / 0)

    def broken(req: Request, res: Response, exc: Exception) -> None:
        res.set_header("X-Partial", "1")
        raise RuntimeError("handler broke too")

    server.on_error(broken)
    res = call(server)
    assert (res.status_code, res.body) == (500, b"Internal Server Error\n")


def test_on_error_does_not_see_http_errors(call) -> None:
    seen: list[Exception] = []
    server = Server()

    def handler(req: Request, res: Response) -> None:
        raise HTTPError(418, "teapot")

    server.get("/", handler)
    server.on_error(lambda req, res, exc: seen.append(exc))
    res = call(server)
    assert res.status_code == 418 and seen == []


def test_http_error_with_bad_header_falls_back_to_500(call) -> None:
    server = Server()

    def handler(req: Request, res: Response) -> None:
        raise HTTPError(400, "x", headers={"X-Bad": "a\r\nb"})

    server.get("/", handler)
    assert call(server).status_code == 500


def test_invalid_json_body_gives_400(call) -> None:
    server = Server()
    server.post("/", lambda req, res: res.json(req.json()))
    res = call(server, "POST", "/", body=b"{nope")
    assert (res.status_code, res.body) == (400, b"Invalid JSON body\n")
    assert call(server, "POST", "/", body=b'{"a":1}').body == b'{"a":1}'


def test_base_exceptions_are_not_swallowed(call) -> None:
    server = Server()

    def handler(req: Request, res: Response) -> None:
        raise KeyboardInterrupt

    server.get("/", handler)
    with pytest.raises(KeyboardInterrupt):
        call(server)


def test_a_failing_middleware_is_logged_with_its_own_frame(call, caplog) -> None:
    from socketify.core.chain import hooked

    def broken(req: Request, res: Response) -> bool:
        raise ValueError("broken before")

    server = Server()
    server.use(hooked(broken, name="broken"))
    server.get("/", ok)
    with caplog.at_level(logging.ERROR, logger="socketify.error"):
        assert call(server).status_code == 500
    shown = caplog.records[-1].exc_text or ""
    assert 'raise ValueError("broken before")' in shown and "in broken" in shown


@pytest.mark.parametrize("middleware", ["none", "hooked", "plain"])
def test_a_failing_encoder_is_logged_and_the_answer_goes_out_as_it_was(
    middleware: str, call, caplog
) -> None:
    from socketify.core.chain import hooked

    def encoder(req: Request, res: Response) -> None:
        res.set_header("X-Encoder", "ran")
        raise RuntimeError("encoder bug")

    server = Server()
    server._compress = encoder  # type: ignore[assignment]  # a failing encoder
    if middleware == "hooked":
        server.use(hooked(lambda req, res: True))
    elif middleware == "plain":
        server.use(lambda req, res, next: next())
    server.get("/", ok)
    with caplog.at_level(logging.ERROR, logger="socketify.error"):
        res = call(server)
    assert (res.status_code, res.body, res.get_header("X-Encoder")) == (200, b"ok", "ran")
    assert "compression failed for GET /" in caplog.text


def test_a_subclass_that_wraps_handle_stays_in_charge(call) -> None:
    seen: list[str] = []

    class Wrapping(Server):
        def handle(self, req: Request, res: Response) -> None:
            seen.append(req.path)
            super().handle(req, res)

    server = Wrapping()
    server.get("/", ok)
    assert [call(server).body, call(server).body] == [b"ok", b"ok"]
    assert seen == ["/", "/"]
