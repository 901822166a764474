"""In-process WebSocket and SSE sessions for `TestClient`.

`client.websocket(path)` and `client.sse(path)` write the request over a socket pair to the
real connection code (`socketify.server.in_process`), so the handshake, the hand-over to
`res.upgrade`, framing, automatic pongs, backpressure and the close handshake are those of a
live worker; only the network and the process are missing. Reads wait cooperatively on this
thread's gevent hub, which is what lets the server side run: use these sessions from the
test's own greenlet (not from another thread), and keep handlers cooperative, as in a worker.

Backpressure is the live one too: the socket pair's kernel buffers stand in for the network's,
so a session that does not receive while the server sends is a slow reader. Past the route's
`max_backpressure` its WebSocket is closed with 1008 (the next `receive` calls return what was
in flight, then raise `WebSocketClosed`) and its event stream ends (`EOFError`); an idle one
gets its 1001 close frame.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from typing import Any

import gevent
import orjson

from socketify.protocol.websocket import CloseCode, Opcode, close_payload, unmask
from socketify.testing.response import TestResponse

__all__ = [
    "EventStreamSession",
    "SseEvent",
    "UpgradeRefused",
    "WebSocketClosed",
    "WebSocketSession",
]

DEFAULT_TIMEOUT = 5.0
_RECV = 65536
_LINE_END = re.compile(rb"\r\n|\r|\n")


class UpgradeRefused(Exception):
    """The server answered the upgrade request with an ordinary response (`response`)."""

    def __init__(self, response: TestResponse) -> None:
        super().__init__(f"upgrade refused: {response.status} {response.reason}")
        self.response = response


class WebSocketClosed(Exception):
    """The WebSocket is closed; `code` and `reason` are those the server sent (1006: none)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"WebSocket closed: {code} {reason!r}")
        self.code = code
        self.reason = reason


class _Wire:
    """The client end of the socket pair with a receive buffer and timeouts."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.eof = False

    def fill(self, timeout: float) -> bool:
        """Read more into the buffer; False at EOF. Raises TimeoutError after `timeout`."""
        if self.eof:
            return False
        try:
            with gevent.Timeout(timeout, TimeoutError(f"nothing received in {timeout} s")):
                data = self.sock.recv(_RECV)
        except ConnectionError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    def take(self, n: int, timeout: float) -> bytes | None:
        """Exactly `n` bytes, or None if the peer closed first."""
        while len(self.buffer) < n:
            if not self.fill(timeout):
                return None
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def read_head(self, timeout: float) -> TestResponse:
        """The response head (status line and headers), leaving the rest in the buffer."""
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            if not self.fill(timeout):
                raise ConnectionError("the server closed before answering")
        head = bytes(self.buffer[: end + 4])
        del self.buffer[: end + 4]
        return TestResponse(head)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


def _client_frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked frame, as a client must send it (RFC 6455 §5.3)."""
    key = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 0x10000:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + key + unmask(payload, key)


