"""Static files in-process: segment-aware mounts, fallthrough, directory redirects, sorted
listings, conditional and range requests, precompressed siblings and the SPA fallback."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from socketify import Server, static_files
from socketify.protocol.http11 import http_date
from socketify.testing import TestClient

from .conftest import STATIC_FILES, MakeClient


@pytest.fixture
def client(static_root: Path, make_client: MakeClient) -> TestClient:
    return make_client(static_files.serve(static_root))


def etag_of(path: Path) -> str:
    info = path.stat()
    return f'"{info.st_size:x}-{info.st_mtime_ns:x}"'


# -- serving and headers --------------------------------------------------------------------


def test_file_is_served_with_type_length_validators_and_ranges(client: TestClient) -> None:
    r = client.get("/hello.txt")
    assert r.status == 200
    assert r.body == STATIC_FILES["hello.txt"]
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert r.headers["Content-Length"] == str(len(STATIC_FILES["hello.txt"]))
    assert r.headers["Accept-Ranges"] == "bytes"
    assert r.headers["ETag"].startswith('"') and "W/" not in r.headers["ETag"]
    assert r.headers["Last-Modified"].endswith(" GMT")
    assert "Cache-Control" not in r.headers


def test_etag_is_size_and_mtime_ns_in_hex(client: TestClient, static_root: Path) -> None:
    assert client.get("/hello.txt").headers["ETag"] == etag_of(static_root / "hello.txt")


def test_js_is_text_javascript_utf8(client: TestClient) -> None:
    assert client.get("/app.js").headers["Content-Type"] == "text/javascript; charset=utf-8"


def test_head_sends_headers_only(client: TestClient) -> None:
    r = client.head("/hello.txt")
    assert r.status == 200 and r.body == b""
    assert r.headers["Content-Length"] == str(len(STATIC_FILES["hello.txt"]))


def test_static_content_type_overrides_an_earlier_one(
    static_root: Path, make_client: MakeClient
) -> None:
    def typed(req, res, next):
        res.set_header("Content-Type", "application/x-wrong")
        next()

    client = make_client(typed, static_files.serve(static_root))
    assert client.get("/style.css").headers["Content-Type"] == "text/css; charset=utf-8"


def test_cache_control_max_age_and_immutable(static_root: Path, make_client: MakeClient) -> None:
    client = make_client(static_files.serve(static_root, cache_max_age=3600, immutable=True))
    assert client.get("/hello.txt").headers["Cache-Control"] == "public, max-age=3600, immutable"


def test_etag_and_last_modified_can_be_turned_off(
    static_root: Path, make_client: MakeClient
) -> None:
    client = make_client(static_files.serve(static_root, etag=False, last_modified=False))
    r = client.get("/hello.txt")
    assert "ETag" not in r.headers and "Last-Modified" not in r.headers


def test_empty_file_is_served_with_length_zero(client: TestClient) -> None:
    r = client.get("/empty.txt")
    assert r.status == 200 and r.body == b"" and r.headers["Content-Length"] == "0"


# -- mount and fallthrough ------------------------------------------------------------------


def test_mount_is_segment_aware(static_root: Path, make_client: MakeClient) -> None:
    client = make_client(static_files.serve(static_root / "docs", mount="/assets"))
    assert client.get("/assets/guide.txt").body == b"guide\n"
    assert client.get("/assetsX/guide.txt").status == 404  # a plain prefix check would serve it
    assert client.get("/guide.txt").status == 404


def test_miss_falls_through_to_routes(client: TestClient) -> None:
    assert client.get("/api/hello").json() == {"hello": "world"}
    assert client.get("/missing.txt").status == 404


def test_post_falls_through_by_default(client: TestClient) -> None:
    assert client.post("/api/echo", data=b"x").body == b"x"


def test_without_fallthrough_only_mount_paths_get_404_and_405(
    static_root: Path, make_client: MakeClient
) -> None:
    client = make_client(static_files.serve(static_root, mount="/static", fallthrough=False))
    missing = client.get("/static/missing.txt")
    assert missing.status == 404 and missing.body == b"Not Found\n"
    refused = client.post("/static/hello.txt", data=b"x")
    assert refused.status == 405 and refused.headers["Allow"] == "GET, HEAD"
    # Outside the mount the API keeps working: no blanket 405 for every non-GET request.
    assert client.post("/api/echo", data=b"ok").body == b"ok"
    assert client.get("/api/hello").status == 200


def test_options_without_fallthrough_answers_allow(
    static_root: Path, make_client: MakeClient
) -> None:
    client = make_client(static_files.serve(static_root, fallthrough=False))
    r = client.options("/hello.txt")
    assert r.status == 204 and r.headers["Allow"] == "GET, HEAD, OPTIONS"


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        static_files.serve(tmp_path / "nope")


# -- path safety ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/../outside.txt",
        "/docs/../../outside.txt",
        "/%2e%2e/outside.txt",
        "/%2E%2E/outside.txt",
        "/docs/%2e%2e/%2e%2e/outside.txt",
        "/..%2foutside.txt",
        "/..%2Foutside.txt",
        "/docs%2f..%2f..%2foutside.txt",
        "/..%5coutside.txt",
        "/docs/..%5c..%5coutside.txt",
        "/.%2e/outside.txt",
        "/escape.txt",
        "/escape-dir/outside.txt",
        "/./hello.txt",
        "/.env",
        "/nodex/.hidden",
        "/%2eenv",
    ],
)
def test_traversal_and_hidden_paths_are_refused(client: TestClient, target: str) -> None:
    r = client.get(target)
    assert r.status in (400, 404)
    assert b"outside the root" not in r.body and b"SECRET" not in r.body


def test_nul_in_path_is_refused(client: TestClient) -> None:
    assert client.get("/hello.txt%00.png").status == 400


def test_symlink_inside_the_root_is_served(client: TestClient) -> None:
    assert client.get("/inside-link.txt").body == STATIC_FILES["hello.txt"]


def test_hidden_files_served_with_allow_hidden(static_root: Path, make_client: MakeClient) -> None:
    client = make_client(static_files.serve(static_root, allow_hidden=True))
    assert client.get("/.env").body == b"SECRET=1\n"


def test_file_with_trailing_slash_is_a_miss(client: TestClient) -> None:
    assert client.get("/hello.txt/").status == 404


# -- directories ----------------------------------------------------------------------------


def test_directory_without_slash_redirects_301_keeping_the_query(client: TestClient) -> None:
    r = client.get("/docs?x=1")
    assert r.status == 301 and r.headers["Location"] == "/docs/?x=1"


def test_directory_redirect_is_never_protocol_relative(client: TestClient) -> None:
    r = client.get("//docs")
    assert r.status == 301 and r.headers["Location"] == "/docs/"


def test_directory_with_slash_serves_its_index(client: TestClient) -> None:
    r = client.get("/docs/")
    assert r.status == 200 and r.body == b"<h1>docs</h1>\n"
    assert client.get("/").body == STATIC_FILES["index.html"]


def test_directory_without_index_or_listing_is_404(client: TestClient) -> None:
    assert client.get("/nodex/").status == 404
    assert client.get("/nodex").status == 404  # no redirect to a page that would 404


def test_auto_index_off_and_custom_index_names(static_root: Path, make_client: MakeClient) -> None:
    off = make_client(static_files.serve(static_root, auto_index=False))
    assert off.get("/docs/").status == 404
    custom = make_client(static_files.serve(static_root, index_names=("guide.txt",)))
    assert custom.get("/docs/").body == b"guide\n"


def test_listing_is_sorted_escaped_with_parent_link_and_hides_unserved(
    static_root: Path, make_client: MakeClient
) -> None:
    client = make_client(static_files.serve(static_root, directory_listing=True))
    r = client.get("/nodex/")
    assert r.status == 200 and r.headers["Content-Type"] == "text/html; charset=utf-8"
    page = r.text
    assert "<title>Index of /nodex/</title>" in page
    assert '<a href="../">../</a>' in page
    assert ".hidden" not in page
    assert "&lt;odd&gt;&amp;name.txt" in page and "<odd>" not in page
    assert 'href="%3Codd%3E%26name.txt"' in page
    order = [page.index(name) for name in ('"sub/"', '"%3Codd', '"a.txt"', '"B.txt"')]
    assert order == sorted(order)  # directories first, then names without case


def test_listing_at_the_root_has_no_parent_and_hides_links_out(
    static_root: Path, make_client: MakeClient
) -> None:
    client = make_client(static_files.serve(static_root, directory_listing=True))
    page = client.get("/nodex/sub/").text
    assert "../" in page
    (static_root / "index.html").unlink()
    root_page = client.get("/").text
    assert "../" not in root_page
    assert "escape.txt" not in root_page and "escape-dir" not in root_page
    assert "inside-link.txt" in root_page and ".env" not in root_page


# -- conditional requests -------------------------------------------------------------------


def test_if_none_match_exact_list_weak_and_star_give_304(
    client: TestClient, static_root: Path
) -> None:
    tag = etag_of(static_root / "hello.txt")
    for value in (tag, f'"other", {tag}', f"W/{tag}", "*"):
        r = client.get("/hello.txt", headers={"If-None-Match": value})
        assert r.status == 304, value
        assert r.body == b"" and "Content-Length" not in r.headers
        assert r.headers["ETag"] == tag and "Last-Modified" in r.headers
    assert client.get("/hello.txt", headers={"If-None-Match": '"nope"'}).status == 200


def test_if_modified_since(client: TestClient, static_root: Path) -> None:
    mtime = int((static_root / "hello.txt").stat().st_mtime)
    assert client.get("/hello.txt", headers={"If-Modified-Since": http_date(mtime)}).status == 304
    older = http_date(mtime - 10)
    assert client.get("/hello.txt", headers={"If-Modified-Since": older}).status == 200
    garbage = client.get("/hello.txt", headers={"If-Modified-Since": "yesterday"})
    assert garbage.status == 200


def test_if_modified_since_is_ignored_when_if_none_match_is_present(client: TestClient) -> None:
    r = client.get(
        "/hello.txt",
        headers={"If-None-Match": '"stale"', "If-Modified-Since": http_date(time.time() + 60)},
    )
    assert r.status == 200  # If-None-Match decides; If-Modified-Since is ignored


def test_if_match_and_if_unmodified_since_give_412(client: TestClient, static_root: Path) -> None:
    tag = etag_of(static_root / "hello.txt")
    assert client.get("/hello.txt", headers={"If-Match": '"nope"'}).status == 412
    assert client.get("/hello.txt", headers={"If-Match": tag}).status == 200
    assert client.get("/hello.txt", headers={"If-Match": f"W/{tag}"}).status == 412
    past = http_date(0)
    assert client.get("/hello.txt", headers={"If-Unmodified-Since": past}).status == 412


def test_etag_changes_with_a_rewrite_in_the_same_second(
    client: TestClient, static_root: Path
) -> None:
    path = static_root / "hello.txt"
    before = client.get("/hello.txt").headers["ETag"]
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1000))
    assert client.get("/hello.txt").headers["ETag"] != before


# -- ranges ---------------------------------------------------------------------------------

DATA = STATIC_FILES["data.bin"]
SIZE = len(DATA)


@pytest.mark.parametrize(
    ("spec", "first", "last"),
    [
        ("bytes=0-9", 0, 9),
        ("bytes=10-", 10, SIZE - 1),
        ("bytes=-16", SIZE - 16, SIZE - 1),
        ("bytes=-99999", 0, SIZE - 1),
        ("bytes=1000-99999", 1000, SIZE - 1),
        ("BYTES = 5-6", 5, 6),
        ("bytes=0-0", 0, 0),
    ],
)
def test_single_range_gives_206(client: TestClient, spec: str, first: int, last: int) -> None:
    r = client.get("/data.bin", headers={"Range": spec})
    assert r.status == 206, spec
    assert r.headers["Content-Range"] == f"bytes {first}-{last}/{SIZE}"
    assert r.body == DATA[first : last + 1]
    assert r.headers["Content-Length"] == str(last - first + 1)


@pytest.mark.parametrize(
    "spec", ["bytes=5000-", "bytes=1024-1030", "bytes=9-3", "bytes=-0", "bytes=a-b", "bytes=5"]
)
def test_unsatisfiable_or_invalid_byte_range_gives_416(client: TestClient, spec: str) -> None:
    r = client.get("/data.bin", headers={"Range": spec})
    assert r.status == 416, spec
    assert r.headers["Content-Range"] == f"bytes */{SIZE}" and r.body == b""


@pytest.mark.parametrize("spec", ["bytes=0-1,5-6", "items=0-5", "0-5"])
def test_multi_range_and_unknown_unit_give_the_whole_file(client: TestClient, spec: str) -> None:
    r = client.get("/data.bin", headers={"Range": spec})
    assert r.status == 200 and r.body == DATA


def test_range_on_empty_file_is_416(client: TestClient) -> None:
    assert client.get("/empty.txt", headers={"Range": "bytes=-5"}).status == 416
    assert client.get("/empty.txt", headers={"Range": "bytes=0-"}).status == 416


def test_range_is_honoured_on_head(client: TestClient) -> None:
    r = client.head("/data.bin", headers={"Range": "bytes=0-9"})
    assert r.status == 206 and r.headers["Content-Length"] == "10" and r.body == b""


def test_if_range_with_current_etag_or_date_keeps_the_range(
    client: TestClient, static_root: Path
) -> None:
    tag = etag_of(static_root / "data.bin")
    modified = client.get("/data.bin").headers["Last-Modified"]
    for validator in (tag, modified):
        r = client.get("/data.bin", headers={"Range": "bytes=0-3", "If-Range": validator})
        assert r.status == 206 and r.body == DATA[:4]


def test_if_range_with_stale_validator_sends_the_whole_file(client: TestClient) -> None:
    for validator in ('"stale"', "Thu, 01 Jan 1970 00:00:00 GMT", 'W/"weak"'):
        r = client.get("/data.bin", headers={"Range": "bytes=0-3", "If-Range": validator})
        assert r.status == 200 and r.body == DATA


# -- precompressed siblings -----------------------------------------------------------------


def test_gzip_sibling_is_served_when_accepted(client: TestClient) -> None:
    r = client.get("/app.js", headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip"
    assert r.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert "Accept-Encoding" in r.headers["Vary"]
    import gzip

    assert gzip.decompress(r.body) == STATIC_FILES["app.js"]


def test_br_sibling_is_preferred_and_q0_refuses(client: TestClient) -> None:
    assert client.get("/app.js", headers={"Accept-Encoding": "gzip, br"}).body == b"pretend-brotli"
    r = client.get("/app.js", headers={"Accept-Encoding": "br;q=0, gzip;q=0"})
    assert "Content-Encoding" not in r.headers and r.body == STATIC_FILES["app.js"]
    assert r.headers["Vary"] == "Accept-Encoding"


def test_no_accept_encoding_gets_the_plain_file(client: TestClient) -> None:
    r = client.get("/app.js")
    assert "Content-Encoding" not in r.headers and r.body == STATIC_FILES["app.js"]


def test_static_files_are_never_compressed_on_the_fly(client: TestClient) -> None:
    r = client.get("/style.css", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in r.headers and r.body == STATIC_FILES["style.css"]


# -- single-page apps -----------------------------------------------------------------------


def test_spa_serves_index_for_unrouted_navigations_only(static_root: Path) -> None:
    server = Server()
    server.use(static_files.spa(static_root))

    @server.get("/api/users/:id")
    def user(req, res):
        res.status(404).json({"error": "no such user"})

    client = TestClient(server)
    html = {"Accept": "text/html,application/xhtml+xml"}
    page = client.get("/settings/profile", headers=html)
    assert page.status == 200 and page.body == STATIC_FILES["index.html"]
    assert page.headers["Cache-Control"] == "no-cache"
    assert client.get("/hello.txt").body == STATIC_FILES["hello.txt"]  # assets still served
    assert client.get("/missing.png", headers=html).status == 404  # has an extension
    assert client.get("/settings", headers={"Accept": "application/json"}).status == 404
    api = client.get("/api/users/7", headers=html)
    assert api.status == 200 and api.body == STATIC_FILES["index.html"]
    assert client.get("/api/users/7", headers={"Accept": "application/json"}).json() == {
        "error": "no such user"
    }


@pytest.mark.parametrize(
    "accept", [None, "*/*", "text/*", "application/json, */*;q=0.1", "TEXT/HTML; q=0.5"]
)
def test_spa_serves_index_to_any_get_that_lets_html_through(
    static_root: Path, accept: str | None
) -> None:
    server = Server()
    server.use(static_files.spa(static_root))
    headers = {} if accept is None else {"Accept": accept}
    page = TestClient(server).get("/settings/profile", headers=headers)
    assert (page.status, page.body) == (200, STATIC_FILES["index.html"])


@pytest.mark.parametrize("accept", ["application/json", "image/*", "text/html;q=0, */*;q=0"])
def test_spa_leaves_404_to_a_get_that_refuses_html(static_root: Path, accept: str) -> None:
    server = Server()
    server.use(static_files.spa(static_root))
    assert TestClient(server).get("/settings", headers={"Accept": accept}).status == 404


def test_spa_leaves_excluded_prefixes_to_their_404(static_root: Path) -> None:
    server = Server()
    server.use(static_files.spa(static_root, exclude=["/api", "/admin/raw"]))

    @server.get("/api/users/:id")
    def user(req, res):
        res.status(404).json({"error": "no such user"})

    client = TestClient(server)
    html = {"Accept": "text/html"}
    assert client.get("/api/users/7", headers=html).json() == {"error": "no such user"}
    assert client.get("/api/nothing", headers=html).status == 404
    assert client.get("/admin/raw/x", headers=html).status == 404
    # Whole segments only: these are still the app's pages.
    for path in ("/apis", "/admin/rawer", "/admin"):
        assert client.get(path, headers=html).body == STATIC_FILES["index.html"], path


def test_spa_index_is_revalidated_however_it_is_reached(static_root: Path) -> None:
    server = Server()
    server.use(static_files.spa(static_root, cache_max_age=3600))

    @server.get("/robots.txt")
    def robots(req, res):
        res.set_header("Cache-Control", "public, max-age=60").send("User-agent: *\n")

    client = TestClient(server)
    html = {"Accept": "text/html"}
    for path in ("/", "/index.html", "/deep/link"):
        page = client.get(path, headers=html)
        assert page.body == STATIC_FILES["index.html"], path
        assert page.headers["Cache-Control"] == "no-cache", path
        again = client.get(path, headers={**html, "If-None-Match": page.headers["ETag"]})
        assert (again.status, again.headers["Cache-Control"]) == (304, "no-cache"), path
    # Other files keep the long cache, and a route's own policy is left alone.
    assert client.get("/hello.txt").headers["Cache-Control"] == "public, max-age=3600"
    assert client.get("/robots.txt").headers["Cache-Control"] == "public, max-age=60"


def test_spa_needs_its_index(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="SPA index"):
        static_files.spa(tmp_path)
