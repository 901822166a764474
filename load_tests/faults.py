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
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

import selectors
import signal
import sys
from pathlib import Path

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests import floods
from load_tests.apps.fault_targets import IMPATIENT_HEADER_TIMEOUT
from load_tests.contenders import OURS
from load_tests.harness import (
    ping_request,
    read_response,
)
from load_tests.hup_under_load import hup_under_wrk
from load_tests.wrk import WrkFailed, WrkRun


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
# Clients that stop reading while their handler sends: without a bound on the send backlog,
# one such WebSocket can grow a worker by hundreds of MB in a second.

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


# -- HTTP workers: kill -9, HUP reload, slowloris -------------------------------------------

FAULT_APP = "load_tests.apps.fault_targets"
REPLACEMENT_BAR_MS = 3000  # from kill -9 until a new worker answers
SLOW_BYTE_EVERY = 0.5  # each slowloris connection sends a byte this often: never idle
HEADER_SLACK = 1.5  # the sweeper ticks every 0.25 s; the rest is a busy 2-core machine
PING_EVERY = 0.01  # the /ping probe's pace during the slowloris attack
PING_P99_BAR_MS = 50.0


def _socketify_run(app: str, port: int, workers: int) -> list[str]:
    """`socketify run APP` on the loopback port, as an operator starts it."""
    script = Path(sys.executable).with_name("socketify")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    return [*cli, "run", app, "--workers", str(workers), "--bind", f"{HOST}:{port}"]


def _open_connections(pid: int, port: int) -> int:
    """Established TCP connections to local `port` held by process `pid` (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rpartition(":")[2], 16)
            count += local_port == port and fields[3] == "01" and fields[9] in inodes
    return count


def _answering_pid(port: int) -> int | None:
    """GET /pid on a fresh connection: the worker that answered, or None."""
    request = f"GET /pid HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode()
    try:
        with socket.create_connection((HOST, port), timeout=2) as sock:
            sock.sendall(request)
            return int(read_response(sock).partition(b"\r\n\r\n")[2])
    except (OSError, ValueError):
        return None


@experiment("kill-worker")
def kill_worker(short: bool) -> Figure:
    """kill -9 one of two workers under wrk: who fails, and how soon a replacement answers."""
    duration, connections = (4, 20) if short else (10, 50)
    try:
        return _kill_worker(duration, connections)
    except WrkFailed as error:
        raise CouldNotRun(str(error)) from error


def _kill_worker(duration: int, connections: int) -> Figure:
    port = free_port()
    run = WrkRun(connections=connections, duration=duration)
    with serve(OURS, _socketify_run(f"{FAULT_APP}:server", port, 2), port) as server:
        wrk = subprocess.Popen(
            run.argv(server.url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        time.sleep(duration / 3)
        workers = child_pids(server.pid)
        victim = workers[0]
        held_by_victim = _open_connections(victim, port)
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        replaced_after = None  # seconds until a new worker answered /pid
        while replaced_after is None and time.monotonic() - killed_at < 10:
            if (pid := _answering_pid(port)) is not None and pid not in workers:
                replaced_after = time.monotonic() - killed_at
        stdout, stderr = wrk.communicate()
        result = run.parse(wrk.returncode, stdout, stderr)
        survivors = child_pids(server.pid)
    errors = result.socket_errors
    replaced_ms = 1000 * replaced_after if replaced_after is not None else float("inf")
    held = (
        result.non_2xx == 0
        and errors.total <= held_by_victim
        and replaced_ms <= REPLACEMENT_BAR_MS
        and len(survivors) == 2
    )
    return Figure(
        "kill-worker",
        replaced_ms,
        "ms until a replacement worker answered",
        f"<= {REPLACEMENT_BAR_MS:,} ms; socket errors <= the killed worker's open connections; "
        "0 non-2xx",
        held,
        [
            f"killed worker {victim} of {workers} holding {held_by_victim} of {connections} "
            f"wrk connections; workers after: {survivors}",
            f"wrk: {result.requests:,} requests, {result.requests_per_sec:,.0f} req/s; "
            f"socket errors {errors.total} (connect {errors.connect}, read {errors.read}, "
            f"write {errors.write}, timeout {errors.timeout}); non-2xx {result.non_2xx}",
        ],
    )


@experiment("hup-reload")
def hup_reload(short: bool) -> Figure:
    """Two SIGHUPs under wrk: no failed request, and every worker replaced."""
    duration, hup_at = (6, [1.5, 3.5]) if short else (10, [3.0, 6.0])
    try:
        hup = hup_under_wrk(
            workers=2, connections=20 if short else 50, duration=duration, hup_at=hup_at, say=_quiet
        )
    except WrkFailed as error:
        raise CouldNotRun(str(error)) from error
    result, errors = hup.result, hup.result.socket_errors
    return Figure(
        "hup-reload",
        errors.total + result.non_2xx,
        "failed requests (socket errors + non-2xx)",
        "0, and every worker replaced",
        hup.held,
        [
            f"SIGHUP at {', '.join(f'{at:g}' for at in hup_at)} s of {duration} s of wrk; "
            f"workers {hup.first_workers} -> {hup.last_workers} "
            f"({'all new' if hup.reloaded else 'NOT all new'})",
            f"wrk: {result.requests:,} requests, {result.requests_per_sec:,.0f} req/s, "
            f"p99 {result.p99_ms:.2f} ms; socket errors {errors.total}; non-2xx {result.non_2xx}",
        ],
    )


def _quiet(line: str) -> None:
    """Progress lines of a helper, not wanted in a figure's report."""


