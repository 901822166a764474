"""Memory per idle keep-alive connection: RSS of a 1-worker server's worker, before and after
10 000 connections that each made one request and then stayed open.

Both sides need more file descriptors than the usual 1024: this script raises its own
RLIMIT_NOFILE, and starts the server with a raised limit too (a preexec_fn, like `prlimit`).
The worker is the master's only child (a single-process server is its own worker); RSS is VmRSS
from /proc/<pid>/status. Connections are opened one after another, well inside the server's
idle timeout (60 s for ours), and counted again at measurement time in case the server closed
some. Note that ours caps connections at max_connections (10 000 by default) per worker.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.contenders import CONTENDERS, OURS, ensure_peers
from load_tests.harness import (
    HOST,
    ServerFailedToStart,
    child_pids,
    exit_on_sigterm,
    free_port,
    ping_request,
    raise_nofile,
    read_response,
    rss_kib,
    serve,
)

FD_HEADROOM = 1024  # listening sockets, logs, imports: everything but the connections
MAX_FAILURES = 100


def main(argv: Sequence[str] | None = None) -> int:
    """Open the idle connections and report the worker's RSS growth per connection."""
    args = _parse_args(argv)
    exit_on_sigterm()
    contender = CONTENDERS[args.server]
    if problem := ensure_peers([contender], setup=args.setup):
        print(problem, file=sys.stderr)
        return 2
    nofile = args.connections + FD_HEADROOM
    try:
        raise_nofile(nofile)
    except ValueError as error:
        print(f"cannot raise RLIMIT_NOFILE to {nofile}: {error}", file=sys.stderr)
        return 2
    port = free_port()
    try:
        with serve(contender.name, contender.command(port, 1), port, nofile=nofile) as server:
            workers = child_pids(server.pid) or [server.pid]
            print(f"{contender.name}: master {server.pid}, worker(s) {workers}, NOFILE {nofile}")
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
        f"opened {len(connections):,}/{args.connections:,} keep-alive connections in "
        f"{opened_in:.1f} s (one GET /ping each), {still_open:,} still open when measured\n"
        f"worker RSS: {before:,} KiB before, {after:,} KiB after (+{after - before:,} KiB)"
    )
    if not still_open:
        print("no connection stayed open: nothing to divide by", file=sys.stderr)
        return 1
    if still_open < len(connections):
        print(
            f"the server closed {len(connections) - still_open:,} idle connections "
            "(its keep-alive timeout?): the figure below is not per idle connection"
        )
    print(f"=> {(after - before) / still_open:.2f} KiB per idle keep-alive connection")
    return 0 if still_open == args.connections else 1


def _open_idle(port: int, count: int, stack: contextlib.ExitStack) -> list[socket.socket]:
    """Open count connections, make one request on each, and leave them open."""
    request = ping_request(port)
    connections, failures = [], 0
    for n in range(1, count + 1):
        try:
            sock = stack.enter_context(socket.create_connection((HOST, port), timeout=5))
            sock.sendall(request)
            read_response(sock)
            connections.append(sock)
        except OSError as error:
            failures += 1
            if failures == 1 or failures == MAX_FAILURES:
                print(f"  connection {n}: {error}", file=sys.stderr)
            if failures == MAX_FAILURES:
                print(f"  stopping after {MAX_FAILURES} failures", file=sys.stderr)
                break
        if n % 2000 == 0:
            print(f"  {n:,} connections", flush=True)
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


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=10_000, help="default 10000")
    parser.add_argument(
        "--server",
        choices=list(CONTENDERS),
        default=OURS,
        help=f"which server to measure, with 1 worker (default {OURS})",
    )
    parser.add_argument(
        "--settle", type=float, default=1.0, help="seconds to wait before each RSS reading"
    )
    parser.add_argument(
        "--setup", action="store_true", help="install the peer servers first if needed"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
