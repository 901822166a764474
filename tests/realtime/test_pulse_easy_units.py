"""pulse.easy in-process: envelopes, dispatch, error events, rooms, late routes, media chaining."""

from __future__ import annotations

from typing import Any

import gevent
import pytest

from socketify import Server
from socketify.realtime import pulse
from socketify.realtime.pulse import easy, media
from socketify.testing import TestClient
from socketify.testing.realtime import WebSocketSession

pytestmark = pytest.mark.timeout(30)


def test_envelope_is_compact_json_with_sorted_keys_and_empty_data_by_default() -> None:
    assert easy.envelope("welcome", {"b": 1, "a": [1, 2]}) == (
        '{"data":{"a":[1,2],"b":1},"type":"welcome"}'
    )
    assert easy.envelope("ping") == '{"data":{},"type":"ping"}'
    assert easy.envelope("n", 0) == '{"data":0,"type":"n"}'


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"type":"say","data":{"text":"hi"}}', ("say", {"text": "hi"})),
        (b'{"type":"say","data":[1]}', ("say", [1])),
        ('{"type":"bare"}', ("bare", {})),
        ('{"type":"null","data":null}', ("null", None)),
        ("not json", None),
        ('["type","say"]', None),
        ('{"data":1}', None),
        ('{"type":7,"data":1}', None),
    ],
)
def test_parse_envelope_needs_an_object_with_a_string_type(
    raw: str | bytes, parsed: tuple[str, Any] | None
) -> None:
    assert easy.parse_envelope(raw) == parsed


def _chat_server(**app_options: Any) -> tuple[Server, easy.App, list[str]]:
    server = Server()
    app = easy.App(pulse.Hub(name="easy-units"), **app_options)
    closed: list[str] = []

    @app.on("/chat")
    def chat(conn: easy.Connection) -> None:
        conn.emit("welcome", {"id": conn.id})
        conn.on("join", lambda conn, data: conn.emit("joined", {"ok": conn.join(data)}))
        conn.on("leave", lambda conn, data: conn.emit("left", {"ok": conn.leave(data)}))
        conn.on("say", lambda conn, data: conn.broadcast(None, "said", data))
        conn.on("shout", lambda c, data: c.broadcast("lobby", "said", data, include_self=False))
        conn.on_close(lambda conn, code, reason: closed.append(f"{code}:{sorted(conn.rooms)}"))

    app.bind(server)
    return server, app, closed


def _event(ws: WebSocketSession) -> tuple[str, Any]:
    parsed = easy.parse_envelope(ws.receive_text())
    assert parsed is not None
    return parsed


def test_events_dispatch_by_type_and_rooms_broadcast_with_or_without_the_sender() -> None:
    server, app, closed = _chat_server()
    client = TestClient(server)
    with client.websocket("/chat") as alice, client.websocket("/chat") as bob:
        assert _event(alice)[0] == _event(bob)[0] == "welcome"
        for ws in (alice, bob):
            ws.send_text(easy.envelope("join", "lobby"))
            assert _event(ws) == ("joined", {"ok": True})
        alice.send_text(easy.envelope("join", "lobby"))
        assert _event(alice) == ("joined", {"ok": False})  # already in: no double delivery
        alice.send_text(easy.envelope("say", {"text": "hi"}))  # to the default room
        assert _event(alice) == _event(bob) == ("said", {"text": "hi"})
        bob.send_text(easy.envelope("shout", "only alice"))
        assert _event(alice) == ("said", "only alice")
        bob.send_text(easy.envelope("leave", "lobby"))
        assert _event(bob) == ("left", {"ok": True})
        alice.send_text(easy.envelope("say", "after bob left"))
        assert _event(alice) == ("said", "after bob left")
        with pytest.raises(TimeoutError):
            bob.receive(timeout=0.2)
        assert app.hub.room_size("lobby") == 1
        assert len(app.connections()) == 2
    gevent.sleep(0.1)
    # on_close runs before the connection leaves its rooms, so it can still see them.
    assert sorted(closed) == ["1000:['lobby']", "1000:[]"]
    assert app.connections() == [] and app.hub.room_size("lobby") == 0


