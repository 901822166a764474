"""Fault experiments: what an operator tries before production, each printing its figure.

    python load_tests/faults.py                 # every experiment, full length
    python load_tests/faults.py slow-reader     # one (or several) by name
    python load_tests/faults.py --short         # the short versions that CI runs as tests
    python load_tests/faults.py --list

Each experiment starts the real server through `socketify run` on a free loopback port, does
to it what a misbehaving client, a dying process or a lost backend would do, and returns a
`Figure`: the measured value, the bar it is judged against, and whether it held. The exit
status is 0 when every experiment that ran held its bar, 1 otherwise, 2 when one could not run.
`tests/faults/` runs each experiment's short version (`short=True`) as a test.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import HOST, RunningServer, exit_on_sigterm, free_port, serve


@dataclass(frozen=True)
class Figure:
    """What one experiment measured, and whether it held its bar."""

    name: str
    value: float
    unit: str
    bar: str
    held: bool
    details: list[str] = field(default_factory=list)

    def report(self) -> str:
        """A few lines for a person: the figure, the bar, the verdict, then the details."""
        verdict = "held" if self.held else "MISSED"
        lines = [f"{self.name}: {self.value:,.2f} {self.unit}  (bar: {self.bar})  {verdict}"]
        lines += [f"    {line}" for line in self.details]
        return "\n".join(lines)


class CouldNotRun(RuntimeError):
    """The experiment could not be set up (a tool or service is missing): no verdict."""


Experiment = Callable[[bool], Figure]  # short -> Figure
EXPERIMENTS: dict[str, Experiment] = {}


def experiment(name: str) -> Callable[[Experiment], Experiment]:
    """Register `fn(short) -> Figure` under `name`."""

    def register(fn: Experiment) -> Experiment:
        EXPERIMENTS[name] = fn
        return fn

    return register


def run(name: str, *, short: bool = False) -> Figure:
    """Run one experiment by name (what the tests call)."""
    return EXPERIMENTS[name](short)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the named experiments (all by default) and print each figure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments to run (default: all)")
    parser.add_argument("--short", action="store_true", help="the short versions CI runs")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, fn in EXPERIMENTS.items():
            print(f"{name:16} {(fn.__doc__ or '').strip().splitlines()[0]}")
        return 0
    unknown = [name for name in args.names if name not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s): {', '.join(unknown)}; see --list")
    exit_on_sigterm()
    status = 0
    for name in args.names or list(EXPERIMENTS):
        try:
            figure = run(name, short=args.short)
        except CouldNotRun as exc:
            print(f"{name}: could not run: {exc}")
            status = max(status, 2)
            continue
        print(figure.report(), flush=True)
        if not figure.held:
            status = max(status, 1)
    return status


# -- experiments ------------------------------------------------------------------------------
# Each one is a function `fn(short: bool) -> Figure` under `@experiment("name")`, in its own
# section below.


# -- redis-outage: the Redis state backend stopped, continued, killed, restarted under load --


@dataclass(frozen=True)
class _Answer:
    phase: str
    status: int  # 0: no answer (timeout or connection error)
    elapsed: float


def _session_client(port: int, stop: threading.Event, phase: list[str], out: list[_Answer]) -> None:
    """One keep-alive client asking for /session (its own cookie) and /limited in turn."""
    cookie = ""
    conn = http.client.HTTPConnection(HOST, port, timeout=5)
    while not stop.is_set():
        for path in ("/session", "/limited"):
            current = phase[0]
            started = time.monotonic()
            try:
                conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
                response = conn.getresponse()
                response.read()
                status = response.status
                cookie = (response.getheader("Set-Cookie") or cookie).split(";")[0]
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=5)
            out.append(_Answer(current, status, time.monotonic() - started))
    conn.close()


@experiment("redis-outage")
def redis_outage(short: bool) -> Figure:
    """Redis stopped (SIGSTOP), continued, killed and restarted under steady session load."""
    from load_tests.redis_server import PrivateRedis, RedisMissing

    bar = 2.0
    clients = 8
    # Seconds: healthy, stopped, continued, killed, restarted.
    plan = (1.0, 2.5, 1.5, 2.0, 2.0) if short else (3.0, 6.0, 4.0, 6.0, 4.0)
    try:
        redis = PrivateRedis()
    except RedisMissing as exc:
        raise CouldNotRun(str(exc)) from None
    port = free_port()
    argv = [
        "env", f"SOCKETIFY_STATE_URL={redis.url}",  # serve() passes this process's environment
        sys.executable, "-m", "socketify.cli", "run", "load_tests.apps.state_routes:server",
        "--bind", f"{HOST}:{port}", "--workers", "2",
    ]  # fmt: skip
    answers: list[_Answer] = []
    marks: dict[str, int] = {}  # phase -> log length when it began
    phase = ["healthy"]
    stop = threading.Event()
    with contextlib.closing(redis), serve("socketify", argv, port) as server:
        redis.start()
        threads = [
            threading.Thread(target=_session_client, args=(port, stop, phase, answers))
            for _ in range(clients)
        ]
        for thread in threads:
            thread.start()
        steps = [
            ("healthy", lambda: None),
            ("stopped", redis.pause),
            ("continued", redis.resume),
            ("killed", redis.kill),
            ("restarted", redis.start),
        ]
        try:
            for (name, act), seconds in zip(steps, plan, strict=True):
                marks[name] = len(_log_text(server))
                phase[0] = name  # requests are counted in the phase they began in
                act()
                time.sleep(seconds)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        log = _log_text(server)
    return _outage_figure(answers, log, marks, bar)


def _log_text(server: RunningServer) -> str:
    server.log.seek(0, os.SEEK_END)
    size = server.log.tell()
    server.log.seek(0)
    text = server.log.read(size).decode(errors="replace")
    return text


def _outage_figure(answers: list[_Answer], log: str, marks: dict[str, int], bar: float) -> Figure:
    order = list(marks)
    ends = [*(marks[name] for name in order[1:]), len(log)]
    details: list[str] = []
    held = True
    worst_overall = 0.0
    for name, end in zip(order, ends, strict=True):
        mine = [a for a in answers if a.phase == name]
        worst = max((a.elapsed for a in mine), default=0.0)
        late = sum(1 for a in mine if a.status == 0 or a.elapsed >= bar)
        statuses = Counter(a.status for a in mine)
        lines = [line for line in log[marks[name] : end].splitlines() if line.strip()]
        state_lines = [line for line in lines if "socketify.state" in line]
        details.append(
            f"{name:9} {len(mine):6} requests  worst {1000 * worst:7.1f} ms  unanswered "
            f"within {bar:.0f} s: {late}  statuses {dict(sorted(statuses.items()))}  "
            f"log lines {len(lines)}"
        )
        details += [f"    {line[:160]}" for line in state_lines]
        worst_overall = max(worst_overall, worst)
        held &= late == 0 and "Traceback" not in log[marks[name] : end]
        if name in ("stopped", "killed"):
            held &= len(lines) <= 2  # one line per worker, the outage's
        else:
            held &= statuses.get(200, 0) > 0  # served again (recovery is automatic)
    return Figure(
        "redis-outage",
        worst_overall,
        "s worst response",
        f"every request answered (503 or served) within {bar:.0f} s; <= 2 log lines per outage",
        held,
        details,
    )


if __name__ == "__main__":
    sys.exit(main())
