"""Request: lazy parsing of path, headers, query, cookies, body and proxy data."""

from __future__ import annotations

import pytest

from socketify import HTTPError, Request
from socketify.core.urlencoded import parse_query
from socketify.protocol.http11 import END_OF_MESSAGE, RequestParser


def test_request_line_fields(make_request) -> None:
    req = make_request("GET", "/a%20b/c?x=1", version="HTTP/1.0")
    assert req.method == "GET"
    assert req.path == "/a b/c"
    assert req.raw_target == "/a%20b/c?x=1"
    assert req.raw_path == "/a%20b/c"
    assert req.query_string == "x=1"
    assert req.http_version == "HTTP/1.0"


def test_path_decodes_encoded_slash_for_display(make_request) -> None:
    assert make_request("GET", "/a%2Fb").path == "/a/b"


def test_headers_are_case_insensitive_and_repeats_joined(make_request) -> None:
    req = make_request("GET", "/", [("Accept", "a"), ("X-Multi", "1"), ("x-multi", "2")])
    assert req.header("ACCEPT") == "a"
    assert req.header("x-multi") == "1, 2"
    assert req.header("missing") == ""
    assert req.header("missing", "d") == "d"
    assert req.headers["X-MULTI"] == "1, 2"
    assert req.headers.getall("x-multi") == ["1", "2"]
    assert "accept" in req.headers and "Accept" in req.headers


def test_header_mapping_is_built_lazily(make_request) -> None:
    req = make_request("GET", "/", [("Host", "h")])
    assert req.header("host") == "h"
    assert req._headers is None
    _ = req.headers
    assert req._headers is not None


def test_middleware_can_rewrite_request_headers(make_request) -> None:
    req = make_request("GET", "/", [("X-Request-Id", "old")])
    assert req.headers["x-request-id"] == "old"
    req.set_header("X-Request-Id", "new")
    assert req.header("x-request-id") == "new" and req.headers["X-Request-Id"] == "new"
    req.set_header("x-request-id", None)
    assert req.header("X-Request-Id", "gone") == "gone" and "x-request-id" not in req.headers


def test_the_header_mapping_is_read_only_and_says_what_to_use(make_request) -> None:
    req = make_request("GET", "/", [("X-A", "1")])
    with pytest.raises(TypeError, match="set_header"):
        req.headers["X-A"] = "2"


def test_query_last_wins_getall_plus_and_escapes(make_request) -> None:
    req = make_request("GET", "/?a=1&a=2&b=x+y%21&c&=skip&d=%zz&&e=%E2%82%AC")
    q = req.query
    assert q["a"] == "2" and q.getall("a") == ["1", "2"]
    assert q["b"] == "x y!"
    assert q["c"] == ""
    assert "" not in q
    assert q["d"] == "%zz"
    assert q["e"] == "\u20ac"
    assert q.get("nope") is None


def test_query_is_lazy(make_request) -> None:
    req = make_request("GET", "/?a=1")
    assert req._query is None
    assert req.query["a"] == "1"


def test_parse_query_empty() -> None:
    assert len(parse_query("")) == 0


def test_cookies_follow_spec_rules(make_request) -> None:
    req = make_request(
        "GET", "/", [("Cookie", 'a=1; b="quoted"; novalue; =x; a=2; c=%20raw; d=e=f')]
    )
    assert req.cookies == {"a": "2", "b": "quoted", "c": "%20raw", "d": "e=f"}
    assert req.cookie("a") == "2"
    assert req.cookie("missing") == ""
    assert req.cookie("missing", "dflt") == "dflt"


def test_cookies_from_several_cookie_headers(make_request) -> None:
    req = make_request("GET", "/", [("Cookie", "a=1"), ("Cookie", "b=2")])
    assert req.cookies == {"a": "1", "b": "2"}


def test_no_cookie_header_gives_empty_dict(make_request) -> None:
    assert make_request().cookies == {}


def test_body_text_and_charset(make_request) -> None:
    req = make_request(
        "POST", "/", [("Content-Type", "text/plain; charset=latin-1")], "é".encode("latin-1")
    )
    assert req.content_type == "text/plain; charset=latin-1"
    assert req.charset == "latin-1"
    assert req.text == "é"
    assert make_request("POST", "/", body="é".encode()).text == "é"
    bogus = make_request("POST", "/", [("Content-Type", "text/plain; charset=nope")], b"ok")
    assert bogus.text == "ok"


def test_json_parses_and_ignores_content_type(make_request) -> None:
    assert make_request("POST", "/", body=b'{"a":[1,2]}').json() == {"a": [1, 2]}


@pytest.mark.parametrize("body", [b"", b"{", b"nope", b"\xff"])
def test_json_empty_or_invalid_raises_400(make_request, body: bytes) -> None:
    with pytest.raises(HTTPError) as info:
        make_request("POST", "/", body=body).json()
    assert info.value.status == 400
    assert info.value.message == "Invalid JSON body"


def test_params_and_locals_are_per_request(make_request) -> None:
    a, b = make_request(), make_request()
    a.params["x"] = "1"
    a.locals["user"] = "u"
    assert b.params == {} and b.locals == {}


