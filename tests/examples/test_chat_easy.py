"""examples/chat_easy on two workers: the protocol with `websockets` (chat, pictures, voice
relayed exactly once, `/stats`), then the page in Chromium, microphone included."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import requests
from websockets.sync.client import ClientConnection, connect

from socketify.realtime.pulse import easy, media
from tests.support.browser import chromium, wait_for
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
        count, seqs = 0, []
        while count != 2 and time.monotonic() < deadline:  # the census settles in a bus hop
            bob.send(easy.envelope("hello", {"name": "again"}))  # refused, but answered
            _event(bob, "error")
            online = _event(ada, "online")
            count = online["count"]
            seqs.append(online["seq"])
        assert count == 2
        # Stamped from the store every worker shares: the page keeps the newest announcement.
        assert all(isinstance(seq, int) and seq > 0 for seq in seqs)
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
    # A picture in chunks: shown once, whole, when its image-end frame arrives.
    carol.evaluate(
        """() => {
        socket.send(PM.pack(PM.IMAGE, 1, 1, 0, new Uint8Array(0), 'image/gif'));
        socket.send(PM.pack(PM.IMAGE, 1, 2, 0, new Uint8Array([71, 73, 70])));
        socket.send(PM.pack(PM.IMAGE_END, 1, 3, PM.LAST, new Uint8Array([56, 57]), 'image/gif'));
        }"""
    )
    wait_for(dave, "document.querySelectorAll('#log .picture img').length === 2")
    size = dave.evaluate(
        "fetch([...document.querySelectorAll('#log .picture img')].at(-1).src)"
        ".then((answer) => answer.blob()).then((blob) => blob.size)"
    )
    assert size == 5
    assert wait_for(dave, "document.getElementById('online').textContent") == "(2 online)"


def _next_but_online(ws: ClientConnection) -> Any:
    """The next message other than an `online` count (which comes whenever the census moves):
    an event as (type, data), or the bytes of a binary message."""
    while True:
        message = ws.recv(timeout=5)
        if isinstance(message, bytes):
            return message
        parsed = easy.parse_envelope(message)
        if parsed is None or parsed[0] != "online":
            return parsed


def _stats(chat: ServerProcess) -> dict[str, int]:
    answer = requests.get(chat.url + "/stats", timeout=5)
    assert answer.headers["Content-Type"].startswith("application/json")
    stats = answer.json()
    assert set(stats) == {"voice_frames", "voice_bytes", "pictures", "image_bytes"}
    return stats


def test_voice_is_relayed_once_to_the_others_and_counted_by_stats(chat: ServerProcess) -> None:
    before = _stats(chat)
    with contextlib.ExitStack() as stack:
        ada = _enter(stack, chat, "ada")
        bob = _enter(stack, chat, "bob")
        _event(ada, "joined")
        bob.send(easy.envelope("talk", {"on": True}))
        assert _event(ada, "talking") == {"name": "bob", "on": True}
        frames = [
            media.pack(media.Kind.VOICE, 0, seq, 1000 * seq, 0, bytes([seq]) * 2048)
            for seq in (1, 2, 3)
        ]
        for frame in frames:
            bob.send(frame)
        bob.send(easy.envelope("say", {"text": "over"}))
        # Everything bob sends leaves his worker in order: a second copy of any frame would
        # show up before the message that follows them.
        assert [ada.recv(timeout=5) for _ in frames] == frames  # seq and timestamps untouched
        assert _event(ada, "said") == {"name": "bob", "text": "over"}
        # The speaker hears nothing of his own: the next thing bob gets is his own message.
        assert _next_but_online(bob) == ("said", {"name": "bob", "text": "over"})
        bob.send(easy.envelope("talk", {"on": False}))
        assert _event(ada, "talking") == {"name": "bob", "on": False}
        # A connection that has not entered the lobby is no member of the media room either.
        stranger = stack.enter_context(connect(f"ws://127.0.0.1:{chat.port}/chat", open_timeout=5))
        stranger.send(frames[0])
        bob.send(easy.envelope("say", {"text": "still here"}))
        assert _event(ada, "said") == {"name": "bob", "text": "still here"}
    after = _stats(chat)
    assert after["voice_frames"] - before["voice_frames"] == 3
    assert after["voice_bytes"] - before["voice_bytes"] == 3 * 2048


def test_pictures_whole_or_in_chunks_are_relayed_once_and_counted(chat: ServerProcess) -> None:
    before = _stats(chat)
    image, end = media.Kind.IMAGE, media.Kind.IMAGE_END
    with contextlib.ExitStack() as stack:
        ada = _enter(stack, chat, "ada")
        bob = _enter(stack, chat, "bob")
        _event(ada, "joined")
        whole = media.pack(image, 0, 1, 5, media.Flag.LAST, b"x" * 300, "image/png")
        chunks = [
            media.pack(image, 2, 1, 6, 0, b"", "image/gif"),
            media.pack(image, 2, 2, 7, 0, b"y" * 1000),
            media.pack(image, 2, 3, 8, 0, b"z" * 1000),
            media.pack(end, 2, 4, 9, media.Flag.LAST, b"", "image/gif"),
        ]
        for frame in [whole, *chunks]:
            bob.send(frame)
        bob.send(easy.envelope("say", {"text": "sent"}))
        assert _event(ada, "picture") == {"name": "bob"}
        assert ada.recv(timeout=5) == whole
        assert _next_but_online(ada) == ("picture", {"name": "bob"})  # once per picture
        assert [ada.recv(timeout=5) for _ in chunks] == chunks
        assert _next_but_online(ada) == ("said", {"name": "bob", "text": "sent"})
        assert _next_but_online(bob) == ("said", {"name": "bob", "text": "sent"})  # no echo
        # Chunks past the limit are dropped, and the sender is told once.
        huge = media.pack(image, 3, 1, 10, 0, b"h" * (400 * 1024), "image/png")
        bob.send(huge)
        bob.send(huge)
        bob.send(media.pack(end, 3, 2, 11, media.Flag.LAST, b"", "image/png"))
        assert _next_but_online(bob)[1]["error"] == "too_big"
        bob.send(easy.envelope("say", {"text": "after"}))
        assert _next_but_online(bob) == ("said", {"name": "bob", "text": "after"})
    after = _stats(chat)
    assert after["pictures"] - before["pictures"] == 2
    assert after["image_bytes"] - before["image_bytes"] == 300 + 2000 + 400 * 1024


FAKE_MICROPHONE = [
    "--use-fake-device-for-media-stream",  # a generated tone instead of a real microphone
    "--use-fake-ui-for-media-stream",  # and no permission prompt
    "--autoplay-policy=no-user-gesture-required",
]


def test_the_talk_button_sends_the_microphone_to_the_other_tab(chat: ServerProcess) -> None:
    with chromium(FAKE_MICROPHONE) as browser:
        tabs = [browser.new_page() for _ in range(2)]
        try:
            for tab, name in zip(tabs, ("erin", "finn"), strict=True):
                tab.goto(chat.url + "/")
                tab.fill("#name", name)
                tab.click("#gate button")
                wait_for(tab, "document.getElementById('status').textContent.startsWith('live')")
                assert tab.is_hidden("#gate") and tab.is_visible("#talk-button")
            erin, finn = tabs
            wait_for(finn, "document.getElementById('online').textContent === '(2 online)'")
            erin.click("#talk-button")
            assert wait_for(finn, "document.getElementById('talking').textContent") == (
                "erin talking"
            )
            heard = wait_for(finn, "Voice.heard >= 5 && Voice.heard")
            assert heard >= 5
            assert erin.evaluate("Voice.heard") == 0  # no echo of one's own voice
            erin.click("#talk-button")
            wait_for(finn, "document.getElementById('talking').textContent === ''")
            assert erin.evaluate("Voice.talking") is False
        finally:
            for tab in tabs:
                tab.close()
