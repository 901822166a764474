"""`TestClient.websocket()` and `TestClient.sse()`: Pulse and SSE in-process."""

from __future__ import annotations

from collections import Counter
from typing import Any

import gevent
import pytest

from socketify import Request, Response, Server
from socketify.protocol.websocket import Opcode
from socketify.realtime import pulse, sse
from socketify.testing import TestClient
from socketify.testing.realtime import UpgradeRefused, WebSocketClosed
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(30)


def make_server() -> tuple[Server, list[tuple[int, str]]]:
    server = Server()
    closes: list[tuple[int, str]] = []
    hub = pulse.Hub(name="testclient-rooms")

    @server.get("/echo")
    def echo(req: Request, res: Response) -> None:
        ch = pulse.upgrade(req, res, subprotocols=["chat"], max_message_bytes=64)
        if ch is None:
            return
        user = req.cookie("user")

        def on_text(ch: pulse.Channel, text: str) -> None:
            if text == "bye":
                ch.close(4000, "asked to")
            elif text == "who":
                ch.send_text(user or "anonymous")
            else:
                ch.send_text(text.upper())

        ch.on_text(on_text)
        ch.on_binary(lambda ch, data: ch.send_binary(data[::-1]))
        ch.on_close(lambda ch, code, reason: closes.append((code, reason)))

    @server.get("/room")
    def room(req: Request, res: Response) -> None:
        ch = pulse.upgrade(req, res)
        if ch is None:
            return
        hub.join("lobby", ch)
        ch.on_text(lambda ch, text: hub.broadcast_text("lobby", text, exclude=ch))

    @server.get("/origin-checked")
    def origin_checked(req: Request, res: Response) -> None:
        pulse.upgrade(req, res, origins=["https://good.example"])

    @server.get("/events")
    def events(req: Request, res: Response) -> None:
        stream = sse.upgrade(req, res)
        stream.retry(1500)
        stream.send_event("hello", "line one\nline two", id=req.header("Last-Event-ID") or "1")
        stream.comment("keep-alive")

        def later() -> None:
            gevent.sleep(0.05)
            stream.send("from another greenlet")
            stream.close()

        gevent.spawn(later)

    return server, closes


def test_websocket_echo_subprotocol_and_binary_in_process() -> None:
    server, _ = make_server()
    client = TestClient(server)
    with client.websocket("/echo", subprotocols=["chat"]) as ws:
        assert ws.response.status == 101
        assert ws.subprotocol == "chat"
        ws.send_text("hello")
        assert ws.receive_text() == "HELLO"
        ws.send_bytes(b"\x01\x02\x03")
        assert ws.receive_bytes() == b"\x03\x02\x01"
        ws.send_json({"a": 1})
        assert ws.receive_text() == '{"A":1}'


def test_websocket_close_codes_reach_both_sides() -> None:
    server, closes = make_server()
    client = TestClient(server)
    with client.websocket("/echo") as ws:
        ws.send_text("bye")
        with pytest.raises(WebSocketClosed) as closed:
            ws.receive()
        assert (closed.value.code, closed.value.reason) == (4000, "asked to")
    gevent.sleep(0.05)
    assert closes == [(4000, "asked to")]

    with client.websocket("/echo") as ws:
        assert ws.close(1001, "leaving") == (1001, "")
    gevent.sleep(0.05)
    assert closes[-1] == (1001, "leaving")


def test_websocket_ping_is_answered_and_protocol_errors_close_1002() -> None:
    server, closes = make_server()
    client = TestClient(server)
    with client.websocket("/echo") as ws:
        ws.ping(b"are you there")
        ws.send_text("x")
        assert ws.receive_text() == "X"
        assert ws.pongs == [b"are you there"]
        # An unmasked client frame is a protocol error (RFC 6455 §5.1).
        ws.send_frame(bytes((0x80 | Opcode.TEXT, 2)) + b"hi")
        with pytest.raises(WebSocketClosed) as closed:
            ws.receive()
        assert closed.value.code == 1002
    gevent.sleep(0.05)
    assert [code for code, _ in closes] == [1002]


def test_websocket_message_over_the_limit_closes_1009() -> None:
    server, _ = make_server()
    with TestClient(server).websocket("/echo") as ws:
        ws.send_text("x" * 65)
        with pytest.raises(WebSocketClosed) as closed:
            ws.receive()
        assert closed.value.code == 1009


def test_websocket_refusals_come_back_as_responses() -> None:
    server, _ = make_server()
    client = TestClient(server)
    with pytest.raises(UpgradeRefused) as refused:
        client.websocket("/origin-checked", headers={"Origin": "https://evil.example"})
    assert refused.value.response.status == 403
    with pytest.raises(UpgradeRefused) as refused:
        client.websocket("/echo", headers={"Sec-WebSocket-Version": "8"})
    assert refused.value.response.status == 426
    assert refused.value.response.headers["Sec-WebSocket-Version"] == "13"
    with pytest.raises(UpgradeRefused) as refused:
        client.websocket("/nowhere")
    assert refused.value.response.status == 404


