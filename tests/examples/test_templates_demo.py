"""examples/templates_demo: pages from Jinja2 templates in-process, then through the real CLI,
where `--reload` shows an edited template on the next request and production keeps the
compiled one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import requests

from examples.templates_demo.app import server
from socketify.testing import TestClient
from tests.support.serve import REPO, Launcher
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)


def test_the_pages_extend_the_base_layout_and_escape_what_the_visitor_sent() -> None:
    client = TestClient(server)
    home = client.get("/")
    assert home.status == 200 and home.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "<title>Home · Socketify</title>" in home.text
    assert '<a href="/hello">Hello</a>' in home.text
    hello = client.get("/hello", query={"name": "<script>alert(1)</script>"})
    assert "<h1>Hello, &lt;script&gt;alert(1)&lt;/script&gt;!</h1>" in hello.text
    assert "<script>" not in hello.text
    assert "Hello, stranger!" in client.get("/hello").text


def test_the_sitemap_is_xml_with_absolute_urls() -> None:
    sitemap = TestClient(server).get("/sitemap.xml", headers={"Host": "example.org"})
    assert sitemap.headers["Content-Type"] == "application/xml; charset=utf-8"
    assert "<loc>http://example.org/hello</loc>" in sitemap.text


def copy_of_the_example(tmp_path: Path) -> Path:
    """The example as a package of its own under tmp_path, so its templates can be edited."""
    copy = tmp_path / "site" / "demo"
    shutil.copytree(REPO / "examples" / "templates_demo", copy)
    (copy.parent / "__init__.py").write_text("")
    return copy


@pytest.mark.parametrize("reload", [True, False], ids=["reload", "production"])
def test_an_edited_template_shows_under_reload_only(
    serve: Launcher, tmp_path: Path, reload: bool
) -> None:
    copy = copy_of_the_example(tmp_path)
    running = serve(
        "demo.app:server",
        workers=1,
        args=["--reload"] if reload else [],
        env={"PYTHONPATH": str(copy.parent)},
        cwd=copy.parent,
    )
    url = f"{running.url}/hello?name=Ada"
    assert "<h1>Hello, Ada!</h1>" in requests.get(url, timeout=5).text
    workers = running.workers()
    hello = copy / "templates" / "hello.html"
    hello.write_text(hello.read_text().replace("Hello,", "Welcome,"))
    if reload:
        wait_for(lambda: "Welcome, Ada!" in requests.get(url, timeout=5).text, timeout=10)
        assert running.workers() == workers  # the same worker: no restart for a template
    else:
        assert "<h1>Hello, Ada!</h1>" in requests.get(url, timeout=5).text
