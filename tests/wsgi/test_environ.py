"""The environ a WSGI app receives: PEP 3333's keys, paths as latin-1 text of their bytes,
SCRIPT_NAME from the mount and the root path, headers, proxies, and `wsgi.input`.

Fake WSGI apps record what they were given; the requests go through `TestClient`, the real
request path without sockets.
"""

from __future__ import annotations

from typing import Any

import pytest

from socketify import Server
from socketify.core.request import Request
from socketify.protocol.http.heads import RequestHead
from socketify.testing import TestClient
from socketify.wsgi import FileWrapper
from socketify.wsgi.environ import EnvironBuilder, wsgi_path


class Recorder:
    """A WSGI app that keeps the environ (and what `read_body` returns) and answers "ok"."""

    def __init__(self, read_body: Any = None) -> None:
        self.environ: dict[str, Any] = {}
        self.read_body = read_body
        self.body: Any = None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.environ = environ
        if self.read_body is not None:
            self.body = self.read_body(environ["wsgi.input"])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


def served(app: Any, prefix: str = "/", **options: Any) -> TestClient:
    root_path = options.pop("root_path", "")
    server = Server(**options)
    server.mount(prefix, app, root_path=root_path)
    return TestClient(server)


def test_the_environ_has_every_key_pep_3333_requires() -> None:
    app = Recorder()
    served(app).get("/a/b", query={"x": "1"}, headers={"Host": "example.com:8080"})
    env = app.environ
    assert type(env) is dict
    assert env["REQUEST_METHOD"] == "GET"
    assert env["SCRIPT_NAME"] == ""
    assert env["PATH_INFO"] == "/a/b"
    assert env["QUERY_STRING"] == "x=1"
    assert env["SERVER_NAME"] == "example.com"
    assert env["SERVER_PORT"] == "8080"
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["wsgi.version"] == (1, 0)
    assert env["wsgi.url_scheme"] == "http"
    assert env["wsgi.input_terminated"] is True
    assert env["wsgi.run_once"] is False
    assert env["wsgi.file_wrapper"] is FileWrapper
    assert "CONTENT_LENGTH" not in env
    assert all(type(v) is str for k, v in env.items() if k.isupper())


def test_server_port_defaults_to_the_schemes_port_without_one_in_host() -> None:
    app = Recorder()
    served(app).get("/", headers={"Host": "example.com"})
    assert (app.environ["SERVER_NAME"], app.environ["SERVER_PORT"]) == ("example.com", "80")


def test_path_info_is_the_decoded_paths_bytes_as_latin_1() -> None:
    app = Recorder()
    served(app).get("/caf%C3%A9/a%2Fb")
    assert app.environ["PATH_INFO"] == "/café/a/b".encode().decode("latin-1")
    assert app.environ["PATH_INFO"].encode("latin-1").decode() == "/café/a/b"


@pytest.mark.parametrize(
    ("raw", "expected"), [("/plain", "/plain"), ("/%41%42", "/AB"), ("/%E2%82%AC", "/â\x82¬")]
)
def test_wsgi_path(raw: str, expected: str) -> None:
    assert wsgi_path(raw) == expected


@pytest.mark.parametrize(
    ("prefix", "path", "script_name", "path_info"),
    [
        ("/legacy", "/legacy/users/1", "/legacy", "/users/1"),
        ("/legacy/", "/legacy/", "/legacy", "/"),
        ("/legacy", "/legacy", "/legacy", ""),
        ("/", "/users", "", "/users"),
        ("/a/b", "/a/b/c", "/a/b", "/c"),
    ],
)
def test_a_mount_prefix_is_script_name_and_the_rest_path_info(
    prefix: str, path: str, script_name: str, path_info: str
) -> None:
    app = Recorder()
    assert served(app, prefix).get(path).status == 200
    assert (app.environ["SCRIPT_NAME"], app.environ["PATH_INFO"]) == (script_name, path_info)


def test_the_root_path_comes_before_the_mount_and_is_stripped_when_still_there() -> None:
    app = Recorder()
    client = served(app, "/legacy", root_path="/api")
    client.get("/legacy/x")
    assert (app.environ["SCRIPT_NAME"], app.environ["PATH_INFO"]) == ("/api/legacy", "/x")
    root_only = served(app, "/", root_path="/api")
    root_only.get("/api/x")
    assert (app.environ["SCRIPT_NAME"], app.environ["PATH_INFO"]) == ("/api", "/x")
    root_only.get("/x")  # the proxy already stripped it
    assert (app.environ["SCRIPT_NAME"], app.environ["PATH_INFO"]) == ("/api", "/x")


def test_paths_outside_the_mount_are_not_the_apps() -> None:
    app = Recorder()
    assert served(app, "/legacy").get("/legacyx").status == 404
    assert app.environ == {}


def test_headers_become_http_keys_and_repeats_are_joined() -> None:
    app = Recorder()
    client = served(app)
    raw = (
        b"POST / HTTP/1.1\r\nHost: h\r\nX-Token: a\r\nX-Token: b\r\nCookie: a=1\r\n"
        b"Cookie: b=2\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi"
    )
    client.exchange(raw)
    env = app.environ
    assert env["HTTP_X_TOKEN"] == "a, b"
    assert env["HTTP_COOKIE"] == "a=1; b=2"
    assert env["CONTENT_TYPE"] == "text/plain"
    assert env["CONTENT_LENGTH"] == "2"
    assert "HTTP_CONTENT_TYPE" not in env and "HTTP_CONTENT_LENGTH" not in env


def test_header_names_with_an_underscore_are_dropped() -> None:
    app = Recorder()
    served(app).get("/", headers={"X_Forwarded_User": "admin", "X-Forwarded-User": "me"})
    assert app.environ["HTTP_X_FORWARDED_USER"] == "me"


