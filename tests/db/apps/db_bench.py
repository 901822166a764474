"""The database bar, measured: /users/:id against /ping on the same 1-worker server.

    python tests/db/apps/db_bench.py [--seconds 5] [--rounds 3]

For SQLite and PostgreSQL: start `socketify run db_bench_app:server --workers 1` pinned to
CPU 0, run wrk pinned to CPU 1 (one thread, 64 connections) against /ping, /users/1 (Pony
entity by primary key) and /raw/users/1 (`db.select` by primary key), interleaved for several
rounds so a noisy neighbour hits every path alike; print requests/s and the ratio to /ping.
Also samples the PostgreSQL connections of the server while wrk runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATHS = ("/ping", "/users/1", "/raw/users/1")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wrk(port: int, path: str, seconds: int) -> float:
    out = subprocess.run(
        [
            "taskset",
            "-c",
            "1",
            "wrk",
            "-t1",
            "-c64",
            f"-d{seconds}s",
            f"http://127.0.0.1:{port}{path}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(out)
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def pg_connections(app_name: str, stop: threading.Event, peak: list[int]) -> None:
    import psycopg2

    con = psycopg2.connect(host="127.0.0.1", user="postgres", dbname="test")
    con.autocommit = True
    cursor = con.cursor()
    while not stop.is_set():
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app_name,)
        )
        peak[0] = max(peak[0], cursor.fetchone()[0])
        time.sleep(0.05)
    cursor.execute(f'DROP SCHEMA IF EXISTS "{app_name}" CASCADE')
    con.close()


def bench(label: str, url: str, seconds: int, rounds: int) -> None:
    port = free_port()
    env = {**os.environ, "DB_URL": url, "PYTHONPATH": str(HERE)}
    server = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, "-m", "socketify.cli", "run", "db_bench_app:server",
         "--workers", "1", "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
        env=env, cwd=HERE, start_new_session=True, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.5)
        results: dict[str, list[float]] = {path: [] for path in PATHS}
        for _ in range(rounds):
            for path in PATHS:
                results[path].append(wrk(port, path, seconds))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(15)
    ping = statistics.median(results["/ping"])
    for path in PATHS:
        rps = statistics.median(results[path])
        runs = ", ".join(f"{r:.0f}" for r in results[path])
        print(f"{label:<10} {path:<14} {rps:>9.0f} req/s  x{rps / ping:.2f} of /ping   ({runs})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (apt-get install wrk)")
    with tempfile.TemporaryDirectory() as tmp:
        bench("sqlite", f"sqlite:///{tmp}/bench.db", options.seconds, options.rounds)
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=pg_connections, args=(schema, stop, peak))
    sampler.start()
    try:
        bench(
            "postgres",
            f"postgres://postgres@127.0.0.1/test?schema={schema}&application_name={schema}",
            options.seconds,
            options.rounds,
        )
    finally:
        stop.set()
        sampler.join()
    print(f"postgres: peak server-side connections of the worker: {peak[0]} (pool_size 8)")


if __name__ == "__main__":
    main()
