"""SIGTERM with long-lived clients open: how soon the master exits, and what each client saw.

    python load_tests/graceful_stop.py              # 5 rounds
    python load_tests/graceful_stop.py --rounds 9

Each round starts `socketify run tests.server.drain_app:server --workers 2` (server pinned to
CPU 1), opens 3 WebSocket clients (two on a Pulse route, one on `server.ws`), 2 event
streams and one request whose handler takes 1.5 s, then sends SIGTERM to the master. It
reports the time from the signal to the master's exit, each WebSocket's close code and when
it came, when each event stream ended (and whether its last event arrived), and whether the
request in flight was answered. The bar: the master exits within 5 s, every WebSocket gets
1001, every event stream ends within 5 s, and the request is answered; the app keeps the
30-second `graceful_timeout`, which a stop that waited it out would take. Exit status 0
when every round held the bar, 1 otherwise, 2 when the server did not start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from load_tests.harness import HOST, ServerFailedToStart, exit_on_sigterm, free_port, pinned, serve

APP = "tests.server.drain_app:server"
BAR_SECONDS = 5.0
GIVE_UP = 40.0  # past the app's 30-second graceful_timeout: a stop that waited it out


@dataclass
class Round:
    """What one SIGTERM did, in seconds from the signal."""

    master_exit: float | None = None
    close_codes: list[int | None] = field(default_factory=list)
    socket_ends: list[float] = field(default_factory=list)
    stream_ends: list[float] = field(default_factory=list)
    last_events: list[bool] = field(default_factory=list)  # each stream's `bye` arrived
    answered: bool = False

    @property
    def held(self) -> bool:
        """The bar (see the module doc)."""
        return (
            self.master_exit is not None
            and self.master_exit <= BAR_SECONDS
            and self.close_codes == [1001] * 3
            and len(self.stream_ends) == 2
            and max(self.stream_ends) <= BAR_SECONDS
            and self.answered
        )

    def line(self) -> str:
        """One line of the report."""
        master = "never" if self.master_exit is None else f"{self.master_exit:.2f}"
        return (
            f"master exit {master} s; close codes {self.close_codes} at "
            f"{_seconds(self.socket_ends)}; streams ended at {_seconds(self.stream_ends)} "
            f"(last event {self.last_events}); in-flight answered {self.answered}"
        )


def _seconds(values: list[float]) -> str:
    return "[" + ", ".join(f"{value:.2f}" for value in values) + "] s"


def one_round(cpu: int | None) -> Round:
    """Start the server, open the clients, SIGTERM the master, and time the ending."""
    script = Path(sys.executable).with_name("socketify")
    port = free_port()
    argv = [str(script), "run", APP, "--workers", "2", "--bind", f"{HOST}:{port}"]
    result = Round()
    with (
        serve("socketify", pinned(argv, cpu), port, ready_path="/pid") as server,
        contextlib.ExitStack() as opened,
    ):
        _wait_both_workers(port)
        sockets = [
            opened.enter_context(connect(f"ws://{HOST}:{port}{path}"))
            for path in ("/pulse", "/ws", "/pulse")
        ]
        for ws in sockets:
            ws.recv(timeout=10)
        streams = [_open_stream(port) for _ in range(2)]
        slow = _request(port, "/slow")
        time.sleep(0.3)  # the request is in its handler
        started = time.monotonic()
        threads = [
            *(_thread(_read_socket, ws, started, result) for ws in sockets),
            *(_thread(_read_stream, sock, started, result) for sock in streams),
            _thread(_read_answer, slow, started, result),
        ]
        os.kill(server.pid, signal.SIGTERM)
        try:
            server.process.wait(GIVE_UP)
            result.master_exit = time.monotonic() - started
        except subprocess.TimeoutExpired:
            pass  # reported as "never"; the harness kills it
        for thread in threads:
            thread.join(GIVE_UP)
    return result


def _wait_both_workers(port: int) -> None:
    """Until two different workers have answered, so the clients can land on both."""
    seen: set[bytes] = set()
    deadline = time.monotonic() + 20
    while len(seen) < 2 and time.monotonic() < deadline:
        with socket.create_connection((HOST, port), timeout=5) as sock:
            sock.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            seen.add(_read_all(sock).rpartition(b"\r\n\r\n")[2])


def _open_stream(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=GIVE_UP)
    sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
    data = b""
    while b"event: hello" not in data:
        data += sock.recv(65536)
    return sock


def _request(port: int, target: str) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=GIVE_UP)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return sock


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _thread(
    target: Callable[[Any, float, Round], None], client: Any, started: float, result: Round
) -> threading.Thread:
    thread = threading.Thread(target=target, args=(client, started, result), daemon=True)
    thread.start()
    return thread


def _read_socket(ws: ClientConnection, started: float, result: Round) -> None:
    code = None
    try:
        while True:
            ws.recv(timeout=GIVE_UP)
    except ConnectionClosed as exc:
        code = exc.rcvd.code if exc.rcvd is not None else None
    except TimeoutError:
        pass
    result.socket_ends.append(time.monotonic() - started)
    result.close_codes.append(code)


def _read_stream(sock: socket.socket, started: float, result: Round) -> None:
    try:
        data = _read_all(sock)
    except OSError:
        data = b""
    result.stream_ends.append(time.monotonic() - started)
    result.last_events.append(b"event: bye" in data)
    sock.close()


def _read_answer(sock: socket.socket, started: float, result: Round) -> None:
    try:
        result.answered = _read_all(sock).endswith(b"finished")
    except OSError:
        result.answered = False
    sock.close()


def main() -> int:
    """Run the rounds and print each, then the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=1, help="pin the server here (-1: don't)")
    args = parser.parse_args()
    exit_on_sigterm()
    rounds = []
    for number in range(1, args.rounds + 1):
        try:
            result = one_round(None if args.cpu < 0 else args.cpu)
        except ServerFailedToStart as exc:
            print(exc, file=sys.stderr)
            return 2
        rounds.append(result)
        print(f"round {number}: {result.line()}", flush=True)
    exits = [r.master_exit for r in rounds if r.master_exit is not None]
    socket_ends = [max(r.socket_ends) for r in rounds if r.socket_ends]
    stream_ends = [max(r.stream_ends) for r in rounds if r.stream_ends]
    print(
        f"median over {len(rounds)} rounds: master exit "
        f"{statistics.median(exits) if exits else float('nan'):.2f} s, last WebSocket close "
        f"{statistics.median(socket_ends) if socket_ends else float('nan'):.2f} s, last "
        f"stream end {statistics.median(stream_ends) if stream_ends else float('nan'):.2f} s "
        f"(bar: {BAR_SECONDS:.0f} s; graceful_timeout 30 s)"
    )
    held = all(r.held for r in rounds)
    print("bar held" if held else "bar NOT held")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
