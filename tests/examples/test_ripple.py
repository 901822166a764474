"""examples/ripple: the messenger on two workers over HTTPS/WSS, its API with httpx and
`websockets`, then two users in two Chromium contexts chatting and calling each other."""

from __future__ import annotations

import contextlib
import os
import ssl
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from examples.ripple import devcert
from socketify.realtime.pulse import easy, media
from tests.support.browser import chromium, screenshot, wait_for
from tests.support.pki import spki_sha256
from tests.support.ports import free_port
from tests.support.serve import REPO, Launcher, ServerProcess, server_environment

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.timeout(120)

SCREENSHOT = REPO / "docs" / "screenshots" / "ripple.png"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The pair the development helper makes, as a user would make it."""
    folder = tmp_path_factory.mktemp("ripple-certs")
    done = subprocess.run(
        [sys.executable, "-m", "examples.ripple.devcert", "--dir", str(folder)],
        env=server_environment(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "wrote" in done.stdout
    return folder / "ripple.crt", folder / "ripple.key"


@pytest.fixture(scope="module")
def ripple(
    tmp_path_factory: pytest.TempPathFactory, certs: tuple[Path, Path]
) -> Iterator[ServerProcess]:
    """`python -m examples.ripple` on two workers, its settings from a `.env` file."""
    home = tmp_path_factory.mktemp("ripple")
    cert, key = certs
    (home / ".env").write_text(
        f"RIPPLE_CERT={cert}\nRIPPLE_KEY={key}\nRIPPLE_DB=sqlite:///{home}/ripple.db\n"
        f"RIPPLE_UPLOADS={home}/uploads\n"
    )
    port = free_port()
    tls = ssl.create_default_context(cafile=str(cert))
    argv = [sys.executable, "-m", "examples.ripple", "--port", str(port), "--workers", "2"]
    with Launcher(home) as launcher:
        server = launcher.spawn(argv, ("127.0.0.1", port), cwd=home, tls=tls, announces=True)
        yield server.wait_serving()


def _client(ripple: ServerProcess, certs: tuple[Path, Path]) -> httpx.Client:
    tls = ssl.create_default_context(cafile=str(certs[0]))
    return httpx.Client(base_url=f"https://localhost:{ripple.port}", verify=tls, timeout=10)


def _account(client: httpx.Client, name: str) -> dict[str, Any]:
    answer = client.post("/api/register", json={"name": name, "password": "s3cret-pass"})
    assert answer.status_code == 201, answer.text
    return answer.json()


def _socket_tls(certs: tuple[Path, Path]) -> ssl.SSLContext:
    """The TLS context of the `websockets` clients, capped at TLS 1.2.

    The sync client of `websockets` starts its reader thread while its own thread still
    writes the upgrade request; TLS 1.3 session tickets, which arrive right after the
    handshake, then make the two threads use one SSL object at once, and about one
    connection in a few hundred stalls or is cut. With TLS 1.2 the tickets come inside the
    handshake. Browsers, which the page tests use, speak TLS 1.3.
    """
    tls = ssl.create_default_context(cafile=str(certs[0]))
    tls.maximum_version = ssl.TLSVersion.TLSv1_2
    return tls


def _socket(
    ripple: ServerProcess, certs: tuple[Path, Path], client: httpx.Client
) -> ClientConnection:
    tls = _socket_tls(certs)
    cookie = f"ripple={client.cookies['ripple']}"
    return connect(
        f"wss://localhost:{ripple.port}/pulse",
        ssl=tls,
        open_timeout=5,
        origin=f"https://localhost:{ripple.port}",
        additional_headers={"Cookie": cookie},
    )


def _worker_of(ripple: ServerProcess, ws: ClientConnection) -> int:
    """The pid of the worker that holds the server side of `ws` (read from /proc)."""
    client_port = ws.socket.getsockname()[1]
    wanted = f":{ripple.port:04X} 0100007F:{client_port:04X} "  # local port, remote address
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        if wanted in line:
            inodes.add(f"socket:[{line.split()[9]}]")
    for pid in ripple.workers():
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return pid
    raise AssertionError(f"no worker holds the connection from port {client_port}")


def _event(ws: ClientConnection, wanted: str) -> Any:
    while True:
        message = ws.recv(timeout=10)
        if isinstance(message, bytes):
            continue
        parsed = easy.parse_envelope(message)
        assert parsed is not None
        if parsed[0] == wanted:
            return parsed[1]


# -- start-up -------------------------------------------------------------------------------


def test_without_a_certificate_it_refuses_to_start(tmp_path: Path) -> None:
    # The launcher, and the plain command line too: both run at once, to save a start-up.
    socketify = str(Path(sys.executable).with_name("socketify"))
    commands = {
        "launcher": [sys.executable, "-m", "examples.ripple", "--port", str(free_port())],
        "plain": [socketify, "run", "examples.ripple.app:server", "--bind", "127.0.0.1:0"],
    }
    env = server_environment({"RIPPLE_CERT": "", "RIPPLE_KEY": ""})
    running = {
        name: subprocess.Popen(argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
        for name, argv in commands.items()
    }
    done = {
        name: (proc.communicate(timeout=30)[1], proc.returncode) for name, proc in running.items()
    }
    stderr, status = done["launcher"]
    assert status == 2
    assert "HTTPS only" in stderr and "devcert" in stderr
    stderr, status = done["plain"]
    assert status != 0
    assert "HTTPS only" in stderr and "Traceback" not in stderr  # one line, no worker started


def test_the_development_key_matches_its_certificate_and_is_private(tmp_path: Path) -> None:
    cert, key = devcert.make(tmp_path)
    context = ssl.create_default_context(cafile=str(cert))
    context.load_cert_chain(cert, key)  # the key matches
    assert oct(key.stat().st_mode & 0o777) == "0o600"


# -- the API --------------------------------------------------------------------------------


def test_accounts_sessions_and_bad_input(ripple: ServerProcess, certs: tuple[Path, Path]) -> None:
    with _client(ripple, certs) as client, _client(ripple, certs) as other:
        assert client.get("/api/chats").status_code == 401
        short = client.post("/api/register", json={"name": "x", "password": "short"})
        assert short.status_code == 422
        assert set(short.json()["errors"]) == {"name", "password"}
        assert client.post("/api/register", content=b"{not json").status_code == 400
        me = _account(client, "grace")
        cookie = client.cookies["ripple"]
        assert client.get("/api/me").json() == me
        taken = other.post("/api/register", json={"name": "GRACE", "password": "s3cret-pass"})
        assert taken.status_code == 409
        wrong = other.post("/api/login", json={"name": "grace", "password": "not-the-one"})
        assert wrong.status_code == 401
        # Several fresh connections: whichever worker answers knows the session.
        for _ in range(4):
            with _client(ripple, certs) as fresh:
                fresh.cookies.set("ripple", cookie)
                assert fresh.get("/api/me").json() == me
        assert client.post("/api/logout").status_code == 204
        assert client.get("/api/me").status_code == 401
        login = other.post("/api/login", json={"name": "grace", "password": "s3cret-pass"})
        assert login.status_code == 200 and login.json() == me
        # The cookie is for HTTPS only, and never for scripts or other sites.
        attributes = login.headers["set-cookie"]
        assert "Secure" in attributes and "HttpOnly" in attributes
        assert "SameSite=Strict" in attributes


def test_chats_history_pages_uploads_and_membership(
    ripple: ServerProcess, certs: tuple[Path, Path]
) -> None:
    with (
        _client(ripple, certs) as ann,
        _client(ripple, certs) as ben,
        _client(ripple, certs) as eve,
    ):
        _account(ann, "ann")
        ben_id = _account(ben, "ben")["id"]
        _account(eve, "eve")
        created = ann.post("/api/chats/dm", json={"user_id": ben_id})
        assert created.status_code == 201
        chat = created.json()
        again = ben.post("/api/chats/dm", json={"user_id": ann.get("/api/me").json()["id"]})
        assert again.status_code == 200 and again.json()["id"] == chat["id"]  # one per pair
        for n in range(35):
            sent = ann.post(f"/api/chats/{chat['id']}/messages", json={"text": f"m{n}"})
            assert sent.status_code == 201
        first = ben.get(f"/api/chats/{chat['id']}/messages").json()
        assert [m["text"] for m in first["messages"]] == [f"m{n}" for n in range(5, 35)]
        assert first["has_more"] is True
        before = first["messages"][0]["id"]
        rest = ben.get(f"/api/chats/{chat['id']}/messages?before={before}").json()
        assert [m["text"] for m in rest["messages"]] == [f"m{n}" for n in range(5)]
        assert rest["has_more"] is False
        assert ben.get(f"/api/chats/{chat['id']}/messages?before=x").status_code == 400
        # Unread counts come from the read mark, which only moves forward.
        assert ben.get("/api/chats").json()[0]["unread"] == 35
        assert (
            ben.post(f"/api/chats/{chat['id']}/read", json={"message_id": before}).status_code
            == 204
        )
        assert ben.get("/api/chats").json()[0]["unread"] == 29  # m6 to m34
        ben.post(f"/api/chats/{chat['id']}/read", json={"message_id": 1})
        assert ben.get("/api/chats").json()[0]["unread"] == 29
        # Somebody else's chat does not exist for eve.
        assert eve.get(f"/api/chats/{chat['id']}/messages").status_code == 404
        assert eve.post(f"/api/chats/{chat['id']}/messages", json={"text": "hi"}).status_code == 404
        assert eve.get("/api/chats/999999/messages").status_code == 404
        # An upload, attached to a message, served to signed-in users only.
        png = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
        upload = ann.post(
            "/api/upload",
            content=png,
            headers={"content-type": "image/png", "x-file-name": "dot%20.png"},
        )
        assert upload.status_code == 201
        file = upload.json()
        assert file["name"] == "dot .png" and file["mime"] == "image/png" and file["size"] == 72
        posted = ann.post(f"/api/chats/{chat['id']}/messages", json={"text": "", "file": file})
        assert posted.status_code == 201 and posted.json()["file"]["url"] == file["url"]
        fetched = ben.get(file["url"])
        assert fetched.status_code == 200 and fetched.content == png
        assert fetched.headers["x-content-type-options"] == "nosniff"
        with _client(ripple, certs) as stranger:
            assert stranger.get(file["url"]).status_code == 401
        forged = {"url": "/uploads/../../etc/passwd", "name": "x"}
        bad = ann.post(f"/api/chats/{chat['id']}/messages", json={"file": forged})
        assert bad.status_code == 422
        assert ann.get("/uploads/..%2f..%2fetc%2fpasswd").status_code == 404
        big = ann.post("/api/upload", content=b"x" * (5 * 1024 * 1024 + 1))
        assert big.status_code == 413
        group = ann.post("/api/chats/group", json={"title": "trio", "member_ids": [ben_id, "x"]})
        assert group.status_code == 422
        group = ann.post("/api/chats/group", json={"title": "trio", "member_ids": [ben_id]})
        assert group.status_code == 201
        assert {m["name"] for m in group.json()["members"]} == {"ann", "ben"}


def test_live_events_and_a_voice_call_between_two_sockets(
    ripple: ServerProcess, certs: tuple[Path, Path]
) -> None:
    with (
        _client(ripple, certs) as cy,
        _client(ripple, certs) as dee,
        contextlib.ExitStack() as stack,
    ):
        cy_id = _account(cy, "cy")["id"]
        dee_id = _account(dee, "dee")["id"]
        chat_id = cy.post("/api/chats/dm", json={"user_id": dee_id}).json()["id"]
        dee_ws = stack.enter_context(_socket(ripple, certs, dee))
        assert _event(dee_ws, "hello") == {"user": {"id": dee_id, "name": "dee"}}
        # Cy connects until his socket lands on the other worker: all that follows crosses
        # between the two processes.
        for _ in range(20):
            cy_ws = stack.enter_context(_socket(ripple, certs, cy))
            _event(cy_ws, "hello")
            if _worker_of(ripple, cy_ws) != _worker_of(ripple, dee_ws):
                break
            cy_ws.close()
        else:
            pytest.fail("20 connections in a row went to one worker")
        assert _event(dee_ws, "presence") == {"user_id": cy_id, "online": True}
        cy_ws.send(easy.envelope("typing", {"chat_id": chat_id}))
        assert _event(dee_ws, "typing") == {"chat_id": chat_id, "user_id": cy_id, "name": "cy"}
        cy_ws.send(easy.envelope("send", {"chat_id": chat_id, "text": "<b>hey</b>"}))
        message = _event(dee_ws, "message")
        assert message["text"] == "<b>hey</b>" and message["sender"]["id"] == cy_id
        assert _event(cy_ws, "message") == message  # the sender's other pages hear it too
        dee_ws.send(easy.envelope("read", {"chat_id": chat_id, "message_id": message["id"]}))
        assert _event(cy_ws, "read") == {
            "chat_id": chat_id,
            "user_id": dee_id,
            "message_id": message["id"],
        }
        # Bad input gets an error event, and the connection goes on.
        dee_ws.send("not json")
        assert _event(dee_ws, "error")["error"] == "invalid_envelope"
        dee_ws.send(easy.envelope("send", {"chat_id": 999999, "text": "x"}))
        assert _event(dee_ws, "error")["error"] == "not_found"
        dee_ws.send(easy.envelope("typing", {"chat_id": "1"}))
        assert _event(dee_ws, "error")["error"] == "bad_request"
        # A call: invite, accept, voice both ways, then the end.
        cy_ws.send(easy.envelope("call_invite", {"chat_id": chat_id}))
        assert _event(dee_ws, "call_invite") == {
            "chat_id": chat_id,
            "from": {"id": cy_id, "name": "cy"},
        }
        dee_ws.send(easy.envelope("call_accept", {"chat_id": chat_id}))
        _event(cy_ws, "call_accept")
        frame = media.pack(media.Kind.VOICE, 0, 7, 123, 0, b"\x01\x00" * 160)
        deadline = time.monotonic() + 5
        while True:  # the callee's join reaches the caller's worker in a bus hop
            cy_ws.send(frame)
            with contextlib.suppress(TimeoutError):
                if dee_ws.recv(timeout=0.2) == frame:
                    break
            assert time.monotonic() < deadline, "no voice frame reached the callee"
        dee_ws.send(frame[:-2] + b"\x02\x00")
        while (got := cy_ws.recv(timeout=5)) != frame[:-2] + b"\x02\x00":
            assert isinstance(got, str)  # events may come first; bytes are the frame
        dee_ws.send(easy.envelope("call_end", {"chat_id": chat_id}))
        assert _event(cy_ws, "call_end")["from"]["id"] == dee_id
        dee_ws.close()
        assert _event(cy_ws, "presence") == {"user_id": dee_id, "online": False}


def test_the_live_socket_wants_a_session_and_this_origin(
    ripple: ServerProcess, certs: tuple[Path, Path]
) -> None:
    tls = _socket_tls(certs)
    url = f"wss://localhost:{ripple.port}/pulse"
    with pytest.raises(InvalidStatus) as anonymous:
        connect(url, ssl=tls, origin=f"https://localhost:{ripple.port}", open_timeout=5)
    assert anonymous.value.response.status_code == 401
    with _client(ripple, certs) as client:
        _account(client, "mallory")
        with pytest.raises(InvalidStatus) as elsewhere:
            connect(
                url,
                ssl=tls,
                origin="https://evil.example",
                open_timeout=5,
                additional_headers={"Cookie": f"ripple={client.cookies['ripple']}"},
            )
        assert elsewhere.value.response.status_code == 403


# -- the page -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_media_browser(certs: tuple[Path, Path]) -> Iterator[Browser]:
    """Chromium that trusts the development certificate's key and has a fake microphone."""
    args = [
        f"--ignore-certificate-errors-spki-list={spki_sha256(str(certs[0]))}",
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        "--autoplay-policy=no-user-gesture-required",
    ]
    with chromium(args) as browser:
        yield browser


