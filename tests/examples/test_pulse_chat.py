"""examples/pulse_chat.py on two workers: the JSON protocol with `websockets`, then the page."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import requests
from websockets.sync.client import ClientConnection, connect

from tests.support.browser import wait_for
from tests.support.serve import Launcher, ServerProcess

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.timeout(120)

AWKWARD_NAME = 'Zoë "the" <b>\\bold\\</b>'
AWKWARD_TEXT = 'say "hi"\\n\nline two </script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def lobby(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with Launcher(tmp_path_factory.mktemp("lobby")) as launcher:
        yield launcher("examples.pulse_chat:server", workers=2)


def _next(ws: ClientConnection) -> dict[str, Any]:
    message = ws.recv(timeout=5)
    assert isinstance(message, str)
    event = json.loads(message)
    assert isinstance(event, dict)
    return event


def _until(ws: ClientConnection, wanted: dict[str, Any]) -> None:
    """Read until `wanted` arrives (joins of other tests' clients may come first)."""
    while (event := _next(ws)) != wanted:
        assert event["type"] == "sys", event


def _answer(ws: ClientConnection) -> dict[str, Any]:
    """The next message that is not lobby news (others' joins and leaves come any time)."""
    while (event := _next(ws))["type"] == "sys":
        pass
    return event


def _connect(stack: contextlib.ExitStack, lobby: ServerProcess) -> ClientConnection:
    ws = stack.enter_context(connect(f"ws://127.0.0.1:{lobby.port}/chat", open_timeout=5))
    welcome = _next(ws)
    assert welcome["type"] == "welcome" and welcome["online"] >= 1
    return ws


def _join(stack: contextlib.ExitStack, lobby: ServerProcess, name: str) -> ClientConnection:
    ws = _connect(stack, lobby)
    ws.send(json.dumps({"type": "join", "user": name}))
    _until(ws, {"type": "sys", "text": f"{name} joined"})
    return ws


def test_names_and_messages_arrive_exactly_as_sent_once_to_everyone(lobby: ServerProcess) -> None:
    with contextlib.ExitStack() as stack:
        # Fresh connections land on either worker; the hub room spans both.
        ada = _join(stack, lobby, AWKWARD_NAME)
        bob = _join(stack, lobby, "bob")
        _until(ada, {"type": "sys", "text": "bob joined"})
        ada.send(json.dumps({"type": "chat", "text": AWKWARD_TEXT}))
        said = {"type": "chat", "user": AWKWARD_NAME, "text": AWKWARD_TEXT}
        assert _next(bob) == said
        assert _next(ada) == said  # the sender sees its own message, once
        bob.send(json.dumps({"type": "chat", "text": "second"}))
        # Had anything been delivered twice, the copy would come before this.
        assert _next(ada) == {"type": "chat", "user": "bob", "text": "second"}
        assert _next(bob) == {"type": "chat", "user": "bob", "text": "second"}
        bob.close()
        assert _next(ada) == {"type": "sys", "text": "bob left"}


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected"),
        ('{"type": "dance"}', "expected"),
        ('{"type": "chat", "text": "too early"}', "join with a name first"),
        ('{"type": "join", "user": "   "}', "printable characters"),
        ('{"type": "join", "user": "bad\\nname"}', "printable characters"),
        ('{"type": "join", "user": 42}', "printable characters"),
        ('{"type": "join", "user": "' + "x" * 25 + '"}', "printable characters"),
    ],
)
def test_bad_messages_get_an_error_and_the_connection_stays(
    lobby: ServerProcess, message: str, error: str
) -> None:
    with contextlib.ExitStack() as stack:
        ws = _connect(stack, lobby)
        ws.send(message)
        answer = _answer(ws)
        assert answer["type"] == "error" and error in answer["text"]
        ws.send(json.dumps({"type": "join", "user": "carol"}))
        _until(ws, {"type": "sys", "text": "carol joined"})
        for bad in (json.dumps({"type": "chat", "text": "x" * 1001}), '{"type": "join"}'):
            ws.send(bad)
            assert _answer(ws)["type"] == "error"


def test_chat_is_refused_without_a_websocket_handshake(lobby: ServerProcess) -> None:
    answer = requests.get(lobby.url + "/chat", timeout=5)
    assert answer.status_code in (400, 426)
    page = requests.get(lobby.url + "/", timeout=5)
    assert page.headers["Content-Type"].startswith("text/html")


def test_two_tabs_chat_and_markup_shows_as_text(lobby: ServerProcess, browser: Browser) -> None:
    tabs = [browser.new_page() for _ in range(2)]
    try:
        for tab, name in zip(tabs, ("<i>eve</i>", "frank"), strict=True):
            tab.goto(lobby.url + "/")
            tab.fill("#name", name)
            tab.click("#gate button")
            wait_for(tab, "document.getElementById('status').textContent.startsWith('live as')")
            assert tab.is_hidden("#gate") and tab.is_visible("#talk")
        eve, frank = tabs
        wait_for(eve, "document.getElementById('log').textContent.includes('frank joined')")
        eve.fill("#text", "<b>bold?</b>")
        eve.click("#talk button")
        last = "[...document.querySelectorAll('#log .chat')].at(-1)"
        assert wait_for(frank, f"{last}?.querySelector('b').textContent") == "<i>eve</i>"
        assert frank.evaluate(f"{last}.querySelector('span').textContent") == "<b>bold?</b>"
        assert frank.evaluate("document.querySelectorAll('#log i, #log span b').length") == 0
    finally:
        for tab in tabs:
            tab.close()