@experiment("slowloris")
def slowloris(short: bool) -> Figure:
    """Connections trickling a head get 408 at the header deadline while /ping stays fast."""
    count = 500
    waves = 1 if short else 3
    port = free_port()
    deadline = IMPATIENT_HEADER_TIMEOUT
    app = f"{FAULT_APP}:impatient"
    with serve(OURS, _socketify_run(app, port, 1), port, nofile=4 * count + 256) as server:
        latencies: list[float] = []
        stop = threading.Event()
        probe = threading.Thread(target=_probe_ping, args=(port, latencies, stop), daemon=True)
        probe.start()
        cut_after: list[float] = []
        for _ in range(waves):
            cut_after += _slowloris_wave(port, count, deadline)
        stop.set()
        probe.join()
        log = server.log_tail(10_000)
    answered = [elapsed for elapsed in cut_after if elapsed is not None]
    on_time = [e for e in answered if deadline - 0.1 <= e <= deadline + HEADER_SLACK]
    p99 = _percentile(latencies, 99) * 1000 if latencies else float("inf")
    held = len(on_time) == count * waves and p99 < PING_P99_BAR_MS and "Traceback" not in log
    return Figure(
        "slowloris",
        p99,
        "ms p99 of /ping during the attack",
        f"< {PING_P99_BAR_MS:g} ms, and every slow connection cut with 408 within "
        f"{deadline:g}-{deadline + HEADER_SLACK:g} s of its first byte",
        held,
        [
            f"{waves} wave(s) of {count} connections, one byte each every {SLOW_BYTE_EVERY} s, "
            f"header_timeout {deadline:g} s (1 worker)",
            f"408 on time: {len(on_time)}/{count * waves}; answered: {len(answered)}; cut after "
            f"{min(answered, default=0):.2f}-{max(answered, default=0):.2f} s",
            f"/ping: {len(latencies)} probes, p50 {_percentile(latencies, 50) * 1000:.2f} ms, "
            f"p99 {p99:.2f} ms, max {max(latencies, default=0) * 1000:.2f} ms",
        ],
    )


