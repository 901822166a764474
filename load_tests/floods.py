"""Floods: one connection pouring work into a worker, and a probe timing what others get.

    with serve(...) as server:
        run = flood("h2-priority", port, seconds=8, tcp_port=tcp_port)
        print(run.worst, run.p99, run.replaced)

Each flood is one client connection that sends the same bytes as fast as the server takes
them, reading (and dropping) whatever comes back; when the server cuts it (an HTTP/2 flood
gets GOAWAY ENHANCE_YOUR_CALM) it connects again at once and goes on, as an attacker would.
Meanwhile a probe opens a fresh connection every `PROBE_EVERY` seconds and asks `/pid`: how
long that takes is what the worker's other clients see, and the pid tells whether the worker
that answers is still the one the flood began with (a worker starved of its heartbeat is
replaced by the master). The server must run one worker of `apps/flood_targets.py`.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from dataclasses import dataclass

import hpack

from load_tests.bench_websocket_client import masked_frame
from load_tests.harness import HOST

__all__ = ["FLOODS", "H2_PREFACE", "PROBE_EVERY", "PROBE_TIMEOUT", "FloodRun", "flood", "h2_frame"]

PROBE_EVERY = 0.1  # seconds between two probes' starts
PROBE_TIMEOUT = 5.0  # a probe unanswered this long counts as unanswered
_SEND_TIMEOUT = 5.0
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame: type, flags, stream and payload as given."""
    head = len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big")
    return head + payload


_H2_OPEN = H2_PREFACE + h2_frame(0x4, 0, 0)  # the preface and an empty SETTINGS frame
_POST_PING = hpack.Encoder().encode(
    [(":method", "POST"), (":scheme", "http"), (":path", "/ping"), (":authority", HOST)]
)


@dataclass(frozen=True)
class Flood:
    """How to open a flooding connection, and the bytes it then sends again and again."""

    describe: str
    port: str  # "http" or "tcp": which of the server's ports it floods
    opening: bytes
    blob: bytes


FLOODS: dict[str, Flood] = {
    "h1-pipeline": Flood(
        "HTTP/1.1 GET /ping pipelined, answers read",
        "http",
        b"",
        b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n" * 2048,
    ),
    "h2-priority": Flood(
        "h2c PRIORITY frames",
        "http",
        _H2_OPEN,
        b"".join(h2_frame(0x2, 0, 2 * n + 1, bytes(4) + b"\x10") for n in range(4096)),
    ),
    "h2-window-update": Flood(
        "h2c WINDOW_UPDATE frames (+1 on the connection)",
        "http",
        _H2_OPEN,
        h2_frame(0x8, 0, 0, (1).to_bytes(4, "big")) * 4096,
    ),
    "h2-unknown": Flood(
        "h2c frames of an undefined type",
        "http",
        _H2_OPEN,
        h2_frame(0xFA, 0, 0, b"flooding") * 4096,
    ),
    "h2-empty-data": Flood(
        "h2c empty DATA frames on an open POST stream",
        "http",
        _H2_OPEN + h2_frame(0x1, 0x4, 1, _POST_PING),
        h2_frame(0x0, 0, 1) * 4096,
    ),
    "tcp": Flood("TCP line-echo service, lines echoed and read", "tcp", b"", b"x" * 63 + b"\n"),
    "websocket": Flood(
        "WebSocket text messages echoed and read",
        "http",
        (
            b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ),
        masked_frame(0x1, b"hello") * 4096,
    ),
}
# A TCP blob is many lines, not one: the same size per send as the others.
FLOODS["tcp"] = Flood(FLOODS["tcp"].describe, "tcp", b"", FLOODS["tcp"].blob * 1024)


