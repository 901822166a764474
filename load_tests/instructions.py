"""Instructions per request of the real worker, counted by callgrind: repeatable on a busy box.

    python load_tests/instructions.py APP ROUTE [--requests 2000] [--connections 1]
                                      [--header "Origin: https://x"] [--session] [--env K=V]
                                      [--keep DIR]

Theory of operation: wrk figures on this shared 2-core machine swing between runs, but the
number of instructions a request costs does not. `socketify run APP --workers 1` runs under
`valgrind --tool=callgrind` twice; the client sends a warm-up, then 0 requests in the first
run and N in the second, and the worker's totals (callgrind writes them when the worker exits
on SIGTERM) are differenced and divided by N, so start-up and shut-down cancel out. The client
sends what wrk sends (the request line, `Host` and the `--header`s; no Accept-Encoding) over
`--connections` keep-alive connections, each with one request in flight; `--session` sends
back the cookie of the first response. Kernel time is not counted: compare with wrk for that.
Needs valgrind (`apt-get install valgrind`); each run takes a minute or two. `--keep DIR`
leaves the callgrind files there for `callgrind_annotate --inclusive=yes` (the worker's is the
larger file of the `loaded` run).
"""

from __future__ import annotations

import argparse
import glob
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import HOST, REPO_ROOT, free_port, read_response

START_TIMEOUT_S = 180  # the app's import under valgrind is ~50 times slower than usual
WARM_UP = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("app", help="module:server, as for `socketify run`")
    parser.add_argument("route", help="the path to request, e.g. /ping")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--header", action="append", default=[], help="'Name: value'")
    parser.add_argument("--session", action="store_true", help="send back the first cookie")
    parser.add_argument("--env", action="append", default=[], help="K=V for the server")
    parser.add_argument("--keep", type=Path, help="keep the callgrind files in this folder")
    args = parser.parse_args()
    env = {**os.environ, **dict(item.split("=", 1) for item in args.env)}
    with tempfile.TemporaryDirectory(prefix="instructions-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        base = _worker_total(args, env, 0, folder / "base")
        loaded = _worker_total(args, env, args.requests, folder / "loaded")
    print(f"{args.app} {args.route}: {(loaded - base) / args.requests:,.0f} instructions/request")


def _worker_total(args: argparse.Namespace, env: dict[str, str], count: int, out: Path) -> int:
    """Run the server under callgrind, send `count` requests after the warm-up, stop it and
    return the worker's instruction total (the larger of the two processes' totals)."""
    out.mkdir()
    port = free_port()
    command = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/callgrind.%p",
        sys.executable, "-m", "socketify.cli", "run", args.app,
        "--workers", "1", "--bind", f"{HOST}:{port}",
        "--timeout", "0",  # under valgrind a busy box can take longer than the silence limit
    ]  # fmt: skip
    with open(out / "log", "wb") as log:
        server = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            _wait_ready(port)
            _drive(port, _request(args, port), args.connections, WARM_UP + count)
        finally:
            _stop(server)
    totals = []
    for name in glob.glob(f"{out}/callgrind.*"):
        with open(name) as dump:
            totals += [int(line.split()[1]) for line in dump if line.startswith("summary:")]
    if len(totals) < 2:
        raise SystemExit(f"callgrind wrote {len(totals)} totals; see {out}/log")
    return max(totals)


def _wait_ready(port: int) -> None:
    """Wait until the server answers a request (any status)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=30) as sock:
                sock.sendall(f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
                read_response(sock)
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the server did not answer within {START_TIMEOUT_S} s")


def _request(args: argparse.Namespace, port: int) -> bytes:
    """The request every connection repeats; with `--session`, carrying the cookie that a
    first request to the route was given."""
    lines = [f"GET {args.route} HTTP/1.1", f"Host: {HOST}", *args.header]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    if args.session:
        with socket.create_connection((HOST, port), timeout=30) as sock:
            sock.sendall(request)
            head = read_response(sock).partition(b"\r\n\r\n")[0].decode("latin-1")
        cookies = [
            line.partition(":")[2].strip().split(";", 1)[0]
            for line in head.split("\r\n")
            if line.lower().startswith("set-cookie:")
        ]
        if not cookies:
            raise SystemExit(f"--session: {args.route} set no cookie")
        lines.append("Cookie: " + "; ".join(cookies))
        request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    return request


def _drive(port: int, request: bytes, connections: int, total: int) -> None:
    """Send `total` requests over `connections` connections, one in flight on each, and read
    every response (Content-Length framed, status 2xx/3xx required)."""
    selector = selectors.DefaultSelector()
    sent = done = 0
    for _ in range(min(connections, total)):
        sock = socket.create_connection((HOST, port), timeout=120)
        sock.sendall(request)
        sent += 1
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, bytearray())
    while done < total:
        for key, _ in selector.select(timeout=120):
            conn: socket.socket = key.fileobj  # type: ignore[assignment]  # registered above
            buffer = key.data
            chunk = conn.recv(65536)
            if not chunk:
                raise SystemExit("the server closed a connection")
            buffer += chunk
            while (end := buffer.find(b"\r\n\r\n")) >= 0:
                head = bytes(buffer[:end]).lower()
                at = head.find(b"content-length:")
                length = int(head[at + 15 :].split(b"\r\n")[0]) if at >= 0 else 0
                if len(buffer) < end + 4 + length:
                    break
                if not head.startswith((b"http/1.1 2", b"http/1.1 3")):
                    raise SystemExit(f"unexpected answer: {head[:60]!r}")
                del buffer[: end + 4 + length]
                done += 1
                if sent < total:
                    conn.sendall(request)
                    sent += 1
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]  # sockets, registered above


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group and wait: the worker writes its totals as it exits."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 60  # the worker may outlive the master briefly
    while time.monotonic() < deadline:
        try:
            os.killpg(server.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


if __name__ == "__main__":
    main()
