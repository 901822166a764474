"""A raw HTTP/2 client for tests that must put exact (and wrong) frames on the wire.

    with H2Client.connect(server.tcp) as client:
        client.handshake()
        assert client.get("/ping").body == b"pong"
        client.send(frame(FrameType.DATA, 0, 0, b"x"))  # DATA on stream 0
        client.expect_connection_error(ErrorCode.PROTOCOL_ERROR)

Well-formed frames are built with `hyperframe`, header blocks with `hpack`; `frame()` writes
any type, flags, stream and payload, so a test can send what a client library would refuse
to. The server's frames are parsed as they arrive and their header blocks decoded at once, so
the client's HPACK state always follows the server's. On the way in the client checks what
every server owes a client: no frame over the SETTINGS_MAX_FRAME_SIZE it announced, no DATA
beyond the flow-control windows it granted. It acknowledges the server's SETTINGS and, while
`auto_window` is on, gives back every byte of window that DATA consumed.

Every frame either way goes into a transcript that each failed expectation prints: the frame
exchange is the diagnosis.
"""

from __future__ import annotations

import collections
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import TracebackType
from typing import NoReturn

import hpack
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from tests.support.raw_client import connect

__all__ = [
    "ACK",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_WINDOW",
    "END_HEADERS",
    "END_STREAM",
    "MAX_WINDOW",
    "PADDED",
    "PREFACE",
    "PRIORITY",
    "ErrorCode",
    "FrameType",
    "H2Client",
    "H2Response",
    "Received",
    "Setting",
    "frame",
    "settings_payload",
]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DEFAULT_WINDOW = 65_535
MAX_WINDOW = 2**31 - 1
DEFAULT_MAX_FRAME_SIZE = 16_384
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY = 0x20
TRANSCRIPT_LINES = 80  # the end of the exchange a failure prints


class FrameType(IntEnum):
    """Frame types of RFC 9113."""

    DATA = 0x0
    HEADERS = 0x1
    PRIORITY = 0x2
    RST_STREAM = 0x3
    SETTINGS = 0x4
    PUSH_PROMISE = 0x5
    PING = 0x6
    GOAWAY = 0x7
    WINDOW_UPDATE = 0x8
    CONTINUATION = 0x9


