"""Memory per idle WebSocket: RSS of a 1-worker server's worker before and after 10 000
upgraded connections that then stay silent (goal ≤ 16 KiB each).

Like `idle_connections.py` (the keep-alive HTTP version): this script raises its own
RLIMIT_NOFILE and starts `socketify run load_tests.apps.ws_echo:server --workers 1` with a
raised limit too. Each connection upgrades on `/pong` (default Pulse options, no compression,
no idle timeout), then sends one 64-byte message and reads the echo, so every channel has
been through its read, dispatch and write paths once before it goes idle. Connections still
open are counted at measurement time.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.bench_websocket_client import masked_frame, open_websocket, server_frame
from load_tests.harness import (
    HOST,
    LOAD_TESTS,
    ServerFailedToStart,
    child_pids,
    exit_on_sigterm,
    free_port,
    raise_nofile,
    rss_kib,
    serve,
)

FD_HEADROOM = 1024
MAX_FAILURES = 100
GOAL_KIB = 16.0
RESULTS = LOAD_TESTS / "results"


def main(argv: Sequence[str] | None = None) -> int:
    """Open the idle WebSockets and report the worker's RSS growth per connection."""
    args = _parse_args(argv)
    exit_on_sigterm()
    nofile = args.connections + FD_HEADROOM
    try:
        raise_nofile(nofile)
    except ValueError as error:
        print(f"cannot raise RLIMIT_NOFILE to {nofile}: {error}", file=sys.stderr)
        return 2
    port = free_port()
    script = Path(sys.executable).parent / "socketify"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    argv_server = [*cli, "run", "load_tests.apps.ws_echo:server", "--workers", "1", "--bind",
                   f"{HOST}:{port}"]  # fmt: skip
    try:
        with serve("socketify", argv_server, port, nofile=nofile) as server:
            workers = child_pids(server.pid) or [server.pid]
            print(f"socketify: master {server.pid}, worker(s) {workers}, NOFILE {nofile}")
            time.sleep(args.settle)
            before = sum(map(rss_kib, workers))
            started = time.monotonic()
            with contextlib.ExitStack() as stack:
                connections = _open_idle(port, args.connections, stack)
                opened_in = time.monotonic() - started
                time.sleep(args.settle)
                after = sum(map(rss_kib, workers))
                still_open = sum(map(_is_open, connections))
    except ServerFailedToStart as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 2
    print(
        f"opened {len(connections):,}/{args.connections:,} WebSockets in {opened_in:.1f} s "
        f"(one echo each), {still_open:,} still open when measured\n"
        f"worker RSS: {before:,} KiB before, {after:,} KiB after (+{after - before:,} KiB)"
    )
    if not still_open:
        print("no connection stayed open: nothing to divide by", file=sys.stderr)
        return 1
    per = (after - before) / still_open
    verdict = "met" if per <= GOAL_KIB else "MISSED"
    print(f"=> {per:.2f} KiB per idle WebSocket (goal ≤ {GOAL_KIB:.0f} KiB: {verdict})")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"ws-idle-{args.connections}-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    record = {
        "scenario": "websocket-idle-rss",
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "connections": args.connections,
        "opened": len(connections),
        "still_open": still_open,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "kib_per_connection": per,
        "goal_kib": GOAL_KIB,
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"Saved {path}")
    return 0 if still_open == args.connections else 1


def _open_idle(port: int, count: int, stack: contextlib.ExitStack) -> list[socket.socket]:
    """Open count WebSockets, echo one message on each, and leave them open."""
    frame = masked_frame(0x1, b"x" * 64)
    reply = len(server_frame(0x1, b"x" * 64))
    connections, failures = [], 0
    for n in range(1, count + 1):
        try:
            sock, early = open_websocket(port, "/pong")
            stack.callback(sock.close)
            sock.sendall(frame)
            while len(early) < reply:
                chunk = sock.recv(reply - len(early))
                if not chunk:
                    raise ConnectionError("closed before the echo")
                early += chunk
            connections.append(sock)
        except OSError as error:
            failures += 1
            if failures == 1 or failures == MAX_FAILURES:
                print(f"  connection {n}: {error}", file=sys.stderr)
            if failures == MAX_FAILURES:
                print(f"  stopping after {MAX_FAILURES} failures", file=sys.stderr)
                break
        if n % 2000 == 0:
            print(f"  {n:,} WebSockets", flush=True)
    return connections


def _is_open(sock: socket.socket) -> bool:
    """Whether the server still holds this connection (no FIN or RST has arrived)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=10_000, help="default 10000")
    parser.add_argument(
        "--settle", type=float, default=1.0, help="seconds to wait before each RSS reading"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