FIRST = "Hi Bob! How are you? (<script> stays text here)"


def _chart_png() -> bytes:
    """A small bar chart as a PNG, made with zlib: something to upload and look at."""
    width, height = 96, 64
    bars = [20, 44, 32, 56, 38]
    rows = []
    for y in range(height):
        row = bytearray([0])  # filter: none
        for x in range(width):
            bar = x // 19
            lit = bar < len(bars) and x % 19 > 3 and height - y <= bars[bar]
            row += bytes((43, 125, 233) if lit else (245, 248, 252))
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


def _sign_up(context: BrowserContext, url: str, name: str) -> Page:
    page = context.new_page()
    page.goto(url + "/")
    page.wait_for_selector("#auth-form")
    page.fill("#auth-name", name)
    page.fill("#auth-password", "s3cret-pass")
    page.click("#register")
    page.wait_for_selector("#app:not([hidden])")
    wait_for(page, "document.getElementById('conn').title === 'live'")
    return page


def test_two_people_chat_see_typing_and_receipts_and_call_in_chromium(
    ripple: ServerProcess, fake_media_browser: Browser, tmp_path: Path
) -> None:
    url = f"https://localhost:{ripple.port}"
    contexts = [
        fake_media_browser.new_context(viewport={"width": 1100, "height": 640}) for _ in range(2)
    ]
    pages: list[Page] = []
    try:
        for context in contexts:
            context.grant_permissions(["microphone"], origin=url)
        ada = _sign_up(contexts[0], url, "ada")
        pages.append(ada)
        bob = _sign_up(contexts[1], url, "bob")
        pages.append(bob)
        # Ada finds Bob and opens their chat; it appears on Bob's side with his first message.
        ada.fill("#search", "bo")
        ada.click("#people li:has-text('bob')")
        assert wait_for(ada, "document.getElementById('chat-title').textContent === 'bob'")
        assert wait_for(ada, "document.getElementById('chat-sub').textContent === 'online'")
        ada.fill("#text", FIRST)
        ada.press("#text", "Enter")
        unread = "document.querySelector('#chats .chat .unread')?.textContent"
        assert wait_for(bob, f"{unread} === '1'")
        last_receipt = "document.querySelector('#messages li.mine:last-child .receipt')"
        assert wait_for(ada, f"{last_receipt}.dataset.state === 'sent'")
        bob.click("#chats .chat")
        last_text = "document.querySelector('#messages li:last-child .text')?.textContent"
        assert wait_for(bob, f"{last_text} === {FIRST!r}")
        assert wait_for(ada, f"{last_receipt}.dataset.state === 'read'")
        assert bob.evaluate(unread) is None
        # Bob types; Ada sees it in the chat's header.
        bob.type("#text", "Hi Ada, all fine here", delay=10)
        typing = "document.getElementById('chat-sub').textContent"
        assert wait_for(ada, f"{typing} === 'bob is typing…'")
        bob.press("#text", "Enter")
        assert wait_for(ada, f"{last_text} === 'Hi Ada, all fine here'")
        # Bob's connection drops; the page comes back by itself and catches up on what it
        # missed meanwhile.
        bob.evaluate("ripple.live.socket.close()")
        ada.fill("#text", "Here is the chart:")
        ada.press("#text", "Enter")
        assert wait_for(bob, f"{last_text} === 'Here is the chart:'")
        assert wait_for(bob, "document.getElementById('conn').title === 'live'")
        # A picture through the file input: uploaded, then shown on both sides.
        ada.set_input_files(
            "#file", files=[{"name": "chart.png", "mimeType": "image/png", "buffer": _chart_png()}]
        )
        picture = "document.querySelector('#messages li:last-child img.picture')"
        assert wait_for(bob, f"{picture}?.alt === 'chart.png' && {picture}.naturalWidth === 96")
        # A voice call from the fake microphones: each side plays what the other sends.
        ada.click("#call")
        bob.wait_for_selector("#call-accept:visible")
        assert "ada is calling" in bob.inner_text("#call-status")
        bob.click("#call-accept")
        status = "document.getElementById('call-status').textContent"
        frames = "Number(document.getElementById('call-frames').dataset.frames)"
        assert wait_for(bob, f"{frames} >= 10", timeout=15)
        assert wait_for(ada, f"{frames} >= 10", timeout=15)
        # Chromium's fake microphone beeps: what arrives is sound, not silence.
        peak = "Number(document.getElementById('call-frames').dataset.peak)"
        assert wait_for(bob, f"{peak} > 0.01", timeout=15)
        assert wait_for(ada, f"{status} === 'In a call with bob'")
        screenshot(ada, SCREENSHOT)
        ada.click("#call-end")
        assert wait_for(bob, f"{status} === 'ada hung up'")
        assert bob.is_hidden("#call-end")
    finally:
        for page in pages:
            page.close()  # before the server stops: an open socket makes the stop wait
        for context in contexts:
            context.close()
