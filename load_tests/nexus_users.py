"""Simulated users on Nexus Board: errors and request latency under `--workers 2`.

    flock /tmp/bench.lock python load_tests/nexus_users.py --serve            # 50 users, 60 s
    python load_tests/nexus_users.py --url http://127.0.0.1:8080 --duration 10

Each user is a greenlet with its own keep-alive connection, coming from its own loopback
address (127.0.1.N), so the per-address limit on sign-ins sees 50 people, not one. A user
registers, signs in, opens the live-update stream (`/api/events`) on a second connection and
creates a project; then, until the time is up, it repeats: list its projects, create a task,
list the project's tasks (with a `?status=&q=` filter every other time), move the task to
"doing" and then "done", and delete it, pausing `--think` seconds (±50%) between requests as
a person would. Every request's time is measured from sending to the last byte of the answer.

An error is an unexpected status, a failed connection, or a live update that never came:
every change a user makes must reach its own event stream (which may be on the other worker)
within `EVENT_GRACE` seconds. The report gives the error count, requests per second and the
p50/p95/p99/max latency, overall and per kind of request. Exit status 1 on any error.

With `--serve` the script starts the app itself (`socketify run examples.nexus_board.app:server
--workers 2`, a fresh SQLite file, access log off) and stops it at the end; `--server-cpus`
pins it with taskset, `taskset -c 0 python ...` pins the users.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 - after monkey-patching, as gevent requires
import contextlib  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

import gevent  # noqa: E402
from gevent.event import Event  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import (  # noqa: E402
    child_pids,
    cpu_seconds,
    exit_on_sigterm,
    free_port,
    pinned,
    server_env,
    stop,
)

APP = "examples.nexus_board.app:server"
PASSWORD = "load test password"
EVENT_GRACE = 5.0  # seconds a change may take to show up on the user's event stream
TIMEOUT = 10.0


@dataclass
class Stats:
    """What every user measured: latencies per kind of request, and the errors."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)

    def error(self, text: str) -> None:
        if len(self.errors) < 1000:
            self.errors.append(text)
        else:
            self.errors[-1] = f"... and more ({text})"


