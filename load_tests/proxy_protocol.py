"""The PROXY protocol bar: /ping through HAProxy with PROXY v2 vs through HAProxy without it.

    flock /tmp/bench.lock python load_tests/proxy_protocol.py [--rounds 3] [--duration 8]
                                                              [--connections 50]

One HAProxy (TCP mode, one thread) has two frontends: one relays to a plain
`socketify run load_tests.apps.ping:server --workers 1`, the other, with `send-proxy-v2`, to
the same app run with `--proxy-protocol`. HAProxy and both servers are pinned together with
`taskset -c 1`, wrk with `taskset -c 0 wrk -t1`; each round loads one configuration then the
other (interleaved, so drift hits both alike) and prints both rates and their ratio. The
median ratio is read against the bar (with PROXY >= 0.9x without). Each server worker's CPU
time per request is printed too: on a shared machine it is the steadier figure.

Both servers write the `common` access log. HAProxy connects to the backends from
127.0.0.2 while wrk connects from 127.0.0.1: the plain server logs the proxy's address, the
PROXY one must log the client's, and the script checks that it does.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from load_tests.harness import (
    HOST,
    PING_PATH,
    SERVER_CPU,
    WRK_CPU,
    child_pids,
    cpu_seconds,
    free_port,
    pinned,
    serve,
)
from load_tests.wrk import WrkRun

APP = "load_tests.apps.ping:server"
BAR = 0.9
PROXY_SOURCE = "127.0.0.2"  # where HAProxy connects to the backends from


def haproxy_config(frontends: dict[int, tuple[int, str]]) -> str:
    """TCP-mode frontends, port -> (backend port, extra `server` options)."""
    lines = [
        "global",
        "    nbthread 1",
        "    maxconn 4096",
        "defaults",
        "    mode tcp",
        "    timeout connect 5s",
        "    timeout client 60s",
        "    timeout server 60s",
    ]
    for number, (port, (backend, options)) in enumerate(frontends.items()):
        lines += [
            f"frontend in{number}",
            f"    bind {HOST}:{port}",
            f"    default_backend out{number}",
            f"backend out{number}",
            f"    server app {HOST}:{backend} source {PROXY_SOURCE} {options}",
        ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def haproxy(directory: Path, frontends: dict[int, tuple[int, str]]) -> Iterator[None]:
    """HAProxy pinned to SERVER_CPU until the block exits."""
    config = directory / "haproxy.cfg"
    config.write_text(haproxy_config(frontends))
    process = subprocess.Popen(pinned(["haproxy", "-f", str(config), "-db"], SERVER_CPU))
    try:
        time.sleep(0.5)
        if process.poll() is not None:
            raise SystemExit("haproxy exited at start")
        yield
    finally:
        process.terminate()
        process.wait(10)


def ours(port: int, access_log: Path, *extra: str) -> list[str]:
    """The command line of our 1-worker /ping server, pinned, logging every request."""
    argv = [sys.executable, "-m", "socketify.cli", "run", APP, "--workers", "1",
            "--bind", f"{HOST}:{port}", "--access-log-format", "common",
            "--access-log", str(access_log), *extra]  # fmt: skip
    return pinned(argv, SERVER_CPU)


def rate(port: int, duration: int, connections: int, worker: int) -> tuple[float, float]:
    """(req/s, worker CPU microseconds per request) of one pinned wrk run through `port`."""
    url = f"http://{HOST}:{port}{PING_PATH}"
    before = cpu_seconds(worker)
    result = WrkRun(connections=connections, duration=duration, cpu=WRK_CPU).run(url)
    used = cpu_seconds(worker) - before
    if result.non_2xx or result.socket_errors.total:
        raise SystemExit(f"{url}: {result.non_2xx} non-2xx, socket errors {result.socket_errors}")
    return result.requests_per_sec, 1e6 * used / max(result.requests, 1)


def logged_address(access_log: Path) -> str:
    """The client address of the last access log line."""
    lines = access_log.read_text().splitlines()
    return lines[-1].split(" ", 1)[0] if lines else "(nothing logged)"


def main() -> int:
    """Run the interleaved rounds and print the ratio against the bar."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()
    plain_backend, proxy_backend = free_port(), free_port()
    plain_front, proxy_front = free_port(), free_port()
    frontends = {plain_front: (plain_backend, ""), proxy_front: (proxy_backend, "send-proxy-v2")}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        plain_log, proxy_log = directory / "plain.log", directory / "proxy.log"
        with (
            haproxy(directory, frontends),
            serve("plain", ours(plain_backend, plain_log), plain_front) as plain_server,
            serve(
                "proxy", ours(proxy_backend, proxy_log, "--proxy-protocol"), proxy_front
            ) as proxy_server,
        ):
            (plain_worker,) = child_pids(plain_server.pid)
            (proxy_worker,) = child_pids(proxy_server.pid)
            for port, worker in ((plain_front, plain_worker), (proxy_front, proxy_worker)):
                rate(port, 1, args.connections, worker)  # warm-up
            print(
                f"/ping through HAProxy (TCP mode, 1 thread) to 1 worker, both on CPU "
                f"{SERVER_CPU}; wrk -t1 -c{args.connections} -d{args.duration}s on CPU {WRK_CPU}"
            )
            print("round  no PROXY req/s  PROXY v2 req/s  ratio  us/req no PROXY  us/req PROXY")
            ratios, cpu_ratios = [], []
            for round_ in range(1, args.rounds + 1):
                plain, plain_cost = rate(plain_front, args.duration, args.connections, plain_worker)
                proxied, proxy_cost = rate(
                    proxy_front, args.duration, args.connections, proxy_worker
                )
                ratios.append(proxied / plain)
                cpu_ratios.append(plain_cost / proxy_cost)
                print(
                    f"{round_:>5} {plain:>15,.0f} {proxied:>15,.0f} {ratios[-1]:>5.2f}x"
                    f" {plain_cost:>15.1f} {proxy_cost:>13.1f}"
                )
            print(
                f"access log client address: without PROXY {logged_address(plain_log)} "
                f"(HAProxy's), with PROXY v2 {logged_address(proxy_log)} (wrk's is {HOST})"
            )
    median = statistics.median(ratios)
    verdict = "PASS" if median >= BAR else "MISS"
    print(
        f"median PROXY v2 / no PROXY: {median:.2f}x req/s (bar {BAR}x) {verdict}; "
        f"{statistics.median(cpu_ratios):.2f}x by worker CPU per request"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
