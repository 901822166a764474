"""Routing: patterns, precedence, decoding, 404/405/OPTIONS, groups."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socketify import HTTPError, Request, Response, Server
from socketify.core.routing import Router, allow_header, decode_path, split_path
from tests.support.wire import wire_bytes


def named(name: str):
    """A handler that answers its name and the params it got."""

    def handler(req: Request, res: Response) -> None:
        res.json({"route": name, "params": req.params})

    return handler


def answer(res: Response) -> dict:
    import orjson

    return orjson.loads(res.body)


# -- path splitting and decoding ------------------------------------------------------------


def test_split_path_ignores_empty_segments() -> None:
    assert split_path("//a///b/") == ["a", "b"]
    assert split_path("/") == []


def test_split_path_decodes_each_segment_after_splitting() -> None:
    assert split_path("/users/a%2Fb/x%20y") == ["users", "a/b", "x y"]


def test_split_path_keeps_plus_literal() -> None:
    assert split_path("/a+b") == ["a+b"]


@pytest.mark.parametrize("path", ["/a%", "/a%2", "/a%zz", "/%G0/x", "/a%00b"])
def test_split_path_rejects_malformed_escapes_and_nul(path: str) -> None:
    with pytest.raises(HTTPError) as info:
        split_path(path)
    assert info.value.status == 400
    assert info.value.message == "Malformed percent-encoding in path"


def test_decode_path_for_display_never_raises() -> None:
    assert decode_path("/a%2Fb") == "/a/b"
    assert decode_path("/a%zz") == "/a%zz"
    assert decode_path("/a%00") == "/a%00"


# -- matching -------------------------------------------------------------------------------


def test_static_route_and_trailing_or_double_slashes(call) -> None:
    server = Server()
    server.get("/a/b", named("ab"))
    for target in ("/a/b", "/a/b/", "//a///b", "/a/b?x=1"):
        res = call(server, "GET", target)
        assert res.status_code == 200, target
        assert answer(res)["route"] == "ab"


def test_static_segments_are_case_sensitive(call) -> None:
    server = Server()
    server.get("/About", named("about"))
    assert call(server, "GET", "/about").status_code == 404


def test_root_pattern_matches_only_root(call) -> None:
    server = Server()
    server.get("/", named("root"))
    assert call(server, "GET", "/").status_code == 200
    assert call(server, "GET", "/x").status_code == 404


def test_empty_pattern_means_root(call) -> None:
    server = Server()
    server.get("", named("root"))
    assert answer(call(server, "GET", "/"))["route"] == "root"


def test_params_colon_and_brace_forms(call) -> None:
    server = Server()
    server.get("/users/:id/posts/{post}", named("p"))
    assert answer(call(server, "GET", "/users/7/posts/9"))["params"] == {"id": "7", "post": "9"}


def test_param_keeps_encoded_slash_inside_its_segment(call) -> None:
    server = Server()
    server.get("/users/:id", named("user"))
    server.get("/users/a/b", named("static"))
    res = call(server, "GET", "/users/a%2Fb")
    assert answer(res) == {"route": "user", "params": {"id": "a/b"}}


def test_encoded_path_matches_static_route_after_decoding(call) -> None:
    server = Server()
    server.get("/caf\u00e9", named("cafe"))
    assert answer(call(server, "GET", "/caf%C3%A9"))["route"] == "cafe"


def test_param_needs_a_segment(call) -> None:
    server = Server()
    server.get("/users/:id", named("user"))
    assert call(server, "GET", "/users").status_code == 404
    assert call(server, "GET", "/users/").status_code == 404


def test_wildcard_captures_rest_or_empty(call) -> None:
    server = Server()
    server.get("/files/*path", named("files"))
    assert answer(call(server, "GET", "/files"))["params"] == {"path": ""}
    assert answer(call(server, "GET", "/files/"))["params"] == {"path": ""}
    assert answer(call(server, "GET", "/files/a/b/c.txt"))["params"] == {"path": "a/b/c.txt"}
    assert answer(call(server, "GET", "/files//a//b"))["params"] == {"path": "a/b"}


def test_root_wildcard_matches_slash(call) -> None:
    server = Server()
    server.get("/*rest", named("all"))
    assert answer(call(server, "GET", "/"))["params"] == {"rest": ""}


def test_segments_after_wildcard_are_discarded() -> None:
    router = Router()
    route = router.add("GET", "/a/*rest/ignored", named("x"))
    router.freeze()
    assert router.find("GET", "/a/b/c")[0] is route


def test_malformed_path_gives_400(call) -> None:
    server = Server()
    server.get("/*rest", named("all"))
    res = call(server, "GET", "/a%zz")
    assert res.status_code == 400
    assert res.body == b"Malformed percent-encoding in path\n"


# -- precedence -----------------------------------------------------------------------------


def test_static_beats_param_whatever_the_registration_order(call) -> None:
    server = Server()
    server.get("/users/:id", named("param"))
    server.get("/users/new", named("static"))
    assert answer(call(server, "GET", "/users/new"))["route"] == "static"
    assert answer(call(server, "GET", "/users/42"))["route"] == "param"


def test_param_beats_wildcard(call) -> None:
    server = Server()
    server.get("/a/*rest", named("wild"))
    server.get("/a/:x", named("param"))
    assert answer(call(server, "GET", "/a/1"))["route"] == "param"
    assert answer(call(server, "GET", "/a/1/2"))["route"] == "wild"


def test_precedence_is_per_segment_from_the_left_with_backtracking(call) -> None:
    server = Server()
    server.get("/:a/x", named("param-static"))
    server.get("/s/:b", named("static-param"))
    assert answer(call(server, "GET", "/s/x"))["route"] == "static-param"
    # The static branch fails deeper down, so the parameter branch is tried next.
    server2 = Server()
    server2.get("/s/y", named("static"))
    server2.get("/:a/x", named("param"))
    assert answer(call(server2, "GET", "/s/x"))["route"] == "param"


def test_same_shape_routes_use_registration_order(call) -> None:
    server = Server()
    server.get("/a/:x", named("first"))
    server.get("/a/:y", named("second"))
    assert answer(call(server, "GET", "/a/1"))["route"] == "first"


def test_exact_end_beats_wildcard_with_empty_rest(call) -> None:
    server = Server()
    server.get("/files/*p", named("wild"))
    server.get("/files", named("exact"))
    assert answer(call(server, "GET", "/files"))["route"] == "exact"


def test_method_mismatch_falls_through_to_less_specific_route(call) -> None:
    server = Server()
    server.get("/users/new", named("static-get"))
    server.post("/users/:id", named("param-post"))
    res = call(server, "POST", "/users/new")
    assert answer(res) == {"route": "param-post", "params": {"id": "new"}}


# -- methods, HEAD, 405, OPTIONS ------------------------------------------------------------


def test_any_matches_every_method(call) -> None:
    server = Server()
    server.any("/x", named("any"))
    for method in ("GET", "POST", "DELETE", "PATCH", "OPTIONS"):
        assert call(server, method, "/x").status_code == 200


def test_head_falls_back_to_get_and_sends_no_body(call) -> None:
    server = Server()
    server.get("/x", named("get"))
    res = call(server, "HEAD", "/x")
    get = call(server, "GET", "/x")
    assert res.status_code == 200
    head_wire = wire_bytes(res)
    assert head_wire.endswith(b"\r\n\r\n")
    assert b"Content-Length: %d" % len(get.body) in head_wire


def test_explicit_head_route_wins_when_registered_first(call) -> None:
    server = Server()
    server.head("/x", named("head"))
    server.get("/x", named("get"))
    assert answer(call(server, "HEAD", "/x"))["route"] == "head"


def test_get_registered_before_head_handles_head(call) -> None:
    server = Server()
    server.get("/x", named("get"))
    server.head("/x", named("head"))
    assert answer(call(server, "HEAD", "/x"))["route"] == "get"


def test_405_lists_allowed_methods_in_spec_order_with_head_appended(call) -> None:
    server = Server()
    server.post("/x", named("post"))
    server.get("/x", named("get"))
    res = call(server, "DELETE", "/x")
    assert res.status_code == 405
    assert res.get_header("Allow") == "GET, POST, HEAD"
    assert res.body == b"Method Not Allowed\n"
    assert res.content_type == "text/plain; charset=utf-8"


def test_405_allow_collects_methods_from_all_matching_patterns(call) -> None:
    server = Server()
    server.put("/u/:id", named("put"))
    server.get("/u/me", named("get"))
    assert call(server, "PATCH", "/u/me").get_header("Allow") == "GET, PUT, HEAD"


def test_options_without_handler_answers_204_with_allow(call) -> None:
    server = Server()
    server.get("/x", named("get"))
    server.delete("/x", named("delete"))
    res = call(server, "OPTIONS", "/x")
    assert res.status_code == 204
    assert res.get_header("Allow") == "GET, DELETE, OPTIONS, HEAD"
    wire = wire_bytes(res)
    assert b"Content-Length" not in wire
    assert wire.endswith(b"\r\n\r\n")


def test_explicit_options_handler_is_used(call) -> None:
    server = Server()
    server.get("/x", named("get"))
    server.options("/x", named("options"))
    assert answer(call(server, "OPTIONS", "/x"))["route"] == "options"


def test_options_on_unknown_path_is_404(call) -> None:
    server = Server()
    server.get("/x", named("get"))
    assert call(server, "OPTIONS", "/nope").status_code == 404


def test_allow_header_formatting() -> None:
    assert allow_header(["PUT", "GET"]) == "GET, PUT, HEAD"
    assert allow_header(["HEAD", "GET"]) == "GET, HEAD"
    assert allow_header(["POST"], with_options=True) == "POST, OPTIONS"


def test_route_method_is_validated_and_case_normalised() -> None:
    router = Router()
    assert router.add("get", "/x", named("x")).method == "GET"
    assert router.add("any", "/y", named("y")).method == "*"
    with pytest.raises(ValueError):
        router.add("GE T", "/z", named("z"))


def test_bad_patterns_are_refused() -> None:
    router = Router()
    with pytest.raises(ValueError):
        router.add("GET", "/a/:/b", named("x"))
    with pytest.raises(ValueError):
        router.add("GET", "/a/:id/:id", named("x"))


# -- registration forms, groups, freeze -----------------------------------------------------


def test_decorator_form_returns_the_function(call) -> None:
    server = Server()

    @server.get("/d")
    def handler(req: Request, res: Response) -> None:
        res.send("decorated")

    assert callable(handler) and handler.__name__ == "handler"
    assert call(server, "GET", "/d").body == b"decorated"


def test_route_method_generic_form(call) -> None:
    server = Server()
    server.route("PATCH", "/p", named("patch"))
    assert call(server, "PATCH", "/p").status_code == 200


def test_group_registers_under_prefix_collapsing_slashes(call) -> None:
    server = Server()
    api = server.group("/api/")
    api.get("/users", named("users"))
    assert answer(call(server, "GET", "/api/users"))["route"] == "users"


def test_nested_groups(call) -> None:
    server = Server()
    order: list[str] = []
    v1 = server.group("/api").group("/v1")
    v1.get("/x", named("x"))
    server.router._groups[0].use(lambda req, res, nxt: (order.append("api"), nxt()))
    v1.use(lambda req, res, nxt: (order.append("v1"), nxt()))
    assert answer(call(server, "GET", "/api/v1/x"))["route"] == "x"
    assert order == ["api", "v1"]


def test_registration_after_freeze_raises() -> None:
    server = Server()
    route = server.get("/x", named("x"))
    group = server.group("/g")
    server.freeze()
    with pytest.raises(RuntimeError):
        server.get("/y", named("y"))
    with pytest.raises(RuntimeError):
        server.use(lambda req, res, nxt: nxt())
    with pytest.raises(RuntimeError):
        route.use(lambda req, res, nxt: nxt())
    with pytest.raises(RuntimeError):
        group.use(lambda req, res, nxt: nxt())


def test_handle_freezes_lazily(call) -> None:
    server = Server()
    server.get("/x", named("x"))
    assert call(server, "GET", "/x").status_code == 200
    assert server.router.frozen


# -- the fast matcher agrees with a brute-force reference -----------------------------------

PATTERN_SEGMENTS = st.sampled_from(["a", "b", ":p", "{q}", "*w"])
ROUTES = st.lists(
    st.tuples(
        st.sampled_from(["GET", "POST", "ANY", "HEAD"]), st.lists(PATTERN_SEGMENTS, max_size=3)
    ),
    max_size=8,
)
PATHS = st.lists(st.sampled_from(["a", "b", "c"]), max_size=4)


def reference(routes: list[tuple[str, list[str]]], path: list[str], method: str):
    """Rank every matching pattern by (per-segment kind ranks, registration index)."""
    ranked = []
    for index, (route_method, segments) in enumerate(routes):
        key: list[int] = []
        matched = False
        for depth, seg in enumerate(segments):
            if seg.startswith("*"):
                key.append(2)
                matched = True
                break
            if depth >= len(path):
                break
            if seg.startswith((":", "{")):
                key.append(1)
            elif seg == path[depth]:
                key.append(0)
            else:
                break
        else:
            matched = len(segments) == len(path)
        if matched:
            ranked.append((key, index, route_method))
    ranked.sort()
    fits = [i for _, i, m in ranked if m in (method, "ANY") or (method == "HEAD" and m == "GET")]
    return (fits[0] if fits else None), {m for _, _, m in ranked}


def unique_name(item: tuple[int, str]) -> str:
    """Number parameter names by depth so a generated pattern never repeats one."""
    depth, seg = item
    if seg.startswith("{"):
        return f"{{q{depth}}}"
    return f"{seg}{depth}" if seg[0] in ":*" else seg


@given(ROUTES, PATHS, st.sampled_from(["GET", "POST", "HEAD", "PUT"]))
def test_find_matches_reference(routes, path, method) -> None:
    router = Router()
    made = [
        router.add(m, "/" + "/".join(map(unique_name, enumerate(segs))), named("r"))
        for m, segs in routes
    ]
    router.freeze()
    route, params, allowed = router.find(method, "/" + "/".join(path))
    expected, methods = reference(routes, path, method)
    assert route is (made[expected] if expected is not None else None)
    # Asked again, the remembered match is the same route with equal params.
    assert router.find(method, "/" + "/".join(path)) == (route, params, allowed)
    if route is None:
        expected_allowed = {"*" if m == "ANY" else m for m in methods}
        assert set(allowed or ()) == expected_allowed


def test_remembered_match_gives_each_request_its_own_params(call) -> None:
    server = Server()

    @server.get("/users/:id")
    def user(req: Request, res: Response) -> None:
        seen = dict(req.params)
        req.params["id"] = "changed by the handler"
        res.json(seen)

    for _ in range(3):
        assert answer(call(server, "GET", "/users/7")) == {"id": "7"}
    assert answer(call(server, "GET", "/users/%41")) == {"id": "A"}
    assert call(server, "POST", "/users/7").status_code == 405


def test_remembered_matches_are_bounded(monkeypatch) -> None:
    import socketify.core.routing

    monkeypatch.setattr(socketify.core.routing, "MATCHES_KEPT", 4)
    router = Router()
    route = router.add("GET", "/files/*rest", named("f"))
    router.freeze()
    for n in range(50):
        assert router.find("GET", f"/files/a/{n}") == (route, {"rest": f"a/{n}"}, None)
        assert len(router._matches) <= 4
    assert router.find("GET", "/files/a/49") == (route, {"rest": "a/49"}, None)
    router._matches.clear()
    long_path = "/files/" + "x" * socketify.core.routing.MATCH_PATH_MAX
    assert router.find("GET", long_path) == (route, {"rest": long_path[7:]}, None)
    assert router._matches == {}  # long paths are never remembered


def test_options_asterisk_lists_every_method_the_server_answers(call) -> None:
    server = Server()
    server.get("/a", named("a"))
    server.put("/b", named("b"))
    res = call(server, "OPTIONS", "*")
    assert res.status_code == 204
    assert res.get_header("Allow") == "GET, PUT, OPTIONS, HEAD"
    server_any = Server()
    server_any.any("/x", named("x"))
    allow = call(server_any, "OPTIONS", "*").get_header("Allow")
    assert allow == "GET, POST, PUT, PATCH, DELETE, OPTIONS, HEAD"
    assert call(server, "GET", "*").status_code == 400


def test_candidates_list_every_route_for_the_method_best_first() -> None:
    router = Router()
    user = router.add("GET", "/user/:id", named("user"))
    agent = router.add("GET", "/user/agent", named("agent"))
    fallback = router.add("ANY", "/*", named("fallback"))
    router.add("POST", "/user/:id", named("post"))
    router.freeze()
    found = list(router.candidates("GET", "/user/agent"))
    assert [route for route, _ in found] == [agent, user, fallback]
    assert [params for _, params in found] == [{}, {"id": "agent"}, {"*": "user/agent"}]
    assert [route for route, _ in router.candidates("HEAD", "/user/7")] == [user, fallback]
