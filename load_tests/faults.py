"""Fault experiments: what an operator tries before production, each printing its figure.

    python load_tests/faults.py                 # every experiment, full length
    python load_tests/faults.py slow-reader     # one (or several) by name
    python load_tests/faults.py --short         # the short versions that CI runs as tests
    python load_tests/faults.py --list

Each experiment starts the real server through `socketify run` on a free loopback port, does
to it what a misbehaving client, a dying process or a lost backend would do, and returns a
`Figure`: the measured value, the bar it is judged against, and whether it held. The exit
status is 0 when every experiment that ran held its bar, 1 otherwise, 2 when one could not run.
`tests/faults/` runs each experiment's short version (`short=True`) as a test.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import os
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.bench_websocket_client import masked_frame
from load_tests.harness import (
    HOST,
    RunningServer,
    child_pids,
    exit_on_sigterm,
    free_port,
    probe_response,
    rss_kib,
    serve,
)


@dataclass(frozen=True)
class Figure:
    """What one experiment measured, and whether it held its bar."""

    name: str
    value: float
    unit: str
    bar: str
    held: bool
    details: list[str] = field(default_factory=list)

    def report(self) -> str:
        """A few lines for a person: the figure, the bar, the verdict, then the details."""
        verdict = "held" if self.held else "MISSED"
        lines = [f"{self.name}: {self.value:,.2f} {self.unit}  (bar: {self.bar})  {verdict}"]
        lines += [f"    {line}" for line in self.details]
        return "\n".join(lines)


class CouldNotRun(RuntimeError):
    """The experiment could not be set up (a tool or service is missing): no verdict."""


Experiment = Callable[[bool], Figure]  # short -> Figure
EXPERIMENTS: dict[str, Experiment] = {}


def experiment(name: str) -> Callable[[Experiment], Experiment]:
    """Register `fn(short) -> Figure` under `name`."""

    def register(fn: Experiment) -> Experiment:
        EXPERIMENTS[name] = fn
        return fn

    return register


def run(name: str, *, short: bool = False) -> Figure:
    """Run one experiment by name (what the tests call)."""
    return EXPERIMENTS[name](short)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the named experiments (all by default) and print each figure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments to run (default: all)")
    parser.add_argument("--short", action="store_true", help="the short versions CI runs")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, fn in EXPERIMENTS.items():
            print(f"{name:16} {(fn.__doc__ or '').strip().splitlines()[0]}")
        return 0
    unknown = [name for name in args.names if name not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s): {', '.join(unknown)}; see --list")
    exit_on_sigterm()
    status = 0
    for name in args.names or list(EXPERIMENTS):
        try:
            figure = run(name, short=args.short)
        except CouldNotRun as exc:
            print(f"{name}: could not run: {exc}")
            status = max(status, 2)
            continue
        print(figure.report(), flush=True)
        if not figure.held:
            status = max(status, 1)
    return status


# -- experiments ------------------------------------------------------------------------------
# Each one is a function `fn(short: bool) -> Figure` under `@experiment("name")`, in its own
# section below.


# -- redis-outage: the Redis state backend stopped, continued, killed, restarted under load --


@dataclass(frozen=True)
class _Answer:
    phase: str
    status: int  # 0: no answer (timeout or connection error)
    elapsed: float


def _session_client(port: int, stop: threading.Event, phase: list[str], out: list[_Answer]) -> None:
    """One keep-alive client asking for /session (its own cookie) and /limited in turn."""
    cookie = ""
    conn = http.client.HTTPConnection(HOST, port, timeout=5)
    while not stop.is_set():
        for path in ("/session", "/limited"):
            current = phase[0]
            started = time.monotonic()
            try:
                conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
                response = conn.getresponse()
                response.read()
                status = response.status
                cookie = (response.getheader("Set-Cookie") or cookie).split(";")[0]
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=5)
            out.append(_Answer(current, status, time.monotonic() - started))
    conn.close()


@experiment("redis-outage")
def redis_outage(short: bool) -> Figure:
    """Redis stopped (SIGSTOP), continued, killed and restarted under steady session load."""
    from load_tests.redis_server import PrivateRedis, RedisMissing

    bar = 2.0
    clients = 8
    # Seconds: healthy, stopped, continued, killed, restarted.
    plan = (1.0, 2.5, 1.5, 2.0, 2.0) if short else (3.0, 6.0, 4.0, 6.0, 4.0)
    try:
        redis = PrivateRedis()
    except RedisMissing as exc:
        raise CouldNotRun(str(exc)) from None
    port = free_port()
    argv = [
        "env", f"SOCKETIFY_STATE_URL={redis.url}",  # serve() passes this process's environment
        sys.executable, "-m", "socketify.cli", "run", "load_tests.apps.state_routes:server",
        "--bind", f"{HOST}:{port}", "--workers", "2",
    ]  # fmt: skip
    answers: list[_Answer] = []
    marks: dict[str, int] = {}  # phase -> log length when it began
    phase = ["healthy"]
    stop = threading.Event()
    with contextlib.closing(redis), serve("socketify", argv, port) as server:
        redis.start()
        threads = [
            threading.Thread(target=_session_client, args=(port, stop, phase, answers))
            for _ in range(clients)
        ]
        for thread in threads:
            thread.start()
        steps = [
            ("healthy", lambda: None),
            ("stopped", redis.pause),
            ("continued", redis.resume),
            ("killed", redis.kill),
            ("restarted", redis.start),
        ]
        try:
            for (name, act), seconds in zip(steps, plan, strict=True):
                marks[name] = len(_log_text(server))
                phase[0] = name  # requests are counted in the phase they began in
                act()
                time.sleep(seconds)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        log = _log_text(server)
    return _outage_figure(answers, log, marks, bar)


def _log_text(server: RunningServer) -> str:
    server.log.seek(0, os.SEEK_END)
    size = server.log.tell()
    server.log.seek(0)
    text = server.log.read(size).decode(errors="replace")
    return text


def _outage_figure(answers: list[_Answer], log: str, marks: dict[str, int], bar: float) -> Figure:
    order = list(marks)
    ends = [*(marks[name] for name in order[1:]), len(log)]
    details: list[str] = []
    held = True
    worst_overall = 0.0
    for name, end in zip(order, ends, strict=True):
        mine = [a for a in answers if a.phase == name]
        worst = max((a.elapsed for a in mine), default=0.0)
        late = sum(1 for a in mine if a.status == 0 or a.elapsed >= bar)
        statuses = Counter(a.status for a in mine)
        lines = [line for line in log[marks[name] : end].splitlines() if line.strip()]
        state_lines = [line for line in lines if "socketify.state" in line]
        details.append(
            f"{name:9} {len(mine):6} requests  worst {1000 * worst:7.1f} ms  unanswered "
            f"within {bar:.0f} s: {late}  statuses {dict(sorted(statuses.items()))}  "
            f"log lines {len(lines)}"
        )
        details += [f"    {line[:160]}" for line in state_lines]
        worst_overall = max(worst_overall, worst)
        held &= late == 0 and "Traceback" not in log[marks[name] : end]
        if name in ("stopped", "killed"):
            held &= len(lines) <= 2  # one line per worker, the outage's
        else:
            held &= statuses.get(200, 0) > 0  # served again (recovery is automatic)
    return Figure(
        "redis-outage",
        worst_overall,
        "s worst response",
        f"every request answered (503 or served) within {bar:.0f} s; <= 2 log lines per outage",
        held,
        details,
    )


# -- slow-reader ------------------------------------------------------------------------------
# Clients that stop reading while their handler sends (issue 16, item 1): before the backlog
# was bounded, one such WebSocket grew a worker from 31 MB to 283 MB in a second.

SLOW_READERS = 10
SLOW_READER_RCVBUF = 4096  # the stalled clients' SO_RCVBUF
SLOW_READER_BAR_KIB = 2048  # worker RSS growth per stalled client
SLOW_READER_SIZE = 64 * 1024
SLOW_READER_WATCH = 1.0  # seconds the clients stay stalled while RSS is sampled
SLOW_READER_SAMPLE = 0.02


@experiment("slow-reader")
def slow_reader(short: bool) -> Figure:
    """Worker RSS growth per client that stops reading: 10 WebSockets, then 10 SSE streams."""
    count = 400 if short else 4000  # messages of 64 KiB each client's handler sends
    port = free_port()
    argv = [*_socketify_cli(), "run", "load_tests.apps.slow_reader:server",
            "--workers", "1", "--bind", f"{HOST}:{port}"]  # fmt: skip
    with serve("socketify", argv, port) as server:
        worker = _the_worker(server.pid)
        # Warm-up: the same paths once with a client that reads, so the baseline includes them.
        _drain_websocket(_flooded_websocket(port, 20, rcvbuf=None))
        _drain_event_stream(_flooded_event_stream(port, 20, rcvbuf=None))
        ws = _stalled_phase(worker, port, lambda: _flooded_websocket(port, count), _drain_websocket)
        events = _stalled_phase(
            worker, port, lambda: _flooded_event_stream(port, count), _drain_event_stream
        )
    per_client = max(ws.growth_kib, events.growth_kib) / SLOW_READERS
    closes_ok = ws.endings == [1008] * SLOW_READERS and events.endings == ["eof"] * SLOW_READERS
    served = max(ws.ping_ms, events.ping_ms) < 1000
    sent_mib = count * SLOW_READER_SIZE / (1 << 20)
    return Figure(
        name="slow-reader",
        value=per_client,
        unit="KiB per stalled client",
        bar=f"≤ {SLOW_READER_BAR_KIB} KiB each, {SLOW_READERS} at once; closed; others served",
        held=per_client <= SLOW_READER_BAR_KIB and closes_ok and served,
        details=[
            f"each handler sent {count} x 64 KiB ({sent_mib:,.0f} MiB) to a client with "
            f"SO_RCVBUF={SLOW_READER_RCVBUF} that did not read for {SLOW_READER_WATCH:.1f} s",
            f"WebSockets: worker RSS {ws.before_kib:,} -> peak {ws.peak_kib:,} KiB "
            f"(+{ws.growth_kib / SLOW_READERS:,.0f} KiB each); the clients, reading at last, "
            f"saw {_tally(ws.endings)}; GET /ping meanwhile {ws.ping_ms:.1f} ms",
            f"SSE streams: worker RSS {events.before_kib:,} -> peak {events.peak_kib:,} KiB "
            f"(+{events.growth_kib / SLOW_READERS:,.0f} KiB each); the clients saw "
            f"{_tally(events.endings)}; GET /ping meanwhile {events.ping_ms:.1f} ms",
        ],
    )


@dataclass(frozen=True)
class _Stalled:
    """One phase of slow-reader: the worker's memory around the stall, and how it ended."""

    before_kib: int
    peak_kib: int
    ping_ms: float
    endings: list[object]  # per client: the close code seen, or "eof", or what went wrong

    @property
    def growth_kib(self) -> int:
        """Peak RSS while stalled minus RSS before."""
        return max(0, self.peak_kib - self.before_kib)