def test_websocket_carries_the_clients_cookies() -> None:
    server, _ = make_server()
    client = TestClient(server)
    client.cookies["user"] = "ada"
    with client.websocket("/echo") as ws:
        ws.send_text("who")
        assert ws.receive_text() == "ada"


def test_hub_room_in_process_excludes_the_sender() -> None:
    server, _ = make_server()
    client = TestClient(server)
    with client.websocket("/room") as alice, client.websocket("/room") as bob:
        gevent.sleep(0.05)  # both joined
        alice.send_text("hi all")
        assert bob.receive_text() == "hi all"
        with pytest.raises(TimeoutError):
            alice.receive(timeout=0.2)


def test_sse_events_comments_and_end_of_stream_in_process() -> None:
    server, _ = make_server()
    with TestClient(server).sse("/events", last_event_id="41") as events:
        assert events.response.status == 200
        assert events.response.headers["Content-Type"].startswith("text/event-stream")
        first = events.next_event()
        assert (first.event, first.data, first.id) == ("hello", "line one\nline two", "41")
        assert events.retry == 1500
        second = events.next_event()
        assert (second.event, second.data) == ("message", "from another greenlet")
        assert events.comments == ["keep-alive"]
        with pytest.raises(EOFError):
            events.next_event(timeout=2)


def test_sse_on_a_plain_route_is_refused_with_the_response() -> None:
    server, _ = make_server()
    server.get("/plain", lambda req, res: res.send("not a stream"))
    with pytest.raises(UpgradeRefused) as refused:
        TestClient(server).sse("/plain")
    assert refused.value.response.body == b"not a stream"


def test_head_on_an_sse_route_gives_the_stream_headers_only() -> None:
    server, _ = make_server()
    answer = TestClient(server).head("/events")
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/event-stream")
    assert answer.body == b""


def make_flooding_server() -> tuple[Server, dict[str, Any]]:
    """Routes that send far more than a reader that does not read can take."""
    server = Server()
    seen: dict[str, Any] = {"closes": []}

    def flood(ch: pulse.Channel, text: str) -> None:
        statuses = [ch.send_binary(b"x" * 65536) for _ in range(int(text))]
        seen["statuses"] = Counter(status.name for status in statuses)

    def closed(ws: pulse.Channel, code: int, reason: str) -> None:
        seen["closes"].append(code)

    server.ws("/flood", message=lambda ws, data, is_binary: flood(ws, str(data)), close=closed)
    server.ws("/idle", idle_timeout=0.2, close=closed)

    @server.get("/events")
    def events(req: Request, res: Response) -> None:
        stream = sse.upgrade(req, res)
        stream.on_close(lambda stream: seen["closes"].append("sse"))

        def later() -> None:
            seen["statuses"] = Counter(stream.send("x" * 65536).name for _ in range(400))

        gevent.spawn_later(0.01, later)

    return server, seen


def test_websocket_session_that_does_not_receive_is_closed_1008_past_the_backlog_limit() -> None:
    server, seen = make_flooding_server()
    with TestClient(server).websocket("/flood") as ws:
        ws.send_text("400")  # 25 MiB; the socket pair and the limit hold a few
        wait_for(lambda: "statuses" in seen, 10, interval=0.01, sleep=gevent.sleep)
        statuses = seen["statuses"]
        assert statuses["DROPPED"] > 300 and statuses["BACKPRESSURE"] * 65536 <= (1 << 20) + 65536
        received = 0
        with pytest.raises(WebSocketClosed) as closed:
            while True:
                assert ws.receive_bytes() == b"x" * 65536
                received += 1
        assert closed.value.code == 1008
        assert 0 < received <= statuses["SENT"] + statuses["BACKPRESSURE"]
    wait_for(lambda: seen["closes"], 10, interval=0.01, sleep=gevent.sleep)
    assert seen["closes"] == [1008]


def test_event_stream_session_that_does_not_read_is_ended_past_the_backlog_limit() -> None:
    server, seen = make_flooding_server()
    with TestClient(server).sse("/events") as stream:
        wait_for(lambda: seen["closes"], 10, interval=0.01, sleep=gevent.sleep)
        assert seen["statuses"]["DROPPED"] > 300
        with pytest.raises(EOFError):
            while True:
                stream.next_event()


def test_idle_websocket_session_gets_a_1001_close_frame() -> None:
    server, seen = make_flooding_server()
    with TestClient(server).websocket("/idle") as ws:
        # Not receiving: the ping goes unanswered.
        wait_for(lambda: seen["closes"], 10, interval=0.01, sleep=gevent.sleep)
        with pytest.raises(WebSocketClosed) as closed:
            ws.receive()
        assert (closed.value.code, closed.value.reason) == (1001, "idle timeout")
    assert seen["closes"] == [1001]
