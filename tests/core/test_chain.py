"""Middleware chains: the walking rules, and hooked middleware behaving like the `next` form."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from socketify import Request, Response, Server
from socketify.core.chain import Chain, Hooked, hooked
from socketify.core.errors import HTTPError
from socketify.protocol.http11 import RequestHead
from socketify.testing import TestClient


def _recorder(log: list[str], name: str, *, stop: bool = False, end: bool = False) -> Hooked:
    def before(req: Request, res: Response) -> bool:
        log.append(f"{name}>")
        if end:
            res.send(f"ended by {name}\n")
        return not stop

    def after(req: Request, res: Response, error: BaseException | None) -> None:
        log.append(f"<{name}:{type(error).__name__ if error else 'ok'}")

    return hooked(before, after, name=name)


def _breaks_after(log: list[str], name: str) -> Hooked:
    def after(req: Request, res: Response, error: BaseException | None) -> None:
        log.append(f"<{name}:{type(error).__name__ if error else 'ok'}")
        raise RuntimeError(f"{name} failed after")

    return hooked(after=after, name=name)


def _plain(log: list[str], name: str) -> Callable[..., None]:
    def middleware(req: Request, res: Response, next: Callable[[], None]) -> None:
        log.append(f"{name}>")
        try:
            next()
        except Exception as exc:
            log.append(f"<{name}:{type(exc).__name__}")
            raise
        log.append(f"<{name}:ok")

    return middleware


def _as_plain(middleware: Hooked) -> Callable[..., None]:
    """The same middleware hidden behind a plain function, so the chain sees the slow form."""

    def plain(req: Request, res: Response, next: Callable[[], None]) -> None:
        middleware(req, res, next)

    return plain


def _run(build: Callable[[list[str]], list[Any]], handler: Callable[..., None], path: str) -> Any:
    log: list[str] = []
    server = Server(compression=False)
    for middleware in build(log):
        server.use(middleware)
    server.get("/x", handler)
    response = TestClient(server).get(path)
    return log, response.status, response.text


def _ok(req: Request, res: Response) -> None:
    res.send("ok\n")


def _fails(req: Request, res: Response) -> None:
    raise HTTPError(418, "teapot")


SCENARIOS = {
    "all go on": (lambda log: [_recorder(log, "a"), _recorder(log, "b")], _ok, "/x"),
    "mixed with plain": (
        lambda log: [_recorder(log, "a"), _plain(log, "p"), _recorder(log, "b")],
        _ok,
        "/x",
    ),
    "a before stops": (
        lambda log: [_recorder(log, "a"), _recorder(log, "b", stop=True, end=True)],
        _ok,
        "/x",
    ),
    "stops without answering": (
        lambda log: [_recorder(log, "a"), _recorder(log, "b", stop=True)],
        _ok,
        "/x",
    ),
    "ends but goes on": (
        lambda log: [_recorder(log, "a", end=True), _recorder(log, "b")],
        _ok,
        "/x",
    ),
    "handler raises": (
        lambda log: [_recorder(log, "a"), _plain(log, "p"), _recorder(log, "b")],
        _fails,
        "/x",
    ),
    "no route": (lambda log: [_recorder(log, "a"), _recorder(log, "b")], _ok, "/nope"),
    "an after hook raises": (
        lambda log: [_recorder(log, "a"), _breaks_after(log, "x"), _recorder(log, "b")],
        _ok,
        "/x",
    ),
    "an after hook raises over an error": (
        lambda log: [_recorder(log, "a"), _breaks_after(log, "x"), _recorder(log, "b")],
        _fails,
        "/x",
    ),
    # Hooks with no after between hooks with one, and the chain stopped at each place.
    **{
        f"before-only hooks, stops at {where}": (
            lambda log, where=where: [
                _recorder(log, "a"),
                _before_only(log, "b"),
                _recorder(log, "c", stop=where == "c", end=where == "c"),
                _before_only(log, "d", stop=where == "d"),
                _recorder(log, "e"),
            ],
            _fails if where == "handler" else _ok,
            "/x",
        )
        for where in ("c", "d", "handler")
    },
    # After-only hooks (not called on the way in by a flat chain) around a hook that goes on, stops,
    # ends the response but goes on, or raises.
    **{
        f"after-only hooks, c {how}": (
            lambda log, how=how: [
                _after_only(log, "x0"),
                _recorder(log, "a"),
                _after_only(log, "x1"),
                _acting(log, "c", how),
                _after_only(log, "x2"),
                _recorder(log, "e"),
                _after_only(log, "x3"),
            ],
            _fails if how == "goes on to a failing handler" else _ok,
            "/x",
        )
        for how in (
            "goes on",
            "stops",
            "ends and goes on",
            "raises",
            "goes on to a failing handler",
        )
    },
    "an after hook answers the error": (
        lambda log: [_recorder(log, "a"), _answering(log, "x"), _recorder(log, "b")],
        _fails,
        "/x",
    ),
    "an answering hook with nothing to answer": (
        lambda log: [_recorder(log, "a"), _answering(log, "x"), _recorder(log, "b")],
        _ok,
        "/x",
    ),
    "only after-only hooks": (
        lambda log: [_after_only(log, "x0"), _after_only(log, "x1")],
        _ok,
        "/x",
    ),
    **{
        f"befores in a row, {where} stops": (
            lambda log, where=where: [
                _recorder(log, "a"),
                _recorder(log, "b", stop=where == "b", end=where == "b"),
                _before_only(log, "c", stop=where == "c"),
                _recorder(log, "d"),
            ],
            _ok,
            "/x",
        )
        for where in ("b", "c", "nothing")
    },
}


def _answering(log: list[str], name: str) -> Hooked:
    def after(req: Request, res: Response, error: BaseException | None) -> bool:
        log.append(f"<{name}:{type(error).__name__ if error else 'ok'}")
        if error is None:
            return False
        res.reset_for_error()
        res.status(409).send("answered\n")
        return True

    return hooked(after=after, name=name)


def _after_only(log: list[str], name: str) -> Hooked:
    def after(req: Request, res: Response, error: BaseException | None) -> None:
        log.append(f"<{name}:{type(error).__name__ if error else 'ok'}")

    return hooked(after=after, name=name)


def _acting(log: list[str], name: str, how: str) -> Hooked:
    def before(req: Request, res: Response) -> bool:
        log.append(f"{name}>")
        if how == "raises":
            raise RuntimeError(f"{name} failed before")
        if how in ("stops", "ends and goes on"):
            res.send(f"ended by {name}\n")
        return how != "stops"

    return hooked(before, name=name)


def _before_only(log: list[str], name: str, *, stop: bool = False) -> Hooked:
    def before(req: Request, res: Response) -> bool:
        log.append(f"{name}>")
        return not stop

    return hooked(before, name=name)


def test_only_the_after_hooks_of_hooks_that_went_on_run_innermost_first() -> None:
    build, handler, path = SCENARIOS["before-only hooks, stops at d"]
    log, _status, _text = _run(build, handler, path)
    assert log == ["a>", "b>", "c>", "d>", "<c:ok", "<a:ok"]
    build, handler, path = SCENARIOS["before-only hooks, stops at handler"]
    log, status, _text = _run(build, handler, path)
    assert log == ["a>", "b>", "c>", "d>", "e>", "<e:HTTPError", "<c:HTTPError", "<a:HTTPError"]
    assert status == 418


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_hooked_middleware_in_a_chain_matches_the_next_form(scenario: str) -> None:
    build, handler, path = SCENARIOS[scenario]
    hooks = _run(build, handler, path)
    plain = _run(lambda log: [m if not isinstance(m, Hooked) else _as_plain(m) for m in build(log)],
                handler, path)  # fmt: skip
    assert hooks == plain


def test_after_only_hooks_run_when_reached_even_though_not_called_on_the_way_in() -> None:
    build, handler, path = SCENARIOS["after-only hooks, c ends and goes on"]
    log, _status, text = _run(build, handler, path)
    # x2 was never started (the response ended in c), so its after does not run.
    assert log == ["a>", "c>", "<x1:ok", "<a:ok", "<x0:ok"]
    assert text == "ended by c\n"
    build, handler, path = SCENARIOS["after-only hooks, c raises"]
    log, status, _text = _run(build, handler, path)
    assert log == ["a>", "c>", "<x1:RuntimeError", "<a:RuntimeError", "<x0:RuntimeError"]
    assert status == 500
    build, handler, path = SCENARIOS["only after-only hooks"]
    log, status, _text = _run(build, handler, path)
    assert (log, status) == (["<x1:ok", "<x0:ok"], 200)


def test_after_hooks_run_in_reverse_order_and_see_the_error() -> None:
    log, status, _ = _run(
        lambda log: [_recorder(log, "a"), _plain(log, "p"), _recorder(log, "b")], _fails, "/x"
    )
    assert log == ["a>", "p>", "b>", "<b:HTTPError", "<p:HTTPError", "<a:HTTPError"]
    assert status == 418


def test_a_before_that_stops_gets_no_after_but_outer_hooks_do() -> None:
    log, status, text = _run(
        lambda log: [_recorder(log, "a"), _recorder(log, "b", stop=True, end=True)], _ok, "/x"
    )
    assert log == ["a>", "b>", "<a:ok"]
    assert (status, text) == (200, "ended by b\n")


def test_an_ended_response_stops_the_chain_before_the_handler() -> None:
    log, _status, text = _run(
        lambda log: [_recorder(log, "a", end=True), _recorder(log, "b")], _ok, "/x"
    )
    assert log == ["a>", "<a:ok"]
    assert text == "ended by a\n"


def test_an_after_hook_that_raises_replaces_the_error_for_outer_hooks() -> None:
    log, status, _ = _run(
        lambda log: [_recorder(log, "a"), _breaks_after(log, "x"), _recorder(log, "b")],
        _fails,
        "/x",
    )
    assert log == ["a>", "b>", "<b:HTTPError", "<x:HTTPError", "<a:RuntimeError"]
    assert status == 500


def test_route_middleware_uses_hooks_too() -> None:
    log: list[str] = []
    server = Server(compression=False)
    server.get("/x", _ok).use(_recorder(log, "r"))
    response = TestClient(server).get("/x")
    assert response.text == "ok\n"
    assert log == ["r>", "<r:ok"]


def test_hooked_needs_a_hook() -> None:
    with pytest.raises(ValueError, match="needs a before or an after"):
        hooked()


def test_hooked_middleware_is_an_ordinary_callable_middleware() -> None:
    log: list[str] = []
    middleware = _recorder(log, "a")
    calls: list[str] = []
    req = _request()
    middleware(req, Response(req), lambda: calls.append("next"))
    assert calls == ["next"]
    assert log == ["a>", "<a:ok"]
    assert repr(middleware) == "<middleware a>"


def test_a_long_chain_runs_in_order() -> None:
    log: list[str] = []
    chain = [_recorder(log, f"m{n}") for n in range(20)]
    chain += [_before_only(log, f"b{n}") for n in range(60)]
    _log, status, text = _run(lambda _: chain, _ok, "/x")
    assert (status, text) == (200, "ok\n")
    assert log == (
        [f"m{n}>" for n in range(20)]
        + [f"b{n}>" for n in range(60)]
        + [f"<m{n}:ok" for n in reversed(range(20))]
    )


def _request() -> Request:
    return Request(RequestHead("GET", "/", "/", "", "HTTP/1.1", []), b"", "127.0.0.1")


def test_next_called_twice_runs_the_rest_of_the_chain_once() -> None:
    log: list[str] = []

    def twice(req: Request, res: Response, next: Callable[[], None]) -> None:
        next()
        next()

    chain = Chain([twice, _plain(log, "p")], lambda req, res: log.append("end"))
    req = _request()
    chain.run(req, Response(req))
    assert log == ["p>", "end", "<p:ok"]


def test_the_end_runs_only_when_every_middleware_went_on_unanswered() -> None:
    ends: list[str] = []
    req = _request()
    Chain([lambda req, res, next: None], lambda req, res: ends.append("stopped")).run(
        req, Response(req)
    )
    res = Response(req)
    answers = Chain(
        [lambda req, res, next: (res.send("early"), next())],
        lambda req, res: ends.append("answered"),
    )
    answers.run(req, res)
    assert res.body == b"early"
    Chain([], lambda req, res: ends.append("empty")).run(req, Response(req))
    assert ends == ["empty"]


def test_an_after_hook_that_answers_stops_the_error_for_the_hooks_outside() -> None:
    build, handler, path = SCENARIOS["an after hook answers the error"]
    log, status, text = _run(build, handler, path)
    assert (status, text) == (409, "answered\n")
    assert log == ["a>", "b>", "<b:HTTPError", "<x:HTTPError", "<a:ok"]


def test_an_answering_hook_called_as_a_plain_middleware_answers_too() -> None:
    log: list[str] = []
    answering = _answering(log, "x")
    server = Server(compression=False)
    server.get("/x", _fails).use(lambda req, res, next: answering(req, res, next))
    response = TestClient(server).get("/x")
    assert (response.status, response.text) == (409, "answered\n")
    assert log == ["<x:HTTPError"]
