"""http_client over plain HTTP against a real local server: the Host header keeps a non-default
port, IPv6 literal URLs work, and repeated response headers are all kept."""

from __future__ import annotations

import gzip
import os
import time
from collections.abc import Iterator

import pytest

from socketify import http_client
from socketify.http_client import Client, Request, Response
from tests.http_client.local_http import GZIP_TEXT, LocalServer


def echoed(response: Response) -> dict:
    assert response.status == 200, response
    doc = response.json()
    doc["headers"] = {name.lower(): value for name, value in doc["headers"]}
    return doc


@pytest.fixture
def client() -> Iterator[Client]:
    with Client() as client:
        yield client


# -- the request on the wire ------------------------------------------------------------------


def test_get_returns_status_headers_body(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/status?code=200&body=hi")
    assert response.status == 200
    assert response.ok
    assert response.body == b"hi"
    assert response.text == "hi"
    assert response.headers["content-type"] == "text/plain"
    assert response.error == ""


def test_request_line_carries_method_path_and_query(http_server: LocalServer) -> None:
    doc = echoed(http_client.request("PUT", http_server.url + "/echo?a=1&b=2", body=b"x"))
    assert doc["method"] == "PUT"
    assert doc["path"] == "/echo?a=1&b=2"


def test_host_header_carries_a_non_default_port(http_server: LocalServer) -> None:
    doc = echoed(http_client.get(http_server.url + "/echo"))
    assert doc["headers"]["host"] == f"127.0.0.1:{http_server.port}"


def test_ipv6_literal_urls_work(ipv6_server: LocalServer) -> None:
    url = f"http://[::1]:{ipv6_server.port}/echo"
    doc = echoed(http_client.get(url))
    assert doc["headers"]["host"] == f"[::1]:{ipv6_server.port}"


def test_default_user_agent_and_caller_override(http_server: LocalServer) -> None:
    doc = echoed(http_client.get(http_server.url + "/echo"))
    assert doc["headers"]["user-agent"] == "socketify-http-client"
    doc = echoed(http_client.get(http_server.url + "/echo", {"User-Agent": "mine/1"}))
    assert doc["headers"]["user-agent"] == "mine/1"


def test_caller_host_and_connection_headers_are_dropped(http_server: LocalServer) -> None:
    headers = {"Host": "evil.example", "Connection": "close", "X-Custom": "kept"}
    doc = echoed(http_client.get(http_server.url + "/echo", headers))
    assert doc["headers"]["host"] == f"127.0.0.1:{http_server.port}"
    assert doc["headers"].get("connection") != "close"
    assert doc["headers"]["x-custom"] == "kept"


def test_headers_may_be_pairs_with_repeats(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/echo", [("X-A", "1"), ("X-A", "2")])
    pairs = [pair for pair in response.json()["headers"] if pair[0].lower() == "x-a"]
    assert [value for _, value in pairs] == ["1", "2"]


def test_userinfo_is_stripped_from_the_url(http_server: LocalServer) -> None:
    url = f"http://user:secret@{http_server.authority}/echo"
    doc = echoed(http_client.get(url))
    assert "authorization" not in doc["headers"]
    assert doc["headers"]["host"] == http_server.authority


def test_post_defaults_to_json_content_type(http_server: LocalServer) -> None:
    doc = echoed(http_client.post(http_server.url + "/echo", '{"a": 1}'))
    assert doc["method"] == "POST"
    assert doc["headers"]["content-type"] == "application/json"
    assert doc["headers"]["content-length"] == "8"
    assert doc["body"] == '{"a": 1}'


def test_post_keeps_a_caller_content_type(http_server: LocalServer) -> None:
    headers = {"content-type": "text/plain"}
    doc = echoed(http_client.post(http_server.url + "/echo", b"raw", headers))
    assert doc["headers"]["content-type"] == "text/plain"


def test_post_json_keyword_serializes_the_body(http_server: LocalServer) -> None:
    doc = echoed(http_client.post(http_server.url + "/echo", json={"n": [1, 2]}))
    assert doc["body"] == '{"n":[1,2]}'
    assert doc["headers"]["content-type"] == "application/json"
    with pytest.raises(TypeError):
        http_client.post(http_server.url + "/echo", b"x", json={})


def test_empty_post_sends_content_length_zero(http_server: LocalServer) -> None:
    doc = echoed(http_client.post(http_server.url + "/echo"))
    assert doc["headers"]["content-length"] == "0"


def test_request_accepts_a_request_object(http_server: LocalServer) -> None:
    req = Request(http_server.url + "/echo", method="DELETE", headers={"X-Id": "7"})
    doc = echoed(http_client.request(req))
    assert doc["method"] == "DELETE" and doc["headers"]["x-id"] == "7"
    with pytest.raises(TypeError):
        http_client.request(req, "http://elsewhere/")


# -- the response ---------------------------------------------------------------------------


def test_repeated_response_headers_are_all_kept(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/repeat")
    assert response.headers.getall("Set-Cookie") == ["a=1", "b=2"]
    assert response.headers["X-Multi"] == "one, two"


def test_non_2xx_is_an_answer_not_an_error(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/status?code=404&body=gone")
    assert response.status == 404 and not response.ok
    assert response.body == b"gone" and response.error == ""
    assert http_client.get(http_server.url + "/status?code=204").ok


def test_json_is_none_for_a_non_json_body(http_server: LocalServer) -> None:
    assert http_client.get(http_server.url + "/status?code=200&body=nope").json() is None
    assert http_client.get(http_server.url + "/status?code=200").json() is None


def test_text_uses_the_declared_charset(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/latin1")
    assert response.body == b"caf\xe9"
    assert response.text == "café"


def test_chunked_responses_are_dechunked(http_server: LocalServer) -> None:
    assert http_client.get(http_server.url + "/chunked").body == b"hello chunked world"


def test_gzip_bodies_are_decompressed(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/gzip")
    assert response.body == GZIP_TEXT
    assert response.headers["Content-Encoding"] == "gzip"  # headers stay as received
    assert "gzip" in http_server.seen[-1].headers_dict()["accept-encoding"]


def test_deflate_bodies_are_decompressed(http_server: LocalServer) -> None:
    assert http_client.get(http_server.url + "/deflate").body == GZIP_TEXT


def test_decompression_can_be_turned_off(http_server: LocalServer) -> None:
    url = http_server.url + "/gzip"
    plain = http_client.get(url, decompress=False)
    assert plain.body == GZIP_TEXT  # no Accept-Encoding offered, so none applied
    raw = http_client.get(url, {"Accept-Encoding": "gzip"}, decompress=False)
    assert gzip.decompress(raw.body) == GZIP_TEXT


def test_a_corrupt_gzip_body_is_an_error(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/bad-gzip")
    assert response.status == 0
    assert response.error == "decompression failed"


# -- redirects ------------------------------------------------------------------------------


def test_redirects_are_not_followed_by_default(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/redirect")
    assert response.status == 302
    assert response.headers["Location"] == "/echo"


def test_redirects_are_followed_when_asked(http_server: LocalServer) -> None:
    response = http_client.get(http_server.url + "/redirect", follow_redirects=True)
    assert response.status == 200
    assert response.url == http_server.url + "/echo"
    assert response.json()["method"] == "GET"


def test_303_after_post_becomes_a_get(http_server: LocalServer) -> None:
    url = http_server.url + "/redirect?code=303"
    response = http_client.post(url, b"{}", follow_redirects=True)
    assert response.json()["method"] == "GET"


def test_redirect_loops_stop_at_max_redirects(http_server: LocalServer) -> None:
    before = len(http_server.seen)
    response = http_client.get(http_server.url + "/loop", follow_redirects=True, max_redirects=3)
    assert response.status == 0
    assert response.error == "too many redirects"
    assert len(http_server.seen) - before == 4  # the first request plus three redirects


# -- connections and pooling ----------------------------------------------------------------


def test_connections_are_reused(http_server: LocalServer, client: Client) -> None:
    first = echoed(client.get(http_server.url + "/echo"))
    second = echoed(client.get(http_server.url + "/echo"))
    assert first["client_port"] == second["client_port"]


def test_concurrent_requests_from_threads(http_server: LocalServer, client: Client) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: client.get(f"{http_server.url}/echo?i={i}"), range(24)))
    assert [r.json()["path"] for r in results] == [f"/echo?i={i}" for i in range(24)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_does_not_reuse_the_parents_connections(
    http_server: LocalServer, client: Client
) -> None:
    parent_port = echoed(client.get(http_server.url + "/echo"))["client_port"]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            port = client.get(http_server.url + "/echo").json()["client_port"]
            os.write(write_end, str(port).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    child_port = int(os.read(read_end, 64) or b"0")
    os.close(read_end)
    os.waitpid(pid, 0)
    assert child_port not in (0, parent_port)
    assert echoed(client.get(http_server.url + "/echo"))["client_port"] == parent_port


# -- failures: status 0 with an error -------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/", "example.com/path", "", "http://", "file:///etc/passwd", "http://:80/"],
)
def test_unsupported_urls_are_refused(url: str) -> None:
    response = http_client.get(url)
    assert response.status == 0
    assert response.error == f"invalid or unsupported URL: {url}"


def test_scheme_is_case_insensitive(http_server: LocalServer) -> None:
    assert http_client.get(f"HTTP://{http_server.authority}/echo").status == 200


def test_refused_connection(closed_port: int) -> None:
    response = http_client.get(f"http://127.0.0.1:{closed_port}/")
    assert response.status == 0
    assert response.error.startswith("connect failed")


def test_unresolvable_host() -> None:
    response = http_client.get("http://does-not-exist.invalid/")
    assert response.status == 0
    assert response.error == "dns: cannot resolve does-not-exist.invalid"


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_read_timeout_is_an_error_and_is_not_retried(http_server: LocalServer, method: str) -> None:
    before = len(http_server.seen)
    started = time.monotonic()
    response = http_client.request(method, http_server.url + "/slow?delay=2", timeout=0.3)
    elapsed = time.monotonic() - started
    assert response.status == 0
    assert response.error == "read timed out"
    assert elapsed < 1.5
    assert len(http_server.seen) - before == 1


def test_client_timeout_is_the_default_for_its_requests(http_server: LocalServer) -> None:
    with Client(timeout=0.3) as client:
        assert client.get(http_server.url + "/slow?delay=2").error == "read timed out"
        assert client.get(http_server.url + "/slow?delay=0", timeout=5).status == 200


def test_response_repr_mentions_the_error() -> None:
    assert "invalid" in repr(http_client.get("nope"))