class WebSocketSession:
    """A WebSocket as a browser holds it: send messages, receive them, ping, close."""

    def __init__(self, wire: _Wire, response: TestResponse) -> None:
        self._wire = wire
        self.response = response  # the 101 answer
        self.subprotocol = response.headers.get("Sec-WebSocket-Protocol")
        self.pongs: list[bytes] = []  # payloads of the pongs received, in order
        self.close_code: int | None = None  # set once the server's close frame (or EOF) came
        self.close_reason = ""
        self._close_sent = False

    # -- sending ----------------------------------------------------------------------------

    def send_text(self, text: str) -> None:
        """Send a text message."""
        self._send(Opcode.TEXT, text.encode("utf-8"))

    def send_bytes(self, data: bytes) -> None:
        """Send a binary message."""
        self._send(Opcode.BINARY, bytes(data))

    def send_json(self, obj: Any) -> None:
        """Send `obj` as a JSON text message."""
        self._send(Opcode.TEXT, orjson.dumps(obj))

    def send_frame(self, frame: bytes) -> None:
        """Send raw bytes as they are (hand-made, possibly invalid, frames)."""
        self._wire.send(frame)

    def ping(self, payload: bytes = b"") -> None:
        """Send a ping; its pong shows up in `pongs` once a later receive has read it."""
        self._send(Opcode.PING, payload)

    def _send(self, opcode: int, payload: bytes) -> None:
        if self._close_sent or self.close_code is not None:
            raise WebSocketClosed(self.close_code or CloseCode.ABNORMAL, self.close_reason)
        self._wire.send(_client_frame(opcode, payload))

    # -- receiving --------------------------------------------------------------------------

    def receive(self, timeout: float = DEFAULT_TIMEOUT) -> str | bytes:
        """The next message: `str` for text, `bytes` for binary; WebSocketClosed at the end."""
        opcode: int | None = None
        parts: list[bytes] = []
        while True:
            fin, op, payload = self._frame(timeout)
            if op == Opcode.PING:
                if not self._close_sent:
                    try:
                        self._wire.send(_client_frame(Opcode.PONG, payload))
                    except OSError:
                        pass  # the server is gone already; its close frame may still be here
                continue
            if op == Opcode.PONG:
                self.pongs.append(payload)
                continue
            if op == Opcode.CLOSE:
                self._closed_by_server(payload)
                raise WebSocketClosed(self.close_code or CloseCode.NO_STATUS, self.close_reason)
            if opcode is None:
                opcode = op
            parts.append(payload)
            if fin:
                data = b"".join(parts)
                return data.decode("utf-8") if opcode == Opcode.TEXT else data

    def receive_text(self, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The next message, which must be text."""
        message = self.receive(timeout)
        if not isinstance(message, str):
            raise TypeError(f"expected a text message, got {len(message)} binary bytes")
        return message

    def receive_bytes(self, timeout: float = DEFAULT_TIMEOUT) -> bytes:
        """The next message, which must be binary."""
        message = self.receive(timeout)
        if not isinstance(message, bytes):
            raise TypeError(f"expected a binary message, got text {message[:40]!r}")
        return message

    def receive_json(self, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The next text message parsed as JSON."""
        return orjson.loads(self.receive_text(timeout))

    def _frame(self, timeout: float) -> tuple[bool, int, bytes]:
        wire = self._wire
        if self.close_code is not None:
            raise WebSocketClosed(self.close_code, self.close_reason)
        head = wire.take(2, timeout)
        if head is None:
            self.close_code = CloseCode.ABNORMAL
            raise WebSocketClosed(self.close_code, "the connection ended without a close frame")
        fin, opcode, masked, n = head[0] & 0x80, head[0] & 0x0F, head[1] & 0x80, head[1] & 0x7F
        if masked:
            raise AssertionError("the server sent a masked frame (RFC 6455 §5.1)")
        if n >= 126:
            size = wire.take(2 if n == 126 else 8, timeout)
            if size is None:
                raise WebSocketClosed(CloseCode.ABNORMAL, "the connection ended mid-frame")
            n = int.from_bytes(size, "big")
        payload = wire.take(n, timeout)
        if payload is None:
            raise WebSocketClosed(CloseCode.ABNORMAL, "the connection ended mid-frame")
        return bool(fin), opcode, payload

    # -- closing ----------------------------------------------------------------------------

    def _closed_by_server(self, payload: bytes) -> None:
        if len(payload) >= 2:
            self.close_code = int.from_bytes(payload[:2], "big")
            self.close_reason = payload[2:].decode("utf-8", "replace")
        else:
            self.close_code = CloseCode.NO_STATUS
        if not self._close_sent:
            self._close_sent = True
            echo = payload[:2] if self.close_code != CloseCode.NO_STATUS else b""
            try:
                self._wire.send(_client_frame(Opcode.CLOSE, echo))
            except OSError:
                pass

    def close(
        self, code: int = CloseCode.NORMAL, reason: str = "", timeout: float = DEFAULT_TIMEOUT
    ) -> tuple[int, str]:
        """Start (or finish) the close handshake; the server's code and reason."""
        if self.close_code is None and not self._close_sent:
            self._close_sent = True
            self._wire.send(_client_frame(Opcode.CLOSE, close_payload(code, reason)))
        while self.close_code is None:
            try:
                _fin, op, payload = self._frame(timeout)
            except WebSocketClosed:
                break
            if op == Opcode.CLOSE:
                self._closed_by_server(payload)
        self._wire.close()
        assert self.close_code is not None
        return self.close_code, self.close_reason

    def __enter__(self) -> WebSocketSession:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.close_code is None:
            self.close()
        else:
            self._wire.close()


@dataclass(frozen=True)
class SseEvent:
    """One dispatched server-sent event (the HTML event-stream rules)."""

    data: str
    event: str = "message"
    id: str | None = None  # the last event id in force when this event was dispatched


class EventStreamSession:
    """An `EventSource` without the reconnecting: read events as the server sends them."""

    def __init__(self, wire: _Wire, response: TestResponse) -> None:
        self._wire = wire
        self.response = response  # the 200 head
        self.comments: list[str] = []  # comment lines (heartbeats), in order
        self.last_event_id: str | None = None
        self.retry: int | None = None  # the reconnection time the server asked for, in ms

    def next_event(self, timeout: float = DEFAULT_TIMEOUT) -> SseEvent:
        """The next event; EOFError when the stream ended, TimeoutError after `timeout`."""
        data: list[str] = []
        event = "message"
        while True:
            line = self._line(timeout)
            if line is None:
                raise EOFError("the event stream ended")
            if not line:
                if data:
                    return SseEvent("\n".join(data), event, self.last_event_id)
                event = "message"
                continue
            if line.startswith(":"):
                self.comments.append(line[1:].removeprefix(" "))
                continue
            name, colon, value = line.partition(":")
            value = value.removeprefix(" ") if colon else ""
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name == "id" and "\0" not in value:
                self.last_event_id = value
            elif name == "retry" and value.isdigit():
                self.retry = int(value)

    def _line(self, timeout: float) -> str | None:
        wire = self._wire
        while True:
            found = _LINE_END.search(wire.buffer)
            # A lone CR at the end of the buffer may be the first half of CRLF: wait for more.
            if found and not (found.group() == b"\r" and found.end() == len(wire.buffer)):
                line = bytes(wire.buffer[: found.start()])
                del wire.buffer[: found.end()]
                return line.decode("utf-8", "replace")
            if not wire.fill(timeout):
                return None

    def close(self) -> None:
        """Hang up, as a browser tab closing."""
        self._wire.close()

    def __enter__(self) -> EventStreamSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_websocket(sock: Any, request: bytes, timeout: float) -> WebSocketSession:
    """Send the upgrade `request` on `sock`; the session, or UpgradeRefused."""
    wire = _Wire(sock)
    wire.send(request)
    response = wire.read_head(timeout)
    if response.status != 101:
        _read_refusal_body(wire, response, timeout)
    return WebSocketSession(wire, response)


def open_event_stream(sock: Any, request: bytes, timeout: float) -> EventStreamSession:
    """Send the SSE `request` on `sock`; the session, or UpgradeRefused if not a stream."""
    wire = _Wire(sock)
    wire.send(request)
    response = wire.read_head(timeout)
    content_type = response.headers.get("Content-Type") or ""
    if response.status != 200 or not content_type.startswith("text/event-stream"):
        _read_refusal_body(wire, response, timeout)
    return EventStreamSession(wire, response)


def _read_refusal_body(wire: _Wire, head: TestResponse, timeout: float) -> None:
    length = int(head.headers.get("Content-Length") or 0)
    body = wire.take(length, timeout) or b""
    wire.close()
    raise UpgradeRefused(TestResponse(head.raw + body))