@dataclass(frozen=True)
class FloodRun:
    """What one flood did, and what the probe saw meanwhile."""

    name: str
    seconds: float
    latencies: list[float]  # seconds per answered probe
    unanswered: int
    sent: int  # bytes the flood got into the server
    received: int  # bytes it got back
    cut: int  # times the server closed the flooding connection
    workers: set[str]  # pids that answered the probes (one: never replaced)

    @property
    def worst(self) -> float:
        """The slowest probe, in seconds (PROBE_TIMEOUT for an unanswered one)."""
        return PROBE_TIMEOUT if self.unanswered else max(self.latencies, default=0.0)

    @property
    def p50(self) -> float:
        """The median probe, in seconds."""
        return self.percentile(50)

    @property
    def p99(self) -> float:
        """The 99th percentile of the probes, in seconds."""
        return self.percentile(99)

    def percentile(self, percent: float) -> float:
        """The `percent` percentile of the answered probes, in seconds."""
        ordered = sorted(self.latencies) or [0.0]
        return ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))]

    @property
    def replaced(self) -> bool:
        """Whether a probe was answered by another worker than the first one."""
        return len(self.workers) > 1


def flood(name: str, port: int, seconds: float, tcp_port: int | None = None) -> FloodRun:
    """Run flood `name` against the server on `port` for `seconds`, probing it meanwhile."""
    spec = FLOODS[name]
    target = port if spec.port == "http" else tcp_port
    if target is None:
        raise ValueError(f"flood {name!r} needs the TCP service's port")
    stop = threading.Event()
    tally = _Tally()
    flooder = threading.Thread(target=_flood, args=(spec, target, stop, tally), daemon=True)
    flooder.start()
    time.sleep(0.2)  # the flood is under way before the first probe
    latencies: list[float] = []
    workers: set[str] = set()
    unanswered = 0
    end = time.monotonic() + seconds
    next_probe = time.monotonic()
    while time.monotonic() < end:
        answer = _probe(port)
        if answer is None:
            unanswered += 1
        else:
            latencies.append(answer[0])
            workers.add(answer[1])
        next_probe += PROBE_EVERY
        time.sleep(max(0.0, next_probe - time.monotonic()))
    stop.set()
    flooder.join(_SEND_TIMEOUT + 1)
    return FloodRun(
        name, seconds, latencies, unanswered, tally.sent, tally.received, tally.cut, workers
    )


class _Tally:
    def __init__(self) -> None:
        self.sent = 0
        self.received = 0
        self.cut = 0


def _flood(spec: Flood, port: int, stop: threading.Event, tally: _Tally) -> None:
    """Flood until `stop`, reconnecting whenever the server closes the connection."""
    while not stop.is_set():
        try:
            _one_connection(spec, port, stop, tally)
        except OSError:
            pass
        if not stop.is_set():
            tally.cut += 1


def _one_connection(spec: Flood, port: int, stop: threading.Event, tally: _Tally) -> None:
    with contextlib.closing(socket.create_connection((HOST, port), timeout=_SEND_TIMEOUT)) as sock:
        sock.sendall(spec.opening)
        sock.setblocking(False)
        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        view = memoryview(spec.blob)
        with contextlib.closing(selector):
            while not stop.is_set():
                for _, events in selector.select(0.1):
                    if events & selectors.EVENT_READ:
                        try:
                            data = sock.recv(1 << 20)
                        except BlockingIOError:
                            data = None
                        if data == b"":
                            return  # the server closed the connection
                        tally.received += len(data or b"")
                    if events & selectors.EVENT_WRITE:
                        try:
                            sent = sock.send(view)
                        except BlockingIOError:
                            sent = 0
                        tally.sent += sent
                        view = view[sent:] or memoryview(spec.blob)


def _probe(port: int) -> tuple[float, str] | None:
    """GET /pid on a fresh connection: (seconds, pid), or None if unanswered in time."""
    started = time.monotonic()
    request = f"GET /pid HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode()
    try:
        with socket.create_connection((HOST, port), timeout=PROBE_TIMEOUT) as sock:
            sock.settimeout(max(0.1, started + PROBE_TIMEOUT - time.monotonic()))
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
    except OSError:
        return None
    if not data.startswith(b"HTTP/1.1 200"):
        return None
    return time.monotonic() - started, data.partition(b"\r\n\r\n")[2].decode()
