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
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.contenders import CONTENDERS, OURS, ensure_peers
from load_tests.harness import (
    HOST,
    ServerFailedToStart,
    exit_on_sigterm,
    free_port,
    ping_request,
    raise_nofile,
    read_response,
)
from load_tests.idle_rss import FD_HEADROOM, measure_idle_rss


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
        seen = measure_idle_rss(
            contender.name,
            contender.command(port, 1),
            port,
            count=args.connections,
            nofile=nofile,
            settle=args.settle,
            open_one=_open_one,
            noun="connections",
        )
    except ServerFailedToStart as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 2
    still_open = seen.still_open
    print(
        f"opened {seen.opened:,}/{args.connections:,} keep-alive connections in "
        f"{seen.opened_in:.1f} s (one GET /ping each), {still_open:,} still open when measured\n"
        f"worker RSS: {seen.before_kib:,} KiB before, {seen.after_kib:,} KiB after "
        f"(+{seen.growth_kib:,} KiB)"
    )
    if not still_open:
        print("no connection stayed open: nothing to divide by", file=sys.stderr)
        return 1
    if still_open < seen.opened:
        print(
            f"the server closed {seen.opened - still_open:,} idle connections "
            "(its keep-alive timeout?): the figure below is not per idle connection"
        )
    print(f"=> {seen.growth_kib / still_open:.2f} KiB per idle keep-alive connection")
    return 0 if still_open == args.connections else 1


def _open_one(port: int, stack: contextlib.ExitStack) -> socket.socket:
    """One keep-alive connection that has made one request."""
    sock = stack.enter_context(socket.create_connection((HOST, port), timeout=5))
    sock.sendall(ping_request(port))
    read_response(sock)
    return sock


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