def test_undeliverable_messages_get_an_error_event_unless_turned_off() -> None:
    server, _, _ = _chat_server()
    with TestClient(server).websocket("/chat") as ws:
        _event(ws)
        ws.send_text("{nope")
        assert _event(ws) == ("error", {"error": "invalid_envelope", "message": easy._EXPECTED})
        ws.send_text('{"type":"dance","data":1}')
        assert _event(ws) == ("error", {"error": "unknown_type", "type": "dance"})

    quiet, _, _ = _chat_server(error_events=False)
    with TestClient(quiet).websocket("/chat") as ws:
        _event(ws)
        ws.send_text("{nope")
        with pytest.raises(TimeoutError):
            ws.receive(timeout=0.2)


def test_the_raw_handler_takes_what_no_event_handler_does() -> None:
    server = Server()
    app = easy.App(pulse.Hub(name="easy-raw"))

    @app.on("/raw")
    def raw(conn: easy.Connection) -> None:
        conn.on("known", lambda conn, data: conn.emit("known", data))
        conn.on_raw(lambda conn, text: conn.emit("raw", text))

    app.bind(server)
    with TestClient(server).websocket("/raw") as ws:
        ws.send_text("plain words")
        assert _event(ws) == ("raw", "plain words")
        ws.send_text(easy.envelope("unknown", 1))
        assert _event(ws) == ("raw", '{"data":1,"type":"unknown"}')
        ws.send_text(easy.envelope("known", 2))
        assert _event(ws) == ("known", 2)


def test_routes_recorded_after_bind_and_after_the_server_froze_are_served() -> None:
    server = Server()
    app = easy.App(pulse.Hub(name="easy-late"))
    app.bind(server)
    app.on("/before-freeze", lambda conn: conn.emit("route", "before-freeze"))
    server.freeze()
    app.on("/after-freeze/:name", lambda conn: conn.emit("route", "after-freeze"))
    client = TestClient(server)
    for path, name in (("/before-freeze", "before-freeze"), ("/after-freeze/x", "after-freeze")):
        with client.websocket(path) as ws:
            assert _event(ws) == ("route", name)
    assert client.get("/after-freeze/x").status_code == 426  # a plain GET: upgrade required
    assert client.get("/elsewhere").status_code == 404


def test_media_frames_go_to_media_handlers_and_other_binaries_to_the_users_handler() -> None:
    server = Server()
    app = easy.App(pulse.Hub(name="easy-media"))
    hub = media.MediaHub(app.hub)
    heard: list[tuple[str, int]] = []
    hub.on_voice("call", lambda ch, frame: heard.append(("call", frame.seq)))
    hub.on_voice("radio", lambda ch, frame: heard.append(("radio", frame.seq)))

    @app.on("/m")
    def m(conn: easy.Connection) -> None:
        conn.channel.on_binary(lambda ch, data: ch.send_binary(b"user:" + data))
        conn.join("call")  # the chat room of the same name is a different room
        hub.join("call", conn.channel)
        hub.join("radio", conn.channel)
        conn.emit("ready", hub.rooms_of(conn.channel))

    app.bind(server)
    voice = media.pack(media.Kind.VOICE, 1, 5, 10, 0, b"pcm")
    with TestClient(server).websocket("/m") as ws:
        assert _event(ws) == ("ready", ["call", "radio"])
        ws.send_bytes(voice)
        ws.send_bytes(b"PM\x09" + voice[3:])  # unknown kind: not media
        assert ws.receive_bytes() == b"user:PM\x09" + voice[3:]
        assert heard == [("call", 5), ("radio", 5)]
        assert app.hub.room_size("call") == 1 and hub.room_size("call") == 1
        hub.leave("call", app.connections()[0].channel)
        assert app.hub.room_size("call") == 1 and hub.room_size("call") == 0
