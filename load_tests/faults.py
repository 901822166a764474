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
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.apps.fault_targets import IMPATIENT_HEADER_TIMEOUT
from load_tests.contenders import OURS
from load_tests.harness import (
    HOST,
    child_pids,
    exit_on_sigterm,
    free_port,
    ping_request,
    read_response,
    serve,
)
from load_tests.hup_under_load import hup_under_wrk
from load_tests.wrk import WrkFailed, WrkRun


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


# -- HTTP workers: kill -9, HUP reload, slowloris -------------------------------------------

FAULT_APP = "load_tests.apps.fault_targets"
REPLACEMENT_BAR_MS = 3000  # from kill -9 until a new worker answers
SLOW_BYTE_EVERY = 0.5  # each slowloris connection sends a byte this often: never idle
HEADER_SLACK = 1.5  # the sweeper ticks every 0.25 s; the rest is a busy 2-core machine
PING_EVERY = 0.01  # the /ping probe's pace during the slowloris attack
PING_P99_BAR_MS = 50.0


def _socketify_run(app: str, port: int, workers: int) -> list[str]:
    """`socketify run APP` on the loopback port, as an operator starts it."""
    script = Path(sys.executable).with_name("socketify")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    return [*cli, "run", app, "--workers", str(workers), "--bind", f"{HOST}:{port}"]


def _open_connections(pid: int, port: int) -> int:
    """Established TCP connections to local `port` held by process `pid` (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rpartition(":")[2], 16)
            count += local_port == port and fields[3] == "01" and fields[9] in inodes
    return count


def _answering_pid(port: int) -> int | None:
    """GET /pid on a fresh connection: the worker that answered, or None."""
    request = f"GET /pid HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode()
    try:
        with socket.create_connection((HOST, port), timeout=2) as sock:
            sock.sendall(request)
            return int(read_response(sock).partition(b"\r\n\r\n")[2])
    except (OSError, ValueError):
        return None


@experiment("kill-worker")
def kill_worker(short: bool) -> Figure:
    """kill -9 one of two workers under wrk: who fails, and how soon a replacement answers."""
    duration, connections = (4, 20) if short else (10, 50)
    try:
        return _kill_worker(duration, connections)
    except WrkFailed as error:
        raise CouldNotRun(str(error)) from error


def _kill_worker(duration: int, connections: int) -> Figure:
    port = free_port()
    run = WrkRun(connections=connections, duration=duration)
    with serve(OURS, _socketify_run(f"{FAULT_APP}:server", port, 2), port) as server:
        wrk = subprocess.Popen(
            run.argv(server.url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        time.sleep(duration / 3)
        workers = child_pids(server.pid)
        victim = workers[0]
        held_by_victim = _open_connections(victim, port)
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        replaced_after = None  # seconds until a new worker answered /pid
        while replaced_after is None and time.monotonic() - killed_at < 10:
            if (pid := _answering_pid(port)) is not None and pid not in workers:
                replaced_after = time.monotonic() - killed_at
        stdout, stderr = wrk.communicate()
        result = run.parse(wrk.returncode, stdout, stderr)
        survivors = child_pids(server.pid)
    errors = result.socket_errors
    replaced_ms = 1000 * replaced_after if replaced_after is not None else float("inf")
    held = (
        result.non_2xx == 0
        and errors.total <= held_by_victim
        and replaced_ms <= REPLACEMENT_BAR_MS
        and len(survivors) == 2
    )
    return Figure(
        "kill-worker",
        replaced_ms,
        "ms until a replacement worker answered",
        f"<= {REPLACEMENT_BAR_MS:,} ms; socket errors <= the killed worker's open connections; "
        "0 non-2xx",
        held,
        [
            f"killed worker {victim} of {workers} holding {held_by_victim} of {connections} "
            f"wrk connections; workers after: {survivors}",
            f"wrk: {result.requests:,} requests, {result.requests_per_sec:,.0f} req/s; "
            f"socket errors {errors.total} (connect {errors.connect}, read {errors.read}, "
            f"write {errors.write}, timeout {errors.timeout}); non-2xx {result.non_2xx}",
        ],
    )


@experiment("hup-reload")
def hup_reload(short: bool) -> Figure:
    """Two SIGHUPs under wrk: no failed request, and every worker replaced."""
    duration, hup_at = (6, [1.5, 3.5]) if short else (10, [3.0, 6.0])
    try:
        hup = hup_under_wrk(
            workers=2, connections=20 if short else 50, duration=duration, hup_at=hup_at, say=_quiet
        )
    except WrkFailed as error:
        raise CouldNotRun(str(error)) from error
    result, errors = hup.result, hup.result.socket_errors
    return Figure(
        "hup-reload",
        errors.total + result.non_2xx,
        "failed requests (socket errors + non-2xx)",
        "0, and every worker replaced",
        hup.held,
        [
            f"SIGHUP at {', '.join(f'{at:g}' for at in hup_at)} s of {duration} s of wrk; "
            f"workers {hup.first_workers} -> {hup.last_workers} "
            f"({'all new' if hup.reloaded else 'NOT all new'})",
            f"wrk: {result.requests:,} requests, {result.requests_per_sec:,.0f} req/s, "
            f"p99 {result.p99_ms:.2f} ms; socket errors {errors.total}; non-2xx {result.non_2xx}",
        ],
    )


def _quiet(line: str) -> None:
    """Progress lines of a helper, not wanted in a figure's report."""


