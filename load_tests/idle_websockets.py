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
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.bench_websocket_client import masked_frame, open_websocket, server_frame
from load_tests.harness import (
    HOST,
    LOAD_TESTS,
    ServerFailedToStart,
    exit_on_sigterm,
    free_port,
    raise_nofile,
)
from load_tests.idle_rss import FD_HEADROOM, measure_idle_rss

_FRAME = masked_frame(0x1, b"x" * 64)
_REPLY = len(server_frame(0x1, b"x" * 64))
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
        seen = measure_idle_rss(
            "socketify",
            argv_server,
            port,
            count=args.connections,
            nofile=nofile,
            settle=args.settle,
            open_one=_open_one,
            noun="WebSockets",
        )
    except ServerFailedToStart as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 2
    still_open = seen.still_open
    print(
        f"opened {seen.opened:,}/{args.connections:,} WebSockets in {seen.opened_in:.1f} s "
        f"(one echo each), {still_open:,} still open when measured\n"
        f"worker RSS: {seen.before_kib:,} KiB before, {seen.after_kib:,} KiB after "
        f"(+{seen.growth_kib:,} KiB)"
    )
    if not still_open:
        print("no connection stayed open: nothing to divide by", file=sys.stderr)
        return 1
    per = seen.growth_kib / still_open
    verdict = "met" if per <= GOAL_KIB else "MISSED"
    print(f"=> {per:.2f} KiB per idle WebSocket (goal ≤ {GOAL_KIB:.0f} KiB: {verdict})")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"ws-idle-{args.connections}-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    record = {
        "scenario": "websocket-idle-rss",
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "connections": args.connections,
        "opened": seen.opened,
        "still_open": still_open,
        "rss_before_kib": seen.before_kib,
        "rss_after_kib": seen.after_kib,
        "kib_per_connection": per,
        "goal_kib": GOAL_KIB,
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"Saved {path}")
    return 0 if still_open == args.connections else 1


def _open_one(port: int, stack: contextlib.ExitStack) -> socket.socket:
    """One WebSocket on /pong that has echoed one 64-byte message."""
    sock, early = open_websocket(port, "/pong")
    stack.callback(sock.close)
    sock.sendall(_FRAME)
    while len(early) < _REPLY:
        chunk = sock.recv(_REPLY - len(early))
        if not chunk:
            raise ConnectionError("closed before the echo")
        early += chunk
    return sock


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=10_000, help="default 10000")
    parser.add_argument(
        "--settle", type=float, default=1.0, help="seconds to wait before each RSS reading"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