class User:
    """One simulated person: an API connection, an event stream, a project."""

    def __init__(self, number: int, host: str, port: int, stats: Stats, think: float) -> None:
        self.number = number
        self.host, self.port = host, port
        self.source = (f"127.0.1.{number + 1}", 0)
        self.stats = stats
        self.think = think
        self.cookie = ""
        self.conn = self._connect()
        self.seen: dict[tuple[int, str], Event] = {}  # (task id, status) -> arrived
        self.stream: http.client.HTTPResponse | None = None

    def _connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(
            self.host, self.port, timeout=TIMEOUT, source_address=self.source
        )

    def call(self, kind: str, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        """One request on the keep-alive connection; its latency is recorded under `kind`."""
        headers = {"Cookie": self.cookie} if self.cookie else {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        started = time.perf_counter()
        try:
            self.conn.request(method, path, data, headers)
            answer = self.conn.getresponse()
            raw = answer.read()
        except (OSError, http.client.HTTPException) as error:
            self.stats.error(f"{kind}: {error!r}")
            self.conn.close()
            self.conn = self._connect()
            return None
        self.stats.latencies[kind].append(time.perf_counter() - started)
        cookie = answer.getheader("Set-Cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        if answer.status != expect:
            self.stats.error(f"{kind}: {answer.status} {raw[:200]!r}")
            return None
        return json.loads(raw) if raw else None

    def listen(self) -> None:
        """Read the event stream on a connection of its own, noting every task change."""
        conn = http.client.HTTPConnection(
            self.host, self.port, timeout=None, source_address=self.source
        )
        conn.request("GET", "/api/events", headers={"Cookie": self.cookie})
        self.stream = answer = conn.getresponse()
        if answer.status != 200:
            self.stats.error(f"events: {answer.status}")
            return
        event = ""
        try:
            for raw in answer:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    event = line[len("event: ") :]
                elif line.startswith("data: ") and event == "task":
                    task = json.loads(line[len("data: ") :]).get("task")
                    if task:
                        self.seen.setdefault((task["id"], task["status"]), Event()).set()
        except (OSError, ValueError, AttributeError):
            pass  # closed at the end of the run

    def expect_event(self, task_id: int, status: str) -> None:
        """Fail unless the change (task_id -> status) reaches this user's stream in time."""
        arrived = self.seen.setdefault((task_id, status), Event())
        if not arrived.wait(EVENT_GRACE):
            self.stats.error(f"events: task {task_id} -> {status} never arrived")

    def pause(self) -> None:
        gevent.sleep(self.think * random.uniform(0.5, 1.5))

    def run(self, start_by: float, deadline: float) -> None:
        """Sign up and in, then work on tasks until `deadline`."""
        gevent.sleep(random.uniform(0, max(0.0, start_by - time.monotonic())))  # ramp up
        email = f"user{self.number}.{os.getpid()}@load.test"
        account = {"email": email, "name": f"User {self.number}", "password": PASSWORD}
        self.call("register", "POST", "/api/auth/register", account, expect=201)
        self.call("login", "POST", "/api/auth/login", {"email": email, "password": PASSWORD})
        listener = gevent.spawn(self.listen)
        project = self.call(
            "create project", "POST", "/api/projects", {"name": f"P{self.number}"}, expect=201
        )
        if project is None:
            return
        tasks = f"/api/projects/{project['id']}/tasks"
        checks: list[gevent.Greenlet] = []
        round_number = 0
        while time.monotonic() < deadline:
            round_number += 1
            self.call("list projects", "GET", "/api/projects")
            self.pause()
            task = self.call(
                "create task", "POST", tasks, {"title": f"task {round_number}"}, expect=201
            )
            self.pause()
            query = "?status=todo&q=task" if round_number % 2 else ""
            self.call("list tasks", "GET", tasks + query)
            self.pause()
            if task is None:
                continue
            for status in ("doing", "done"):
                self.call("move task", "PATCH", f"/api/tasks/{task['id']}", {"status": status})
                checks.append(gevent.spawn(self.expect_event, task["id"], status))
                self.pause()
            self.call("delete task", "DELETE", f"/api/tasks/{task['id']}", expect=204)
            self.pause()
        gevent.joinall(checks)
        listener.kill()  # first: the stream is closed by the greenlet that no longer reads it
        with contextlib.suppress(OSError):
            if self.stream is not None:
                self.stream.close()
        self.conn.close()


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(stats: Stats, seconds: float) -> None:
    def row(name: str, values: list[float]) -> str:
        ordered = sorted(values)
        figures = [percentile(ordered, p) * 1000 for p in (0.5, 0.95, 0.99)] + [ordered[-1] * 1000]
        cells = " ".join(f"{value:8.1f}" for value in figures)
        return f"{name:16} {len(values):8d} {cells}"

    everything = [value for values in stats.latencies.values() for value in values]
    print(f"{'request':16} {'count':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, values in sorted(stats.latencies.items()):
        print(row(name, values))
    if everything:
        print(row("ALL", everything))
    print(f"requests: {len(everything)} in {seconds:.1f}s ({len(everything) / seconds:.0f}/s)")
    print(f"errors: {len(stats.errors)}")
    for text in stats.errors[:20]:
        print(f"  {text}")


@contextlib.contextmanager
def served(cpus: str | None, database: str | None) -> Iterator[tuple[str, int]]:
    """The app on 2 workers, on `database` or a fresh SQLite file, for the length of the block."""
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        env = {
            **server_env(),
            "NEXUS_DB": database or f"sqlite:///{folder}/nexus.db",
            "NEXUS_UPLOADS": f"{folder}/uploads",
            "NEXUS_ACCESS_LOG": "0",
        }
        argv = [
            sys.executable,
            "-m",
            "socketify.cli",
            "run",
            APP,
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
        ]
        process = subprocess.Popen(
            pinned(argv, None) if cpus is None else ["taskset", "-c", cpus, *argv],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, process)
            yield url, process.pid
        finally:
            stop(process)


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with status {process.returncode}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
            conn.request("GET", "/api/health")
            if conn.getresponse().status == 200:
                gevent.sleep(1.0)  # the master prints no line here: give the other worker time
                return
        gevent.sleep(0.2)
    raise SystemExit(f"{url}/api/health did not answer within {timeout:.0f}s")


def server_cpu(master: int) -> float:
    """CPU seconds used so far by the master and its workers."""
    return sum(cpu_seconds(pid) for pid in [master, *child_pids(master)])


def run(url: str, users: int, duration: float, think: float, ramp: float) -> Stats:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    stats = Stats()
    start = time.monotonic()
    crowd = [User(n, host, port, stats, think) for n in range(users)]
    greenlets = [gevent.spawn(user.run, start + ramp, start + duration) for user in crowd]
    gevent.joinall(greenlets)
    for greenlet in greenlets:
        if greenlet.exception is not None:
            stats.error(f"user crashed: {greenlet.exception!r}")
    report(stats, time.monotonic() - start)
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    """Run the users and print the report; exit status 1 on any error."""
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--url", help="a running Nexus Board (default: start one, see --serve)")
    parser.add_argument("--serve", action="store_true", help="start the app on 2 workers")
    parser.add_argument("--server-cpus", help="taskset CPU list for the started server")
    parser.add_argument("--db", help="NEXUS_DB for the started server (default: a new SQLite file)")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--think", type=float, default=0.1, help="pause between requests, s")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which users arrive")
    args = parser.parse_args(argv)
    if not 1 <= args.users <= 250:
        parser.error("--users must be within 1..250 (one loopback address each)")
    exit_on_sigterm()
    if args.url and not args.serve:
        stats = run(args.url, args.users, args.duration, args.think, args.ramp)
    else:
        with served(args.server_cpus, args.db) as (url, master):
            server_before, client_before = server_cpu(master), time.process_time()
            stats = run(url, args.users, args.duration, args.think, args.ramp)
            server_used = server_cpu(master) - server_before
            client_used = time.process_time() - client_before
            requests = sum(len(values) for values in stats.latencies.values())
            print(
                f"CPU: server {server_used:.1f}s ({1000 * server_used / max(requests, 1):.2f} ms"
                f" per request), users {client_used:.1f}s"
            )
    return 1 if stats.errors else 0


if __name__ == "__main__":
    sys.exit(main())
