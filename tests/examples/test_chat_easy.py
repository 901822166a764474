"""examples/chat_easy on two workers: the protocol with `websockets`, then the page in Chromium."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from websockets.sync.client import ClientConnection, connect

from socketify.realtime.pulse import easy, media
from tests.support.browser import wait_for
from tests.support.serve import Launcher, ServerProcess

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with Launcher(tmp_path_factory.mktemp("chat")) as launcher:
        yield launcher("examples.chat_easy.app:server", workers=2)


def _event(ws: ClientConnection, wanted: str) -> Any:
    while True:
        parsed = easy.parse_envelope(ws.recv(timeout=5))
        assert parsed is not None
        if parsed[0] == wanted:
            return parsed[1]


def _enter(stack: contextlib.ExitStack, chat: ServerProcess, name: str) -> ClientConnection:
    ws = stack.enter_context(connect(f"ws://127.0.0.1:{chat.port}/chat", open_timeout=5))
    ws.send(easy.envelope("hello", {"name": name}))
    assert _event(ws, "welcome") == {"name": name}
    return ws


def test_lobby_talk_online_count_and_pictures(chat: ServerProcess) -> None:
    with contextlib.ExitStack() as stack:
        ada = _enter(stack, chat, "ada")
        bob = _enter(stack, chat, "bob")
        assert _event(ada, "joined") == {"name": "bob"}
        deadline = time.monotonic() + 5
        count = 0
        while count != 2 and time.monotonic() < deadline:  # the census settles in a bus hop
            bob.send(easy.envelope("hello", {"name": "again"}))  # refused, but answered
            _event(bob, "error")
            count = _event(ada, "online")["count"]
        assert count == 2
        ada.send(easy.envelope("say", {"text": "<b>hi</b>"}))
        assert _event(bob, "said") == {"name": "ada", "text": "<b>hi</b>"}
        picture = media.pack(media.Kind.IMAGE, 0, 1, 5, media.Flag.LAST, b"GIF89a", "image/gif")
        bob.send(picture)
        assert _event(ada, "picture") == {"name": "bob"}
        assert ada.recv(timeout=5) == picture  # right after its announcement, bytes unchanged
        bob.close()
        assert _event(ada, "left") == {"name": "bob"}


def test_the_page_chats_and_shows_pictures_between_two_browser_tabs(
    chat: ServerProcess, browser: Browser
) -> None:
    tabs = [browser.new_page() for _ in range(2)]
    for tab, name in zip(tabs, ("carol", "dave"), strict=True):
        tab.goto(chat.url + "/")
        wait_for(tab, "document.readyState === 'complete' && typeof handlers === 'object'")
        tab.fill("#name", name)
        tab.evaluate("document.getElementById('gate').requestSubmit()")
        wait_for(tab, "document.getElementById('status').textContent.startsWith('live')")
    carol, dave = tabs
    carol.fill("#text", "hello <i>dave</i>")
    carol.evaluate("document.getElementById('talk').requestSubmit()")
    last_said = "[...document.querySelectorAll('#log .said span')].at(-1)?.textContent"
    assert wait_for(dave, last_said) == "hello <i>dave</i>"
    # A picture as the file input sends it: a PM image frame built by pm.js.
    carol.evaluate(
        "socket.send(PM.pack(PM.IMAGE, 0, 1, PM.LAST, new Uint8Array([71, 73, 70]), 'image/gif'))"
    )
    alt = "document.querySelector('#log .picture img')?.alt"
    assert wait_for(dave, alt) == "picture from carol"
    assert wait_for(dave, "document.getElementById('online').textContent") == "(2 online)"