class ErrorCode(IntEnum):
    """Error codes of RST_STREAM and GOAWAY."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD


class Setting(IntEnum):
    """SETTINGS parameters."""

    HEADER_TABLE_SIZE = 0x1
    ENABLE_PUSH = 0x2
    MAX_CONCURRENT_STREAMS = 0x3
    INITIAL_WINDOW_SIZE = 0x4
    MAX_FRAME_SIZE = 0x5
    MAX_HEADER_LIST_SIZE = 0x6


_FLAG_NAMES = {
    FrameType.DATA: {END_STREAM: "END_STREAM", PADDED: "PADDED"},
    FrameType.HEADERS: {
        END_STREAM: "END_STREAM",
        END_HEADERS: "END_HEADERS",
        PADDED: "PADDED",
        PRIORITY: "PRIORITY",
    },
    FrameType.SETTINGS: {ACK: "ACK"},
    FrameType.PING: {ACK: "ACK"},
    FrameType.CONTINUATION: {END_HEADERS: "END_HEADERS"},
    FrameType.PUSH_PROMISE: {END_HEADERS: "END_HEADERS", PADDED: "PADDED"},
}


def frame(
    kind: int, flags: int, stream_id: int, payload: bytes = b"", *, reserved: bool = False
) -> bytes:
    """One frame exactly as given: any type, flags, stream and payload (the length is the
    payload's); `reserved` sets the reserved bit in front of the stream identifier."""
    stream = stream_id | (0x8000_0000 if reserved else 0)
    header = len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big")
    return header + payload


def settings_payload(values: Mapping[int, int]) -> bytes:
    """A SETTINGS payload: each identifier and value as given, in order, unchecked."""
    return b"".join(
        key.to_bytes(2, "big") + value.to_bytes(4, "big") for key, value in values.items()
    )


def _name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"0x{value:x}"


def _describe(
    kind: int,
    flags: int,
    stream_id: int,
    payload: bytes,
    headers: Iterable[tuple[str, str]] | None = None,
) -> str:
    """One line for the transcript: a frame as its header and payload say."""
    names: dict[int, str] = _FLAG_NAMES.get(kind, {})
    shown = [name for bit, name in names.items() if flags & bit]
    unknown = flags & ~sum(names)
    if unknown:
        shown.append(f"0x{unknown:x}")
    words = [_name(FrameType, kind), f"stream={stream_id}"]
    if shown:
        words.append("|".join(shown))
    if kind in (FrameType.RST_STREAM, FrameType.GOAWAY):
        offset = 4 if kind == FrameType.GOAWAY else 0
        if kind == FrameType.GOAWAY and len(payload) >= 4:
            words.append(f"last={int.from_bytes(payload[:4], 'big') & MAX_WINDOW}")
        if len(payload) >= offset + 4:
            words.append(_name(ErrorCode, int.from_bytes(payload[offset : offset + 4], "big")))
        if payload[offset + 4 :]:
            words.append(f"debug={payload[offset + 4 :][:80]!r}")
    elif kind == FrameType.SETTINGS and len(payload) % 6 == 0 and payload:
        pairs = [payload[i : i + 6] for i in range(0, len(payload), 6)]
        words.append(
            ", ".join(
                f"{_name(Setting, int.from_bytes(p[:2], 'big'))}={int.from_bytes(p[2:], 'big')}"
                for p in pairs
            )
        )
    elif kind == FrameType.WINDOW_UPDATE and len(payload) == 4:
        words.append(f"+{int.from_bytes(payload, 'big')}")
    elif kind == FrameType.PING:
        words.append(payload.hex())
    if headers is not None:
        words.append(str(list(headers)))
    if kind not in (FrameType.SETTINGS, FrameType.WINDOW_UPDATE) or len(payload) not in (0, 4):
        words.append(f"len={len(payload)}")
    return " ".join(words)


def _describe_bytes(data: bytes) -> list[str]:
    """The transcript lines of bytes about to be sent: the preface, then frame by frame."""
    lines = []
    if data.startswith(PREFACE):
        lines.append("preface")
        data = data[len(PREFACE) :]
    while len(data) >= 9:
        length = int.from_bytes(data[:3], "big")
        stream_id = int.from_bytes(data[5:9], "big")
        payload = data[9 : 9 + length]
        line = _describe(data[3], data[4], stream_id & MAX_WINDOW, payload)
        if stream_id & 0x8000_0000:
            line += " (reserved bit set)"
        if len(payload) < length:
            line += f" (only {len(payload)} bytes of it)"
        lines.append(line)
        data = data[9 + length :]
    if data:
        lines.append(f"raw bytes {data[:40]!r}")
    return lines


@dataclass(frozen=True)
class Received:
    """A frame from the server, with its header block decoded (HEADERS and PUSH_PROMISE)."""

    frame: Frame
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def kind(self) -> int:
        """The frame type (a FrameType for the known ones)."""
        return int(self.frame.type) if self.frame.type is not None else -1

    @property
    def stream_id(self) -> int:
        """The stream the frame is on (0: the connection)."""
        return int(self.frame.stream_id)

    def has(self, flag: str) -> bool:
        """Whether the named flag ("END_STREAM", "ACK", ...) is set."""
        return flag in self.frame.flags

    @property
    def error_code(self) -> int:
        """The error code of a GOAWAY or RST_STREAM."""
        return int(self.frame.error_code)

    @property
    def status(self) -> int | None:
        """The :status of a response header block, if it carries one."""
        return next((int(value) for name, value in self.headers if name == ":status"), None)


@dataclass
class H2Response:
    """One stream's response, filled in as its frames arrive."""

    stream_id: int
    status: int | None = None  # the final status, once its HEADERS came
    headers: list[tuple[str, str]] = field(default_factory=list)
    trailers: list[tuple[str, str]] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    data_frames: list[int] = field(default_factory=list)  # the size of each DATA payload
    ended: bool = False  # END_STREAM came
    reset: int | None = None  # the error code of the server's RST_STREAM

    @property
    def body(self) -> bytes:
        """The payload of the DATA frames so far."""
        return bytes(self.data)

    def header(self, name: str) -> str | None:
        """The first value of header `name` (lower case)."""
        return next((value for key, value in self.headers if key == name), None)


class H2Client:
    """One HTTP/2 connection driven frame by frame; a context manager that closes it."""

    def __init__(self, sock: socket.socket, authority: str, timeout: float = 5.0) -> None:
        self.sock = sock
        self.authority = authority
        self.timeout = timeout
        self.scheme = "https" if isinstance(sock, ssl.SSLSocket) else "http"
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 20
        self.server_settings: dict[int, int] = {}
        self.auto_window = True  # give back the window that each DATA frame consumed
        self.closed = False  # the server closed (or reset) the connection
        self.reset_seen = False  # ... and it was a reset (a close with unread data)
        self.backlog: collections.deque[Received] = collections.deque()
        self.reset_streams: set[int] = set()
        self.responses: dict[int, H2Response] = {}  # by stream, as their frames arrive
        self.goaway: Received | None = None  # the server's GOAWAY, once it sent one
        self._buffer = bytearray()
        self._lines: list[str] = []
        self._repeats = 0
        self._next_stream = 1
        # What the server lets us send, and what we let it send.
        self.send_window = DEFAULT_WINDOW
        self.send_windows: dict[int, int] = {}
        self.recv_window = DEFAULT_WINDOW
        self.recv_windows: dict[int, int] = {}
        self.local_settings: dict[int, int] = {}
        self._unacked: list[dict[int, int]] = []

    @classmethod
    def connect(
        cls, address: tuple[str, int], timeout: float = 5.0, *, tls: ssl.SSLContext | None = None
    ) -> H2Client:
        """A client on a fresh TCP (or, with `tls`, TLS) connection; nothing sent yet."""
        host, port = address
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return cls(connect(address, timeout, tls=tls), authority, timeout)

    def __enter__(self) -> H2Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket (no GOAWAY: a test sends one when it means to)."""
        self.sock.close()

    # -- the transcript -----------------------------------------------------------------------

    def note(self, line: str) -> None:
        """Add a line of the test's own to the transcript (what it sent around the client)."""
        self._log(f"-- {line}")

    def _log(self, line: str) -> None:
        if self._lines and self._lines[-1] == line:
            self._repeats += 1
            return
        self._flush_repeats()
        self._lines.append(line)

    def _flush_repeats(self) -> None:
        if self._repeats:
            self._lines.append(f"  (the line above {self._repeats} more times)")
            self._repeats = 0

    def exchange(self) -> str:
        """The end of the frame exchange so far, one frame a line (→ sent, ← received)."""
        self._flush_repeats()
        lines = self._lines[-TRANSCRIPT_LINES:]
        skipped = len(self._lines) - len(lines)
        head = [f"  ... {skipped} earlier lines"] if skipped else []
        return "\n".join(["frame exchange:", *head, *(f"  {line}" for line in lines)])

    def fail(self, message: str) -> NoReturn:
        """Fail the test with `message` and the frame exchange."""
        raise AssertionError(f"{message}\n{self.exchange()}") from None

    # -- sending ------------------------------------------------------------------------------

    def send(self, *frames: Frame | bytes, note: str = "", line: str = "") -> None:
        """Write frames (hyperframe frames or raw bytes) in one go; `line` stands for them
        in the transcript, `note` is added to the first frame's line."""
        data = b"".join(f if isinstance(f, bytes) else f.serialize() for f in frames)
        lines = [line] if line else _describe_bytes(data)
        if len(lines) > 12:
            counts = collections.Counter(text.split(" ", 1)[0] for text in lines)
            lines = [f"{len(lines)} frames: " + ", ".join(f"{k} x{n}" for k, n in counts.items())]
        for index, text in enumerate(lines):
            self._log(f"→ {text}{f'  ({note})' if note and not index else ''}")
        self.sock.sendall(data)

    def handshake(
        self, settings: Mapping[int, int] | None = None, *, wait_ack: bool = True
    ) -> Received:
        """Send the preface and SETTINGS, check the server's first frame is SETTINGS and
        acknowledge it; with `wait_ack`, wait for the server to acknowledge ours."""
        values = dict(settings or {})
        self.send(PREFACE, SettingsFrame(0, settings=values))
        self._expect_settings(values)
        first = self.next_frame()
        if first is None or first.kind != FrameType.SETTINGS or first.has("ACK"):
            self.fail("the server's first frame is not a SETTINGS frame")
        if wait_ack:
            self.wait_settings_ack()
        return first

    def send_settings(self, values: Mapping[int, int]) -> None:
        """Send a SETTINGS frame and keep the values, to apply once the server ACKs them."""
        self.send(SettingsFrame(0, settings=dict(values)))
        self._expect_settings(dict(values))

    def _expect_settings(self, values: dict[int, int]) -> None:
        # A larger window is the server's to use at once; a smaller one counts after the ACK.
        old = self.local_settings.get(Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
        new = values.get(Setting.INITIAL_WINDOW_SIZE, old)
        if new > old:
            self._apply_initial_window(old, new)
        self._unacked.append(values)

    def _apply_initial_window(self, old: int, new: int) -> None:
        self.local_settings[Setting.INITIAL_WINDOW_SIZE] = new
        for stream_id in self.recv_windows:
            self.recv_windows[stream_id] += new - old

    def wait_settings_ack(self, timeout: float | None = None) -> None:
        """Read until every SETTINGS sent so far is acknowledged."""
        while self._unacked:
            self.read_until(lambda r: r.kind == FrameType.SETTINGS and r.has("ACK"), timeout)

    def new_stream(self) -> int:
        """The next client stream identifier (odd, increasing)."""
        stream_id = self._next_stream
        self._next_stream += 2
        return stream_id

    def skip_to_stream(self, stream_id: int) -> None:
        """Make `stream_id` the next stream `new_stream()` hands out."""
        self._next_stream = stream_id

    def request_headers(
        self, method: str = "GET", path: str = "/ping", extra: Iterable[tuple[str, str]] = ()
    ) -> list[tuple[str, str]]:
        """The pseudo-headers of a request, then `extra`."""
        return [
            (":method", method),
            (":scheme", self.scheme),
            (":authority", self.authority),
            (":path", path),
            *extra,
        ]

    def send_headers(
        self,
        stream_id: int,
        headers: Iterable[tuple[str, str]],
        *,
        end_stream: bool = True,
        max_fragment: int | None = None,
    ) -> None:
        """Encode `headers` and send them as HEADERS (and CONTINUATION, when the block is
        longer than `max_fragment`, by default the server's SETTINGS_MAX_FRAME_SIZE)."""
        headers = list(headers)
        block = self.encoder.encode(headers)
        size = max_fragment or self.max_send_frame
        pieces = [block[i : i + size] for i in range(0, len(block), size)] or [b""]
        frames: list[Frame] = []
        first = HeadersFrame(stream_id, pieces[0])
        if end_stream:
            first.flags.add("END_STREAM")
        frames.append(first)
        frames += [ContinuationFrame(stream_id, piece) for piece in pieces[1:]]
        frames[-1].flags.add("END_HEADERS")
        self._open(stream_id)
        self.send(*frames, note=", ".join(f"{k}: {v}" for k, v in headers)[:200])

    def _open(self, stream_id: int) -> None:
        initial = self.local_settings.get(Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
        self.recv_windows.setdefault(stream_id, initial)
        server_initial = self.server_settings.get(Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
        self.send_windows.setdefault(stream_id, server_initial)

    @property
    def max_send_frame(self) -> int:
        """The largest frame payload the server accepts."""
        return self.server_settings.get(Setting.MAX_FRAME_SIZE, DEFAULT_MAX_FRAME_SIZE)

    def send_data(self, stream_id: int, body: bytes, *, end_stream: bool = True) -> None:
        """Send `body` as DATA frames within the server's frame size and flow-control windows,
        reading the WINDOW_UPDATEs it sends when a window is spent."""
        self._open(stream_id)
        view = memoryview(body)
        while True:
            allowed = min(self.send_window, self.send_windows[stream_id], self.max_send_frame)
            if allowed <= 0 and view:
                self._read_window_update()
                continue
            piece, view = bytes(view[:allowed]), view[allowed:]
            data = DataFrame(stream_id, piece)
            if end_stream and not view:
                data.flags.add("END_STREAM")
            self.send_window -= len(piece)
            self.send_windows[stream_id] -= len(piece)
            self.send(data)
            if not view:
                return

    def _read_window_update(self) -> None:
        # Anything else read meanwhile stays in the backlog for whoever reads next.
        kept: list[Received] = []
        try:
            while True:
                try:
                    received = self._read_wire(None)
                except TimeoutError:
                    self.fail("the server gave no window for the rest of a request body")
                if received is None:
                    self.fail("the connection closed while the client waited for window")
                if received.kind == FrameType.WINDOW_UPDATE:
                    return
                kept.append(received)
        finally:
            self.backlog.extend(kept)

    def request(
        self,
        method: str = "GET",
        path: str = "/ping",
        *,
        body: bytes | None = None,
        headers: Iterable[tuple[str, str]] = (),
    ) -> int:
        """Send a whole request on a new stream; its stream identifier."""
        stream_id = self.new_stream()
        extra = list(headers)
        if body is not None:
            extra.append(("content-length", str(len(body))))
        self.send_headers(
            stream_id, self.request_headers(method, path, extra), end_stream=body is None
        )
        if body is not None:
            self.send_data(stream_id, body)
        return stream_id

    def get(self, path: str = "/ping", timeout: float | None = None) -> H2Response:
        """GET `path` on a new stream and read the whole response."""
        return self.response(self.request("GET", path), timeout)

    def ping(self, payload: bytes = b"canary!!", timeout: float | None = None) -> list[Received]:
        """Send a PING and read until its ACK; the frames read before the ACK."""
        self.send(PingFrame(0, payload))
        before: list[Received] = []

        def is_ack(received: Received) -> bool:
            if received.kind == FrameType.PING and received.has("ACK"):
                return bytes(received.frame.opaque_data) == payload
            before.append(received)
            return False

        self.read_until(is_ack, timeout)
        return before

    def reset(self, stream_id: int, code: int = ErrorCode.CANCEL) -> None:
        """Send RST_STREAM; the client stops giving that stream window."""
        self.reset_streams.add(stream_id)
        self.send(RstStreamFrame(stream_id, code))

    # -- receiving ----------------------------------------------------------------------------

    def _recv(self, deadline: float) -> bool:
        """Read more bytes into the buffer; False at EOF (or a reset)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 20)
        except (ConnectionResetError, BrokenPipeError):
            self._log("← connection reset")
            self.reset_seen = True
            chunk = b""
        except ssl.SSLError as exc:
            self._log(f"← TLS error {exc}")
            chunk = b""
        if not chunk:
            if not self.closed:
                self._log("← connection closed")
            self.closed = True
            return False
        self._buffer += chunk
        return True

    def _read_raw(self, deadline: float) -> tuple[bytes, bytes] | None:
        """One frame's header and payload, None at EOF."""
        while len(self._buffer) < 9:
            if self.closed or not self._recv(deadline):
                return None
        length = int.from_bytes(self._buffer[:3], "big")
        while len(self._buffer) < 9 + length:
            if self.closed or not self._recv(deadline):
                if self._buffer:
                    self._log(f"← a cut frame: {bytes(self._buffer[:40])!r}")
                return None
        header, payload = bytes(self._buffer[:9]), bytes(self._buffer[9 : 9 + length])
        del self._buffer[: 9 + length]
        return header, payload

    def _read_wire(self, timeout: float | None) -> Received | None:
        """The next frame from the socket, handled the way every frame is (see the module's
        docstring); None once the server closed the connection."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        raw = self._read_raw(deadline)
        if raw is None:
            return None
        header, payload = raw
        parsed, length = Frame.parse_frame_header(memoryview(header))
        allowed = self.local_settings.get(Setting.MAX_FRAME_SIZE, DEFAULT_MAX_FRAME_SIZE)
        if length > allowed:
            self._log("← " + _describe_bytes(header + payload)[0])
            self.fail(f"the server sent a {length}-byte frame; the client allows {allowed}")
        try:
            parsed.parse_body(memoryview(payload))
        except Exception as exc:
            self._log("← " + _describe_bytes(header + payload)[0])
            self.fail(f"the server sent a frame that does not parse: {exc!r}")
        headers: tuple[tuple[str, str], ...] = ()
        if isinstance(parsed, HeadersFrame) or parsed.type == FrameType.PUSH_PROMISE:
            block = bytes(parsed.data)
            while "END_HEADERS" not in parsed.flags:
                more = self._read_raw(deadline)
                if more is None:
                    self.fail("the connection closed inside a header block")
                cont, _ = Frame.parse_frame_header(memoryview(more[0]))
                cont.parse_body(memoryview(more[1]))
                if not isinstance(cont, ContinuationFrame) or cont.stream_id != parsed.stream_id:
                    self.fail(f"the server interrupted a header block with {cont!r}")
                block += cont.data
                if "END_HEADERS" in cont.flags:
                    parsed.flags.add("END_HEADERS")
            try:
                decoded = self.decoder.decode(block)
            except hpack.HPACKError as exc:
                self.fail(f"the server's header block does not decode: {exc!r}")
            headers = tuple((str(name), str(value)) for name, value in decoded)
        self._log(
            "← " + _describe(header[3], header[4], parsed.stream_id, payload, headers or None)
        )
        received = Received(parsed, headers)
        self._account(received)
        self._record(received)
        return received

    def _record(self, received: Received) -> None:
        """File a stream's frame into its response; keep the server's GOAWAY."""
        if received.kind == FrameType.GOAWAY:
            self.goaway = received
        if received.stream_id == 0:
            return
        record = self.responses.setdefault(received.stream_id, H2Response(received.stream_id))
        if received.kind == FrameType.HEADERS:
            status = received.status
            if status is None:
                record.trailers = list(received.headers)
            elif status >= 200:
                record.status, record.headers = status, list(received.headers)
        elif received.kind == FrameType.DATA:
            record.data += received.frame.data
            record.data_frames.append(len(received.frame.data))
        elif received.kind == FrameType.RST_STREAM:
            record.reset = received.error_code
        if received.kind in (FrameType.HEADERS, FrameType.DATA) and received.has("END_STREAM"):
            record.ended = True

    def _account(self, received: Received) -> None:
        """Windows, the server's SETTINGS and our SETTINGS acknowledged."""
        parsed = received.frame
        if isinstance(parsed, DataFrame):
            spent = parsed.flow_controlled_length
            stream_id = parsed.stream_id
            initial = self.local_settings.get(Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
            self.recv_window -= spent
            self.recv_windows[stream_id] = self.recv_windows.get(stream_id, initial) - spent
            if self.recv_window < 0 or self.recv_windows[stream_id] < 0:
                self.fail("the server sent DATA beyond the flow-control window it was given")
            if self.auto_window and spent:
                updates = [WindowUpdateFrame(0, spent)]
                if "END_STREAM" not in parsed.flags and stream_id not in self.reset_streams:
                    updates.append(WindowUpdateFrame(stream_id, spent))
                self.grant(*updates)
        elif isinstance(parsed, WindowUpdateFrame):
            if parsed.stream_id == 0:
                self.send_window += parsed.window_increment
            else:
                self.send_windows[parsed.stream_id] = (
                    self.send_windows.get(parsed.stream_id, 0) + parsed.window_increment
                )
        elif isinstance(parsed, SettingsFrame) and "ACK" in parsed.flags:
            if self._unacked:
                values = dict(self._unacked.pop(0))
                old = self.local_settings.get(Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
                new = values.pop(Setting.INITIAL_WINDOW_SIZE, old)
                if new < old:
                    self._apply_initial_window(old, new)
                self.local_settings.update(values)
        elif isinstance(parsed, SettingsFrame):
            old = self.server_settings.get(Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
            self.server_settings.update(parsed.settings)
            new = self.server_settings.get(Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
            for stream_id in self.send_windows:
                self.send_windows[stream_id] += new - old
            self.send(SettingsFrame(0, flags=["ACK"]))

    def grant(self, *updates: WindowUpdateFrame) -> None:
        """Send WINDOW_UPDATEs and count them into the windows the server may use."""
        for update in updates:
            if update.stream_id == 0:
                self.recv_window += update.window_increment
            else:
                self.recv_windows[update.stream_id] = (
                    self.recv_windows.get(update.stream_id, 0) + update.window_increment
                )
        grants = ", ".join(f"stream={u.stream_id} +{u.window_increment}" for u in updates)
        self.send(*updates, line=f"WINDOW_UPDATE {grants}")

    def next_frame(self, timeout: float | None = None) -> Received | None:
        """The next frame (a kept one first); None once the connection is closed; raises
        TimeoutError when nothing comes within `timeout` (default: the client's)."""
        if self.backlog:
            return self.backlog.popleft()
        return self._read_wire(timeout)

    def read_until(
        self, predicate: Callable[[Received], object], timeout: float | None = None
    ) -> Received:
        """Read frames until one satisfies `predicate`; fail at EOF or after `timeout`."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            try:
                received = self.next_frame(max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                self.fail("timed out waiting for the frame the test expects")
            if received is None:
                self.fail("the connection closed before the frame the test expects")
            if predicate(received):
                return received

    def frames_within(self, seconds: float) -> list[Received]:
        """Every frame that arrives in the next `seconds` (fewer if the connection closes)."""
        deadline = time.monotonic() + seconds
        frames: list[Received] = []
        while True:
            try:
                received = self.next_frame(max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                return frames
            if received is None:
                return frames
            frames.append(received)

    def response(self, stream_id: int, timeout: float | None = None) -> H2Response:
        """Read until the response on `stream_id` has ended (frames read earlier count); a
        reset, a GOAWAY that leaves the stream out or a close fails the test."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        record = self.responses.setdefault(stream_id, H2Response(stream_id))
        while not record.ended:
            if record.reset is not None:
                self.fail(f"stream {stream_id} was reset instead of answered")
            goaway = self.goaway
            if goaway is not None and (
                goaway.error_code != ErrorCode.NO_ERROR or goaway.frame.last_stream_id < stream_id
            ):
                self.fail(f"GOAWAY while waiting for the response on stream {stream_id}")
            try:
                received = self.next_frame(max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                self.fail(f"no complete response on stream {stream_id} in time")
            if received is None:
                self.fail(f"the connection closed before the response on stream {stream_id}")
        if record.status is None:
            self.fail(f"stream {stream_id} ended without a final status")
        return record

    # -- expectations -------------------------------------------------------------------------

    def expect_closed(self, timeout: float | None = None) -> list[Received]:
        """Read until the server closes the connection; the frames it sent meanwhile."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        frames: list[Received] = []
        while True:
            try:
                received = self.next_frame(max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                self.fail("the server did not close the connection")
            if received is None:
                return frames
            frames.append(received)

    def expect_connection_error(self, *codes: int, timeout: float | None = None) -> Received:
        """Read until a GOAWAY, which must carry one of `codes`, then until the server closes
        the connection; the GOAWAY."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        wanted = " or ".join(_name(ErrorCode, code) for code in codes)
        while True:
            try:
                received = self.next_frame(max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                self.fail(f"no connection error ({wanted}) in time")
            if received is None:
                self.fail(f"the connection closed without a GOAWAY ({wanted})")
            if received.kind == FrameType.GOAWAY:
                break
        if received.error_code not in codes:
            self.fail(f"GOAWAY carries {_name(ErrorCode, received.error_code)}, not {wanted}")
        self.expect_closed(max(deadline - time.monotonic(), 1.0))
        return received

    def expect_stream_error(
        self,
        stream_id: int,
        *codes: int,
        connection_error: bool = True,
        answered: bool = False,
    ) -> str:
        """Read until stream `stream_id` is reset with one of `codes` ("stream"), or, with
        `connection_error`, the connection ends with a GOAWAY carrying one ("connection").

        A response on the stream before the reset must be a 4xx, unless the stream was
        `answered` before the error was provoked. After a stream error the same connection
        must still answer a request.
        """
        wanted = " or ".join(_name(ErrorCode, code) for code in codes)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                received = self.next_frame(max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                self.fail(f"no error ({wanted}) for stream {stream_id} in time")
            if received is None:
                self.fail(f"the connection closed without an error ({wanted})")
            if received.kind == FrameType.GOAWAY:
                if not connection_error:
                    self.fail(f"a connection error where a stream error ({wanted}) is due")
                if received.error_code not in codes:
                    self.fail(f"GOAWAY carries {_name(ErrorCode, received.error_code)}")
                self.expect_closed()
                return "connection"
            if received.stream_id != stream_id:
                continue
            if received.kind == FrameType.RST_STREAM:
                if received.error_code not in codes:
                    self.fail(f"RST_STREAM carries {_name(ErrorCode, received.error_code)}")
                break
            if answered or received.kind != FrameType.HEADERS:
                continue
            if received.status is not None and not 400 <= received.status < 500:
                self.fail(f"stream {stream_id} was answered instead of reset")
        if self.get("/ping").body != b"pong":
            self.fail("the connection no longer answers after a stream error")
        return "stream"
