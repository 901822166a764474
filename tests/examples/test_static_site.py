"""examples/static_site: files, caching and the SPA fallback in-process, then a deep link in
Chromium against 2 real workers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from examples.static_site.app import server
from socketify.testing import TestClient
from tests.support.browser import wait_for
from tests.support.serve import REPO, Launcher

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.timeout(60)

PUBLIC = REPO / "examples" / "static_site" / "public"
PAGE = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}  # what a browser navigation sends


def test_the_front_page_and_its_assets_are_served_with_an_hour_of_caching() -> None:
    client = TestClient(server)
    index = client.get("/", headers=PAGE)
    assert index.status == 200 and index.headers["Content-Type"].startswith("text/html")
    assert index.body == (PUBLIC / "index.html").read_bytes()
    script = client.get("/app.js")
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert b"location.pathname" in script.body
    style = client.get("/app.css")
    assert style.headers["Content-Type"].startswith("text/css")
    assert style.headers["Cache-Control"] == "public, max-age=3600"
    again = client.get("/app.css", headers={"If-None-Match": style.headers["ETag"]})
    assert (again.status, again.body) == (304, b"")


def test_a_deep_link_gets_the_index_marked_for_revalidation() -> None:
    client = TestClient(server)
    for path in ("/docs/getting-started", "/a/b/c", "/settings"):
        page = client.get(path, headers=PAGE)
        assert page.status == 200, path
        assert page.body == (PUBLIC / "index.html").read_bytes()
        assert page.headers["Cache-Control"] == "no-cache"  # a new deploy is seen at once
    assert client.head("/docs/getting-started", headers=PAGE).body == b""


def test_missing_files_and_non_page_requests_are_404() -> None:
    client = TestClient(server)
    assert (client.get("/logo.png", headers=PAGE).status, client.get("/logo.png").text) == (
        404,
        "Not Found\n",
    )
    json_only = {"Accept": "application/json"}
    assert client.get("/docs/getting-started", headers=json_only).status == 404
    assert client.get("/api/nothing", headers=PAGE).status == 404  # /api is the API's
    assert client.get("/../examples/static_site/app.py", headers=PAGE).status != 200
    assert client.get("/%2e%2e/app.py").status == 404


def test_a_plain_curl_of_a_deep_link_gets_the_page() -> None:
    page = TestClient(server).get("/docs/getting-started", headers={"Accept": "*/*"})
    assert (page.status, page.body) == (200, (PUBLIC / "index.html").read_bytes())


def test_other_methods_reach_the_routes_instead_of_a_blanket_405() -> None:
    client = TestClient(server)
    # A non-GET request outside the mount reaches the app's routes rather than a blanket 405.
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert client.request(method, "/anything").status == 404, method
        assert client.request(method, "/index.html").status == 404, method
    wrong_method = client.post("/api/health")
    assert (wrong_method.status, wrong_method.headers["Allow"]) == (405, "GET, HEAD")
    assert client.get("/api/health").json() == {"ok": True}


def test_a_deep_link_runs_the_app_in_chromium_on_two_workers(
    serve: Launcher, browser: Browser
) -> None:
    with serve("examples.static_site.app:server", workers=2) as live:
        page = browser.new_page()
        page.goto(live.url + "/docs/getting-started")
        assert wait_for(
            page, "document.getElementById('path').textContent === '/docs/getting-started'"
        ), live.output()
        # The stylesheet came through as well.
        assert page.evaluate("getComputedStyle(document.body).marginTop") == "0px"