def _slowloris_wave(port: int, count: int, deadline: float) -> list[float]:
    """Open `count` connections that trickle a never-ending head; seconds until each got a 408.

    A connection that got anything but a 408, or nothing within twice the deadline, counts
    as missing from the result.
    """
    selector = selectors.DefaultSelector()
    started: dict[socket.socket, float] = {}
    for _ in range(count):
        sock = socket.create_connection((HOST, port), timeout=5)
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        started[sock] = time.monotonic()
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, bytearray())
    cut_after: list[float] = []
    give_up = time.monotonic() + 2 * deadline + 5
    next_byte = time.monotonic() + SLOW_BYTE_EVERY
    while selector.get_map() and time.monotonic() < give_up:
        for key, _ in selector.select(timeout=max(0.0, next_byte - time.monotonic())):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            key.data.extend(data)
            if not data or b"\r\n\r\n" in key.data:
                if key.data.startswith(b"HTTP/1.1 408 "):
                    cut_after.append(time.monotonic() - started[sock])
                selector.unregister(sock)
                sock.close()
        if time.monotonic() >= next_byte:
            next_byte += SLOW_BYTE_EVERY
            for key in list(selector.get_map().values()):
                with contextlib.suppress(OSError):
                    key.fileobj.send(b"s")  # type: ignore[union-attr]  # sockets, above
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]  # sockets, registered above
    return cut_after


def _probe_ping(port: int, latencies: list[float], stop: threading.Event) -> None:
    """GET /ping on one keep-alive connection every PING_EVERY s until `stop`; record times."""
    request = ping_request(port)
    with socket.create_connection((HOST, port), timeout=10) as sock:
        while not stop.wait(PING_EVERY):
            sent = time.perf_counter()
            sock.sendall(request)
            read_response(sock)
            latencies.append(time.perf_counter() - sent)


def _percentile(values: list[float], percent: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))]


# -- hot session ------------------------------------------------------------------------------
# 32 clients sharing one session cookie, every request changing a session of ~300 bytes,
# against 32 clients with no cookie (a new session per request), in the same run; clients
# that write their own key of that session while it is hot must lose no write; and the
# anonymous flood must leave the store's memory bounded.

HOT_APP = "load_tests.apps.state_routes:server"
HOT_CONNECTIONS = 32
HOT_BAR = 0.5  # the shared session's rate over the new-session rate
HOT_SHORT_BAR = 0.25  # loose: CI machines are noisy
HOT_WRITERS = 8  # clients that count their own requests in the hot session
HOT_SHORT_TABLE_MB = 6  # the short version's table: small enough to fill in a second
HOT_MASTER_MB = (2, 8)  # the master's store when it holds every session (short, full)
RSS_SETTLED_KIB = 4096  # full length: past this, RSS still grew in the flood's second half
# Growth allowed over the whole flood besides the store itself: the per-process caches of
# places, verified cookies and cookie lines fill up to their caps meanwhile.
RSS_SLACK_KIB = 12 << 10


@dataclass(frozen=True)
class HotRun:
    """What one hot-session run measured."""

    new_rate: float
    shared_rate: float
    counted: int  # the shared counter at the end of the shared phase
    shared_requests: int
    writes: dict[str, int]  # per writing client: requests answered
    kept: dict[str, int]  # per writing client: its key in the session at the end
    sessions: int  # sessions stored after the anonymous flood
    rss_kib: dict[str, list[int]]  # per process: before, mid-flood, after
    master_only: tuple[int, list[int]] = (0, [])  # with no table: sessions, master's RSS


def hot_requests(port: int, path: str, cookie: str = "") -> tuple[bytes, str]:
    """One GET on a new connection: (body, the session cookie after it)."""
    import http.client

    from load_tests.harness import HOST

    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        response = conn.getresponse()
        body = response.read()
        set_cookie = response.getheader("Set-Cookie") or ""
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
    return body, set_cookie.split(";")[0] or cookie


def hot_wrk(port: int, seconds: int, cookie: str) -> subprocess.Popen[str]:
    """wrk on /hot in the background (with the session cookie, or none)."""
    from load_tests.harness import HOST
    from load_tests.wrk import WrkRun

    argv = WrkRun(HOT_CONNECTIONS, seconds).argv(f"http://{HOST}:{port}/hot")
    if cookie:
        argv += ["-H", f"Cookie: {cookie}"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def hot_finish(wrk: subprocess.Popen[str]) -> tuple[float, int]:
    """(req/s, requests) of a background wrk, which must have had no errors."""
    from load_tests.wrk import WrkRun

    stdout, stderr = wrk.communicate(timeout=120)
    result = WrkRun(HOT_CONNECTIONS, 1).parse(wrk.returncode, stdout, stderr)
    if result.non_2xx or result.socket_errors.total:
        raise RuntimeError(f"/hot: {result.non_2xx} non-2xx, {result.socket_errors}")
    return result.requests_per_sec, result.requests


def hot_writer(port: int, cookie: str, name: str, until: float, answered: dict[str, int]) -> None:
    """Count this client's requests in its own key of the session, on one connection
    (`answered[name]`: how many were answered, set once all were)."""
    import http.client

    from load_tests.harness import HOST

    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    count = 0
    try:
        while time.monotonic() < until:
            conn.request("GET", f"/hot?c={name}", headers={"Cookie": cookie})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"/hot?c={name}: {response.status} {body[:200]!r}")
            count += 1  # one request at a time: a lost write leaves the key behind this
        answered[name] = count
    finally:
        conn.close()


