"""examples/guestbook: the API in-process, then the real front end in Chromium on 2 workers."""

from __future__ import annotations

import importlib
import json
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import gevent
import pytest

from socketify.testing import TestClient
from tests.support.browser import wait_for
from tests.support.serve import Launcher

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.timeout(120)

APP = "examples.guestbook.app"


@pytest.fixture
def database(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'guestbook.db'}"


@pytest.fixture
def guestbook(database: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("GUESTBOOK_DB", database)
    sys.modules.pop(APP, None)
    yield importlib.import_module(APP)
    sys.modules.pop(APP, None)


def test_signing_listing_and_the_remembered_name(guestbook: ModuleType) -> None:
    client = TestClient(guestbook.server)
    assert client.get("/api/me").json() == {"name": None}
    first = client.post("/api/entries", json={"name": " Ada ", "message": " hello "})
    assert first.status == 201
    assert (first.json()["name"], first.json()["message"]) == ("Ada", "hello")
    # The name is remembered in the session for the next entry and for /api/me.
    second = client.post("/api/entries", json={"message": "again"})
    assert second.json()["name"] == "Ada"
    assert client.get("/api/me").json() == {"name": "Ada"}
    listed = client.get("/api/entries").json()
    assert [entry["message"] for entry in listed] == ["again", "hello"]  # newest first
    assert (
        TestClient(guestbook.server).post("/api/entries", json={"message": "x"}).json()["name"]
        == "anonymous"
    )


def test_bad_entries_are_refused_with_json_errors(guestbook: ModuleType) -> None:
    client = TestClient(guestbook.server)
    for body in ({}, {"message": "   "}, {"message": 5}, ["message"]):
        answer = client.post("/api/entries", json=body)
        assert (answer.status, answer.json()) == (422, {"error": "need a 'message'"})
    too_long = client.post("/api/entries", json={"message": "x" * 501})
    assert too_long.status == 422
    assert (
        client.post(
            "/api/entries", data=b"{not json", headers={"Content-Type": "application/json"}
        ).status
        == 400
    )
    assert client.get("/api/entries").json() == []


def test_the_front_end_files_and_the_middleware_stack(guestbook: ModuleType) -> None:
    client = TestClient(guestbook.server)
    page = client.get("/", headers={"Accept-Encoding": "gzip"})
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Cache-Control"] == "public, max-age=60"
    assert "X-Request-Id" in page.headers and "RateLimit-Limit" in page.headers
    script = client.get("/app.js")
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert b"EventSource" in script.body
    assert client.get("/missing.css").status == 404


def test_a_new_entry_reaches_open_event_streams(guestbook: ModuleType) -> None:
    client = TestClient(guestbook.server)
    with client.sse("/events") as events:
        gevent.sleep(0.05)
        assert events.comments == [] or events.comments == ["connected"]
        client.post("/api/entries", json={"name": "Bo", "message": "live"})
        event = events.next_event()
        assert event.event == "entry"
        assert json.loads(event.data)["message"] == "live"
        assert "connected" in events.comments


def test_two_pages_in_chromium_see_each_others_entries_across_workers(
    serve: Launcher, database: str, browser: Browser
) -> None:
    env = {"GUESTBOOK_DB": database}
    with serve(f"{APP}:server", workers=2, env=env) as server:
        earlier = {"name": "Grace", "message": "signed before the pages opened"}
        request = urllib.request.Request(
            f"{server.url}/api/entries", data=json.dumps(earlier).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 201
        writer, reader = browser.new_page(), browser.new_page()
        for page in (writer, reader):
            page.goto(server.url + "/")
            wait_for(page, "document.getElementById('status').textContent === 'live'")
            assert wait_for(page, "document.querySelector('#entries li .who')?.textContent")
        # HTML in a name is shown as text, never parsed.
        writer.fill("#name", "<b>Ada</b>")
        writer.fill("#message", "hello from the browser")
        writer.evaluate("document.getElementById('sign').requestSubmit()")
        newest = "document.querySelector('#entries li p')?.textContent"
        # The reader learns of it over SSE, possibly from the other worker.
        for page in (writer, reader):
            assert wait_for(page, f"{newest} === 'hello from the browser'")
            assert page.text_content("#entries li .who") == "<b>Ada</b>"
            assert page.locator("#entries b").count() == 0
            assert page.locator("#entries li").count() == 2
        # Reloaded, the writer's page remembers the name through the session cookie.
        writer.reload()
        assert wait_for(writer, "document.getElementById('name').value === '<b>Ada</b>'"), (
            server.output()
        )
        # Pages hold their event streams open; closed first, the server can stop at once.
        writer.close()
        reader.close()