def test_proxy_headers_count_only_with_trust_proxy() -> None:
    headers = {
        "X-Forwarded-For": "203.0.113.9, 10.0.0.1",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "shop.example",
        "Host": "backend:8000",
    }
    app = Recorder()
    served(app).get("/", headers=headers)
    env = app.environ
    assert (env["REMOTE_ADDR"], env["wsgi.url_scheme"]) == ("127.0.0.1", "http")
    assert (env["HTTP_HOST"], env["SERVER_NAME"], env["SERVER_PORT"]) == (
        "backend:8000",
        "backend",
        "8000",
    )
    served(app, trust_proxy=True).get("/", headers=headers)
    env = app.environ
    assert (env["REMOTE_ADDR"], env["wsgi.url_scheme"]) == ("203.0.113.9", "https")
    assert (env["HTTP_HOST"], env["SERVER_NAME"], env["SERVER_PORT"]) == (
        "shop.example",
        "shop.example",
        "443",
    )


def test_middleware_changes_to_headers_reach_the_app() -> None:
    app = Recorder()
    server = Server()

    def tag(req: Any, res: Any, next: Any) -> None:
        req.set_header("X-Request-Id", "r-1")
        next()

    server.use(tag)
    server.mount("/", app)
    TestClient(server).get("/")
    assert app.environ["HTTP_X_REQUEST_ID"] == "r-1"


def test_requests_sharing_one_head_get_environs_of_their_own() -> None:
    # The parser hands identical requests the same head: what an environ takes from it is
    # reused, and nothing one request's app does to its environ reaches the next.
    head = RequestHead("GET", "/a?x=1", "/a", "x=1", "HTTP/1.1", [("host", "example.com")])
    builder = EnvironBuilder()
    first = builder.build(Request(head, b"", "192.0.2.1"))
    first["PATH_INFO"] = "/changed"
    first["werkzeug.request"] = object()
    second = builder.build(Request(head, b"", "192.0.2.2", scheme="https"))
    third = builder.build(Request(head, b"", "192.0.2.3"))
    assert (second["PATH_INFO"], third["PATH_INFO"]) == ("/a", "/a")
    assert "werkzeug.request" not in second and "werkzeug.request" not in third
    assert (first["REMOTE_ADDR"], third["REMOTE_ADDR"]) == ("192.0.2.1", "192.0.2.3")
    assert (second["wsgi.url_scheme"], second["SERVER_PORT"]) == ("https", "443")
    assert (third["wsgi.url_scheme"], third["SERVER_PORT"]) == ("http", "80")
    assert first["wsgi.input"] is not third["wsgi.input"]


def test_a_changed_header_counts_even_for_a_head_seen_before() -> None:
    head = RequestHead("GET", "/", "/", "", "HTTP/1.1", [("host", "a.example")])
    builder = EnvironBuilder()
    assert builder.build(Request(head, b"", "192.0.2.1"))["HTTP_HOST"] == "a.example"
    changed = Request(head, b"", "192.0.2.1")
    changed.set_header("Host", "b.example")
    environ = builder.build(changed)
    assert (environ["HTTP_HOST"], environ["SERVER_NAME"]) == ("b.example", "b.example")
    assert builder.build(Request(head, b"", "192.0.2.1"))["HTTP_HOST"] == "a.example"


# -- wsgi.input ------------------------------------------------------------------------------


def test_read_without_a_size_returns_the_whole_body() -> None:
    app = Recorder(lambda stream: stream.read())
    served(app).post("/", data=b"x" * 100_000)
    assert app.body == b"x" * 100_000


def test_read_with_sizes_then_the_end_gives_empty_bytes() -> None:
    app = Recorder(lambda stream: [stream.read(3), stream.read(0), stream.read(100), stream.read()])
    served(app).post("/", data=b"abcdefg")
    assert app.body == [b"abc", b"", b"defg", b""]


def test_readline_is_bounded_by_its_size_and_iteration_yields_lines() -> None:
    def read(stream: Any) -> Any:
        return [stream.readline(2), stream.readline(), stream.readline(-1), list(stream)]

    app = Recorder(read)
    served(app).post("/", data=b"abc\ndef\nghi\nlast")
    assert app.body == [b"ab", b"c\n", b"def\n", [b"ghi\n", b"last"]]


def test_readlines_stops_after_the_hint() -> None:
    app = Recorder(lambda stream: [stream.readlines(5), stream.readlines()])
    served(app).post("/", data=b"one\ntwo\nthree\n")
    assert app.body == [[b"one\n", b"two\n"], [b"three\n"]]


def test_a_chunked_body_reads_to_its_end_without_content_length() -> None:
    app = Recorder(lambda stream: stream.read())
    raw = (
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    )
    served(app).exchange(raw)
    assert app.body == b"hello world"
    assert "CONTENT_LENGTH" not in app.environ
    assert app.environ["wsgi.input_terminated"] is True


def test_a_body_the_app_never_reads_does_not_disturb_the_answer() -> None:
    app = Recorder()
    assert served(app).post("/", data=b"z" * 5000).text == "ok"


def test_wsgi_errors_writes_go_to_the_error_log(caplog: pytest.LogCaptureFixture) -> None:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.errors"].write("something odd\n")
        environ["wsgi.errors"].writelines(["a\n", "b\n"])
        environ["wsgi.errors"].flush()
        start_response("200 OK", [])
        return []

    with caplog.at_level("ERROR", logger="socketify.error"):
        served(app).get("/")
    assert [r.getMessage() for r in caplog.records] == ["something odd", "a", "b"]
