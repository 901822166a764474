"""The cross-worker state bars over HTTP: a session route and a rate-limited route vs /ping.

    python load_tests/run_state.py [--rounds 3] [--duration 5] [--connections 50]

Starts `socketify run load_tests.apps.state_routes:server --workers 2` once and, in each
round, runs wrk (-t1, nothing pinned: see README "Pinning") on `/ping`, `/session` (one
session cookie: every request loads it from the cross-worker store and saves it back) and
`/limited` (one token taken from the global bucket per request), back to back. It prints
each round's req/s and the ratios to /ping of the same round, then the median ratio.
Bars: session >= 0.6x /ping, rate-limited >= 0.7x /ping.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from load_tests.harness import free_port, serve
from load_tests.wrk import parse_wrk

APP = "load_tests.apps.state_routes:server"
ROUTES = ("/ping", "/session", "/limited")
BARS = {"/session": 0.6, "/limited": 0.7}


def session_cookie(port: int) -> str:
    """Start a session and return its cookie (`sid=...`)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/session") as response:
        return str(response.headers["Set-Cookie"]).split(";")[0]


def wrk(url: str, duration: int, connections: int, cookie: str | None) -> float:
    """req/s of one wrk run; fails loudly on socket errors or non-2xx answers."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        if cookie:
            script.write(f'wrk.headers["Cookie"] = "{cookie}"\n')
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{duration}", "--latency", "-s", script.name, url]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    result = parse_wrk(done.stdout)
    if result.non_2xx or result.socket_errors.total:
        raise SystemExit(f"{url}: {result.non_2xx} non-2xx, socket errors {result.socket_errors}")
    return result.requests_per_sec


def main() -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()
    port = free_port()
    argv = [sys.executable, "-m", "socketify.cli", "run", APP, "--workers", "2",
            "--bind", f"127.0.0.1:{port}"]  # fmt: skip
    ratios: dict[str, list[float]] = {route: [] for route in ROUTES[1:]}
    with serve("socketify", argv, port):
        cookie = session_cookie(port)
        wrk(f"http://127.0.0.1:{port}/ping", 1, args.connections, None)  # warm-up
        print(f"{'round':>5} " + " ".join(f"{r:>10}" for r in ROUTES) + "   ratios to /ping")
        for round_ in range(1, args.rounds + 1):
            rates = {
                route: wrk(
                    f"http://127.0.0.1:{port}{route}",
                    args.duration,
                    args.connections,
                    cookie if route == "/session" else None,
                )
                for route in ROUTES
            }
            line = " ".join(f"{rates[r]:>10,.0f}" for r in ROUTES)
            parts = []
            for route in ROUTES[1:]:
                ratio = rates[route] / rates["/ping"]
                ratios[route].append(ratio)
                parts.append(f"{route} {ratio:.2f}x")
            print(f"{round_:>5} {line}   " + ", ".join(parts))
    for route, values in ratios.items():
        median = statistics.median(values)
        verdict = "PASS" if median >= BARS[route] else "MISS"
        print(f"median {route}: {median:.2f}x /ping (bar {BARS[route]}x) {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