def test_remote_ip_ignores_forwarded_headers_by_default(make_request) -> None:
    req = make_request("GET", "/", [("X-Forwarded-For", "1.2.3.4")], remote_addr="10.0.0.9")
    assert req.remote_ip == "10.0.0.9"


def test_remote_ip_uses_first_x_forwarded_for_when_trusted(make_request) -> None:
    req = make_request("GET", "/", [("X-Forwarded-For", " 1.2.3.4 , 5.6.7.8")], trust_proxy=True)
    assert req.remote_ip == "1.2.3.4"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60"),
        ('for="[2001:db8:cafe::17]:4711"', "2001:db8:cafe::17"),
        ("for=192.0.2.43:80, for=198.51.100.17", "192.0.2.43"),
        ("proto=https", "10.0.0.1"),
    ],
)
def test_remote_ip_from_forwarded_header(make_request, value: str, expected: str) -> None:
    req = make_request("GET", "/", [("Forwarded", value)], trust_proxy=True)
    assert req.remote_ip == expected


def test_scheme_and_host_with_and_without_trusted_proxy(make_request) -> None:
    headers = [
        ("Host", "inner:8080"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "ex.com"),
    ]
    plain = make_request("GET", "/", headers)
    assert (plain.scheme, plain.host) == ("http", "inner:8080")
    trusted = make_request("GET", "/", headers, trust_proxy=True)
    assert (trusted.scheme, trusted.host) == ("https", "ex.com")
    fwd = make_request("GET", "/", [("Forwarded", "for=1.1.1.1;proto=https")], trust_proxy=True)
    assert fwd.scheme == "https"


@pytest.mark.parametrize(
    "forwarded",
    ["a b", "evil.com/x?@a", "evil.com\x01", "[::zz]", "h:123456", "@evil.com"],
)
def test_a_forwarded_host_that_is_no_authority_gives_way_to_host(make_request, forwarded) -> None:
    headers = [("Host", "inner:8080"), ("X-Forwarded-Host", forwarded)]
    assert make_request("GET", "/", headers, trust_proxy=True).host == "inner:8080"


def test_the_first_of_several_forwarded_hosts_is_the_host(make_request) -> None:
    headers = [("Host", "inner"), ("X-Forwarded-Host", " shop.example:8443 , inner")]
    assert make_request("GET", "/", headers, trust_proxy=True).host == "shop.example:8443"


def test_requests_sharing_one_parsed_head_keep_their_own_headers_and_params() -> None:
    # The parser hands byte-identical heads out as one object; what middleware changes on
    # one request must not show on the next.
    parser = RequestParser()
    parser.feed(b"GET /u/7?q=1 HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n" * 2)
    first_head = parser.next_event()
    assert parser.next_event() is END_OF_MESSAGE
    first = Request(first_head, b"", "10.0.0.1")
    first.set_header("X-A", "changed")
    first.params = {"id": "7"}
    first.locals["k"] = "v"
    second = Request(parser.next_event(), b"", "10.0.0.1")
    assert second.header("x-a") == "1" and second.headers["x-a"] == "1"
    assert second.params == {} and second.locals == {}
    assert second.query["q"] == "1"


def test_a_changed_field_reads_back_everywhere(make_request) -> None:
    req = make_request("GET", "/", [("X-A", "old"), ("Cookie", "a=1"), ("x-a", "older")])
    req.set_header("x-a", "new")
    req.set_header("X-B", "added")
    assert req.header("X-A") == "new" and req.header("x-b") == "added"
    assert req.headers.getall("x-a") == ["new"] and req.headers["X-B"] == "added"
    assert req.header_fields() == [("cookie", "a=1"), ("x-a", "new"), ("x-b", "added")]
    assert req.cookies == {"a": "1"}
    req.set_header("Cookie", "b=2")
    assert req.cookies == {"b": "2"}
    req.set_header("x-a", "newest")  # the mapping built above is built again
    assert req.headers["x-a"] == "newest" and req.header("x-a") == "newest"


def test_a_field_set_on_a_shared_head_stays_on_its_request() -> None:
    parser = RequestParser()
    parser.feed(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n" * 2)
    head = parser.next_event()
    assert parser.next_event() is END_OF_MESSAGE
    first = Request(head, b"", "10.0.0.1")
    first.set_header("x-a", "changed")
    first.set_header("x-new", "v")
    second = Request(parser.next_event(), b"", "10.0.0.1")
    assert second.head is head  # an immutable value, shared by the parser's head cache
    assert second.header("x-a") == "1" and second.header("x-new") == ""
    assert first.header("X-A") == "changed" and first.header("x-new") == "v"
    assert dict(head.names) == {"host": "h", "x-a": "1"}
    assert head.headers == (("host", "h"), ("x-a", "1"))
    with pytest.raises(TypeError):
        head.names["x-a"] = "changed"  # type: ignore[index]


def test_header_lookups_by_any_case_after_a_lower_case_miss(make_request) -> None:
    absent = make_request("GET", "/", [("Host", "h")])
    assert absent.header("x-late") == "" and absent.header("x-late", "d") == "d"
    present = make_request("GET", "/", [("X-Late", "v")])
    assert present.header("x-late") == "v" and present.header("X-LATE") == "v"
    assert absent.header("X-Late") == ""