@experiment("slowloris")
def slowloris(short: bool) -> Figure:
    """Connections trickling a head get 408 at the header deadline while /ping stays fast."""
    count = 500
    waves = 1 if short else 3
    port = free_port()
    deadline = IMPATIENT_HEADER_TIMEOUT
    app = f"{FAULT_APP}:impatient"
    with serve(OURS, _socketify_run(app, port, 1), port, nofile=4 * count + 256) as server:
        latencies: list[float] = []
        stop = threading.Event()
        probe = threading.Thread(target=_probe_ping, args=(port, latencies, stop), daemon=True)
        probe.start()
        cut_after: list[float] = []
        for _ in range(waves):
            cut_after += _slowloris_wave(port, count, deadline)
        stop.set()
        probe.join()
        log = server.log_tail(10_000)
    answered = [elapsed for elapsed in cut_after if elapsed is not None]
    on_time = [e for e in answered if deadline - 0.1 <= e <= deadline + HEADER_SLACK]
    p99 = _percentile(latencies, 99) * 1000 if latencies else float("inf")
    held = len(on_time) == count * waves and p99 < PING_P99_BAR_MS and "Traceback" not in log
    return Figure(
        "slowloris",
        p99,
        "ms p99 of /ping during the attack",
        f"< {PING_P99_BAR_MS:g} ms, and every slow connection cut with 408 within "
        f"{deadline:g}-{deadline + HEADER_SLACK:g} s of its first byte",
        held,
        [
            f"{waves} wave(s) of {count} connections, one byte each every {SLOW_BYTE_EVERY} s, "
            f"header_timeout {deadline:g} s (1 worker)",
            f"408 on time: {len(on_time)}/{count * waves}; answered: {len(answered)}; cut after "
            f"{min(answered, default=0):.2f}-{max(answered, default=0):.2f} s",
            f"/ping: {len(latencies)} probes, p50 {_percentile(latencies, 50) * 1000:.2f} ms, "
            f"p99 {p99:.2f} ms, max {max(latencies, default=0) * 1000:.2f} ms",
        ],
    )


def _slowloris_wave(port: int, count: int, deadline: float) -> list[float]:
    """Open `count` connections that trickle a never-ending head; seconds until each got a 408.

    A connection that got anything but a 408, or nothing within twice the deadline, counts
    as missing from the result.
    """
    selector = selectors.DefaultSelector()
    started: dict[socket.socket, float] = {}
    for _ in range(count):
        sock = socket.create_connection((HOST, port), timeout=5)
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        started[sock] = time.monotonic()
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, bytearray())
    cut_after: list[float] = []
    give_up = time.monotonic() + 2 * deadline + 5
    next_byte = time.monotonic() + SLOW_BYTE_EVERY
    while selector.get_map() and time.monotonic() < give_up:
        for key, _ in selector.select(timeout=max(0.0, next_byte - time.monotonic())):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            key.data.extend(data)
            if not data or b"\r\n\r\n" in key.data:
                if key.data.startswith(b"HTTP/1.1 408 "):
                    cut_after.append(time.monotonic() - started[sock])
                selector.unregister(sock)
                sock.close()
        if time.monotonic() >= next_byte:
            next_byte += SLOW_BYTE_EVERY
            for key in list(selector.get_map().values()):
                with contextlib.suppress(OSError):
                    key.fileobj.send(b"s")  # type: ignore[union-attr]  # sockets, above
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]  # sockets, registered above
    return cut_after


def _probe_ping(port: int, latencies: list[float], stop: threading.Event) -> None:
    """GET /ping on one keep-alive connection every PING_EVERY s until `stop`; record times."""
    request = ping_request(port)
    with socket.create_connection((HOST, port), timeout=10) as sock:
        while not stop.wait(PING_EVERY):
            sent = time.perf_counter()
            sock.sendall(request)
            read_response(sock)
            latencies.append(time.perf_counter() - sent)


def _percentile(values: list[float], percent: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))]


if __name__ == "__main__":
    sys.exit(main())
