"""Worker RSS before and after many idle connections: the shared part of the idle benchmarks.

`idle_connections.py` (keep-alive HTTP) and `idle_websockets.py` (upgraded WebSockets) differ
only in how one connection is opened and exercised; both raise RLIMIT_NOFILE, start the server
with a raised limit, read the worker's VmRSS, open the connections one after another, read it
again and count the connections the server still holds.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from load_tests.harness import child_pids, rss_kib, serve

FD_HEADROOM = 1024  # listening sockets, logs, imports: everything but the connections
MAX_FAILURES = 100

# Opens one connection on `port`, exercises it once, registers its close on the stack.
OpenOne = Callable[[int, contextlib.ExitStack], socket.socket]


@dataclass(frozen=True)
class IdleRss:
    """What one measurement saw."""

    opened: int
    opened_in: float  # seconds to open them all
    still_open: int  # held by the server when the second reading was taken
    before_kib: int
    after_kib: int

    @property
    def growth_kib(self) -> int:
        return self.after_kib - self.before_kib


def measure_idle_rss(
    name: str,
    argv: Sequence[str],
    port: int,
    *,
    count: int,
    nofile: int,
    settle: float,
    open_one: OpenOne,
    noun: str,
) -> IdleRss:
    """Start `argv` (ServerFailedToStart if it does not come up), open `count` idle `noun`s."""
    with serve(name, list(argv), port, nofile=nofile) as server:
        workers = child_pids(server.pid) or [server.pid]
        print(f"{name}: master {server.pid}, worker(s) {workers}, NOFILE {nofile}")
        time.sleep(settle)
        before = sum(map(rss_kib, workers))
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            connections = _open_all(port, count, stack, open_one, noun)
            opened_in = time.monotonic() - started
            time.sleep(settle)
            after = sum(map(rss_kib, workers))
            still_open = sum(map(_is_open, connections))
    return IdleRss(len(connections), opened_in, still_open, before, after)


def _open_all(
    port: int, count: int, stack: contextlib.ExitStack, open_one: OpenOne, noun: str
) -> list[socket.socket]:
    connections, failures = [], 0
    for n in range(1, count + 1):
        try:
            connections.append(open_one(port, stack))
        except OSError as error:
            failures += 1
            if failures == 1 or failures == MAX_FAILURES:
                print(f"  connection {n}: {error}", file=sys.stderr)
            if failures == MAX_FAILURES:
                print(f"  stopping after {MAX_FAILURES} failures", file=sys.stderr)
                break
        if n % 2000 == 0:
            print(f"  {n:,} {noun}", flush=True)
    return connections


def _is_open(sock: socket.socket) -> bool:
    """Whether the server still holds this connection (no FIN or RST has arrived)."""
    sock.setblocking(False)  # with a timeout set, recv would first wait for data
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