def _stalled_phase(
    worker: int,
    port: int,
    open_one: Callable[[], socket.socket],
    drain: Callable[[socket.socket], object],
) -> _Stalled:
    """Open the stalled clients at once, sample the worker's RSS, then read them to the end."""
    before = rss_kib(worker)
    clients = [open_one() for _ in range(SLOW_READERS)]
    try:
        peak = before
        end = time.monotonic() + SLOW_READER_WATCH
        while time.monotonic() < end:
            peak = max(peak, rss_kib(worker))
            time.sleep(SLOW_READER_SAMPLE)
        ping_ms = _ping_ms(port)
        peak = max(peak, rss_kib(worker))
        endings = [drain(sock) for sock in clients]
    finally:
        for sock in clients:
            sock.close()
    return _Stalled(before, peak, ping_ms, endings)


def _slow_socket(port: int, rcvbuf: int | None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        # Before connect: the window the kernel advertises is fixed at the handshake.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect((HOST, port))
    return sock


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed before the end of the head: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _flooded_websocket(
    port: int, count: int, rcvbuf: int | None = SLOW_READER_RCVBUF
) -> socket.socket:
    """A WebSocket on /flood that has asked for `count` messages (and reads nothing yet)."""
    sock = _slow_socket(port, rcvbuf)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /flood HTTP/1.1\r\nHost: {HOST}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head, _ = _read_head(sock)  # the server sends nothing more until asked
    if not head.startswith(b"HTTP/1.1 101"):
        raise CouldNotRun(f"/flood refused the upgrade: {head[:120]!r}")
    sock.sendall(masked_frame(0x1, f"{count} {SLOW_READER_SIZE}".encode()))
    return sock


def _flooded_event_stream(
    port: int, count: int, rcvbuf: int | None = SLOW_READER_RCVBUF
) -> socket.socket:
    """An SSE stream of `count` events of 64 KiB whose head is read (and nothing else yet)."""
    sock = _slow_socket(port, rcvbuf)
    sock.sendall(
        f"GET /events?count={count}&size={SLOW_READER_SIZE} HTTP/1.1\r\n"
        f"Host: {HOST}:{port}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    head, _ = _read_head(sock)
    if not head.startswith(b"HTTP/1.1 200"):
        raise CouldNotRun(f"/events refused: {head[:120]!r}")
    return sock


def _drain_websocket(sock: socket.socket) -> object:
    """Read frames up to the server's close frame: its code (None on EOF without one)."""
    buf = bytearray()
    try:
        while True:
            while len(buf) < 2 or len(buf) < _frame_end(buf):
                chunk = sock.recv(1 << 20)
                if not chunk:
                    return None
                buf += chunk
            end = _frame_end(buf)
            opcode, payload_at = buf[0] & 0x0F, end - _payload_length(buf)
            if opcode == 0x8:
                code = int.from_bytes(buf[payload_at : payload_at + 2], "big")
                sock.sendall(masked_frame(0x8, code.to_bytes(2, "big")))
                return code
            del buf[:end]
    except OSError as exc:
        return type(exc).__name__


def _payload_length(buf: bytearray) -> int:
    n = buf[1] & 0x7F
    if n == 126:
        return int.from_bytes(buf[2:4], "big")
    if n == 127:
        return int.from_bytes(buf[2:10], "big")
    return n


def _frame_end(buf: bytearray) -> int:
    """Where the frame at the start of `buf` ends (a guess past the end if the head is short)."""
    n = buf[1] & 0x7F
    head = 2 if n < 126 else 4 if n == 126 else 10
    if len(buf) < head:
        return head + 1
    return head + _payload_length(buf)


def _drain_event_stream(sock: socket.socket) -> object:
    """Read to the end of the stream: "eof" once the server closes it."""
    try:
        while sock.recv(1 << 20):
            pass
    except OSError as exc:
        return type(exc).__name__
    return "eof"


def _ping_ms(port: int) -> float:
    started = time.monotonic()
    probe_response(port)
    return 1000 * (time.monotonic() - started)


def _the_worker(master: int) -> int:
    deadline = time.monotonic() + 10
    while len(workers := child_pids(master)) != 1:
        if time.monotonic() > deadline:
            raise CouldNotRun(f"expected one worker under {master}, found {workers}")
        time.sleep(0.05)
    return workers[0]


def _socketify_cli() -> list[str]:
    script = Path(sys.executable).parent / "socketify"
    return [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]


def _tally(endings: list[object]) -> str:
    return ", ".join(f"{n} x {ending}" for ending, n in Counter(map(str, endings)).items())


if __name__ == "__main__":
    sys.exit(main())