def hot_rss(master: int) -> dict[str, int]:
    """RSS in KiB of the master and each worker."""
    from load_tests.harness import child_pids, rss_kib

    out = {"master": rss_kib(master)}
    for n, pid in enumerate(child_pids(master)):
        out[f"worker{n + 1}"] = rss_kib(pid)
    return out


def hot_flood(port: int, master: int, seconds: int) -> tuple[float, int, dict[str, list[int]]]:
    """Anonymous requests for `seconds`, in two halves: (req/s, sessions stored, RSS in KiB
    per process before, mid-flood and after)."""
    import orjson

    hot_finish(hot_wrk(port, 1, ""))  # warm-up: both workers have served /hot
    before = hot_rss(master)
    half = max(1, seconds // 2)
    first_rate, _ = hot_finish(hot_wrk(port, half, ""))
    mid = hot_rss(master)
    second_rate, _ = hot_finish(hot_wrk(port, seconds - half, ""))
    after = hot_rss(master)
    sessions = orjson.loads(hot_requests(port, "/hot/count")[0])["sessions"]
    rate = (first_rate * half + second_rate * (seconds - half)) / seconds
    rss = {name: [before[name], mid.get(name, 0), after.get(name, 0)] for name in before}
    return rate, sessions, rss


def hot_run(port: int, master: int, seconds: int) -> HotRun:
    """The three phases against a server already listening on `port`."""
    import threading

    import orjson

    new_rate, sessions, rss = hot_flood(port, master, seconds)

    _, cookie = hot_requests(port, "/hot")
    shared_rate, shared_requests = hot_finish(hot_wrk(port, seconds, cookie))
    counted = orjson.loads(hot_requests(port, "/hot/peek", cookie)[0])["n"]

    # Writers of their own keys while wrk keeps the session hot.
    answered: dict[str, int] = {}
    wrk = hot_wrk(port, seconds, cookie)
    until = time.monotonic() + seconds - 0.5
    writers = [
        threading.Thread(target=hot_writer, args=(port, cookie, f"w{n}", until, answered))
        for n in range(HOT_WRITERS)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    hot_finish(wrk)
    if len(answered) < len(writers):
        raise RuntimeError("a client writing its own key failed (its error is printed above)")
    final = orjson.loads(hot_requests(port, "/hot/peek", cookie)[0])
    kept = {name: final.get(f"c:{name}", 0) for name in answered}
    return HotRun(new_rate, shared_rate, counted, shared_requests, answered, kept, sessions, rss)


@experiment("hot-session")
def hot_session(short: bool) -> Figure:
    """32 clients on one ~300-byte session vs 32 without: rate ratio, lost writes, memory."""
    from load_tests.harness import free_port, serve

    if shutil.which("wrk") is None:
        raise CouldNotRun("wrk is not on PATH (Debian/Ubuntu: apt-get install wrk)")
    seconds = 2 if short else 8
    port = free_port()
    # What the table has no room for (the sessions it demotes, written longest ago) goes to
    # the master's store (live sessions are never evicted early), so its size is set here too:
    # that is the master's bound.
    env = [f"SOCKETIFY_STATE_MASTER_MB={HOT_MASTER_MB[not short]}"]
    if short:
        env.append(f"SOCKETIFY_STATE_TABLE_MB={HOT_SHORT_TABLE_MB}")
    argv = ["env", *env, sys.executable, "-m", "socketify.cli", "run", HOT_APP,
            "--workers", "2", "--bind", f"127.0.0.1:{port}"]  # fmt: skip
    with serve("socketify", argv, port) as server:
        run_ = hot_run(port, server.pid, seconds)
    # The same flood with no table: the master's own store holds every session.
    port = free_port()
    env = ["SOCKETIFY_STATE_TABLE=0", f"SOCKETIFY_STATE_MASTER_MB={HOT_MASTER_MB[not short]}"]
    argv = ["env", *env, *argv[argv.index(sys.executable) : -1], f"127.0.0.1:{port}"]
    with serve("socketify", argv, port) as server:
        _, sessions, rss = hot_flood(port, server.pid, seconds)
    run_ = replace(run_, master_only=(sessions, rss["master"]))
    return hot_figure(run_, short)


def hot_figure(run_: HotRun, short: bool) -> Figure:
    """Judge a run: the rate ratio, no lost write of a client's own key, memory settled."""
    ratio = run_.shared_rate / run_.new_rate
    lost = sum(run_.writes[name] - run_.kept[name] for name in run_.writes)
    sessions, (before, mid, after) = run_.master_only
    rss = {**run_.rss_kib, "master, no table": [before, mid, after]}
    table_kib = (HOT_SHORT_TABLE_MB if short else 102) << 10  # pages every worker may touch
    master_kib = 2 * HOT_MASTER_MB[not short] << 10  # its store, and what Python keeps beside
    store_kib = {"master": master_kib, "master, no table": master_kib}
    growing = [
        name
        for name, (before, mid, after) in rss.items()
        if after - before > store_kib.get(name, table_kib) + RSS_SLACK_KIB
        or (not short and after - mid > RSS_SETTLED_KIB)
    ]
    bar = HOT_SHORT_BAR if short else HOT_BAR
    held = ratio >= bar and lost == 0 and not growing and sum(run_.writes.values()) > 0
    details = [
        f"new session per request: {run_.new_rate:,.0f} req/s; "
        f"one shared session: {run_.shared_rate:,.0f} req/s",
        f"shared counter: {run_.counted:,} of {run_.shared_requests:,} increments kept "
        "(one key, last writer wins: count with the store's incr)",
        f"own keys written beside the hot traffic: {sum(run_.writes.values()):,} writes by "
        f"{len(run_.writes)} clients, {lost} lost",
        f"sessions stored after the anonymous flood: {run_.sessions:,} "
        f"({sessions:,} with no table, in the master's {HOT_MASTER_MB[not short]} MiB)",
    ]
    details += [
        f"RSS {name}: {before / 1024:.1f} -> {mid / 1024:.1f} -> {after / 1024:.1f} MiB "
        "(before, mid-flood, after)"
        for name, (before, mid, after) in rss.items()
    ]
    if growing:
        details.append(f"RSS past its bound or still growing: {', '.join(growing)}")
    return Figure("hot-session", ratio, "x", f">= {bar}x, no lost write, RSS bounded",
                  held, details)  # fmt: skip


# -- floods: one connection pours in work; the worker's other clients must still be served ---
# A fresh client's GET every 0.1 s during an 8 s flood on the same (single) worker; the
# worker runs with a short heartbeat timeout, so one starved of its heartbeat is replaced
# within the flood and the probe sees another pid.

FLOOD_APP = "load_tests.apps.flood_targets:site"
FLOOD_BAR = 0.5  # seconds: the slowest answer a fresh client may get during a flood
FLOOD_HEARTBEAT = 3  # --timeout: a worker silent this long is replaced by the master


def _flood_experiment(name: str) -> Experiment:
    def run_flood(short: bool) -> Figure:
        seconds = 3.0 if short else 8.0
        port, tcp_port = free_port(), free_port()
        argv = ["env", f"FLOOD_TCP_PORT={tcp_port}", *_socketify_cli(), "run", FLOOD_APP,
                "--workers", "1", "--timeout", str(FLOOD_HEARTBEAT),
                "--bind", f"{HOST}:{port}"]  # fmt: skip
        with serve(OURS, argv, port) as server:
            run_ = floods.flood(name, port, seconds, tcp_port)
            log = _log_text(server)
        held = run_.worst <= FLOOD_BAR and not run_.unanswered and not run_.replaced
        held = held and "Traceback" not in log
        return Figure(
            f"flood-{name}",
            1000 * run_.worst,
            "ms worst answer to a fresh client",
            f"<= {1000 * FLOOD_BAR:.0f} ms, every probe answered, the worker not replaced",
            held,
            [
                f"{floods.FLOODS[name].describe}, one connection, {seconds:g} s, 1 worker "
                f"(heartbeat timeout {FLOOD_HEARTBEAT} s)",
                f"probes: {len(run_.latencies)} answered, {run_.unanswered} not; p50 "
                f"{1000 * run_.p50:.1f} ms, p99 {1000 * run_.p99:.1f} ms, worst "
                f"{1000 * run_.worst:.1f} ms; answered by {len(run_.workers)} worker(s)",
                f"flood: {run_.sent / seconds / 1e6:.2f} MB/s sent, {run_.received / 1e6:.1f} "
                f"MB back; the server closed it {run_.cut} time(s)",
            ],
        )

    run_flood.__doc__ = f"{floods.FLOODS[name].describe}: what the worker's other clients get"
    return run_flood


for _name in floods.FLOODS:
    experiment(f"flood-{_name}")(_flood_experiment(_name))


# -- h2-stalled-streams: clients that open many streams and read none of the answers -------

STALLED_CONNECTIONS = 3
STALLED_STREAMS = 100  # each asks for 1 MiB (`/large`), made afresh per request
STALLED_BAR_MIB = 32  # worker RSS growth for all of them (without a bound: ~335 MiB)


@experiment("h2-stalled-streams")
def h2_stalled_streams(short: bool) -> Figure:
    """3 h2c connections x 100 streams x 1 MiB answers, no window granted: worker RSS growth."""
    import hpack

    seconds = 2.0 if short else 10.0
    port, tcp_port = free_port(), free_port()
    argv = ["env", f"FLOOD_TCP_PORT={tcp_port}", *_socketify_cli(), "run", FLOOD_APP,
            "--workers", "1", "--bind", f"{HOST}:{port}"]  # fmt: skip
    with serve(OURS, argv, port) as server:
        worker = _the_worker(server.pid)
        before = rss_kib(worker)
        clients = []
        for _ in range(STALLED_CONNECTIONS):
            sock = socket.create_connection((HOST, port), timeout=10)
            encoder = hpack.Encoder()
            get = [(":method", "GET"), (":scheme", "http"), (":path", "/large"),
                   (":authority", HOST)]  # fmt: skip
            frames = [
                floods.H2_PREFACE,
                floods.h2_frame(0x4, 0, 0, (4).to_bytes(2, "big") + bytes(4)),
            ]
            frames += [
                floods.h2_frame(0x1, 0x5, 2 * n + 1, encoder.encode(get))
                for n in range(STALLED_STREAMS)
            ]
            sock.sendall(b"".join(frames))  # SETTINGS_INITIAL_WINDOW_SIZE 0: nothing may be sent
            clients.append(sock)
        peak = before
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            peak = max(peak, rss_kib(worker))
            time.sleep(0.05)
        ping_ms = _ping_ms(port)
        for sock in clients:
            sock.close()
    growth_mib = (peak - before) / 1024
    return Figure(
        "h2-stalled-streams",
        growth_mib,
        "MiB worker RSS growth",
        f"<= {STALLED_BAR_MIB} MiB for {STALLED_CONNECTIONS} x {STALLED_STREAMS} stalled streams",
        growth_mib <= STALLED_BAR_MIB and ping_ms < 1000,
        [
            f"{STALLED_CONNECTIONS} h2c connections, {STALLED_STREAMS} streams each asking for "
            f"1 MiB, SETTINGS_INITIAL_WINDOW_SIZE 0, watched {seconds:g} s",
            f"worker RSS {before / 1024:.1f} -> peak {peak / 1024:.1f} MiB; GET /ping meanwhile "
            f"{ping_ms:.1f} ms",
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
