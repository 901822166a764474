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
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import exit_on_sigterm


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


# -- hot session ------------------------------------------------------------------------------
# 32 clients sharing one session cookie, every request changing a session of ~300 bytes,
# against 32 clients with no cookie (a new session per request), in the same run; clients
# that write their own key of that session while it is hot must lose no write; and the
# anonymous flood must leave the store's memory bounded.

HOT_APP = "load_tests.apps.state_routes:server"
HOT_CONNECTIONS = 32
HOT_BAR = 0.5  # the shared session's rate over the new-session rate
HOT_SHORT_BAR = 0.25  # loose: CI machines are noisy
HOT_WRITERS = 8  # clients that count their own requests in the hot session
HOT_SHORT_TABLE_MB = 6  # the short version's table: small enough to fill in a second
HOT_MASTER_MB = (2, 8)  # the master's store when it holds every session (short, full)
RSS_SETTLED_KIB = 4096  # full length: past this, RSS still grew in the flood's second half
# Growth allowed over the whole flood besides the store itself: the per-process caches of
# places, verified cookies and cookie lines fill up to their caps meanwhile.
RSS_SLACK_KIB = 12 << 10


@dataclass(frozen=True)
class HotRun:
    """What one hot-session run measured."""

    new_rate: float
    shared_rate: float
    counted: int  # the shared counter at the end of the shared phase
    shared_requests: int
    writes: dict[str, int]  # per writing client: requests answered
    kept: dict[str, int]  # per writing client: its key in the session at the end
    sessions: int  # sessions stored after the anonymous flood
    rss_kib: dict[str, list[int]]  # per process: before, mid-flood, after
    master_only: tuple[int, list[int]] = (0, [])  # with no table: sessions, master's RSS


def hot_requests(port: int, path: str, cookie: str = "") -> tuple[bytes, str]:
    """One GET on a new connection: (body, the session cookie after it)."""
    import http.client

    from load_tests.harness import HOST

    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        response = conn.getresponse()
        body = response.read()
        set_cookie = response.getheader("Set-Cookie") or ""
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
    return body, set_cookie.split(";")[0] or cookie


def hot_wrk(port: int, seconds: int, cookie: str) -> subprocess.Popen[str]:
    """wrk on /hot in the background (with the session cookie, or none)."""
    from load_tests.harness import HOST
    from load_tests.wrk import WrkRun

    argv = WrkRun(HOT_CONNECTIONS, seconds).argv(f"http://{HOST}:{port}/hot")
    if cookie:
        argv += ["-H", f"Cookie: {cookie}"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def hot_finish(wrk: subprocess.Popen[str]) -> tuple[float, int]:
    """(req/s, requests) of a background wrk, which must have had no errors."""
    from load_tests.wrk import WrkRun

    stdout, stderr = wrk.communicate(timeout=120)
    result = WrkRun(HOT_CONNECTIONS, 1).parse(wrk.returncode, stdout, stderr)
    if result.non_2xx or result.socket_errors.total:
        raise RuntimeError(f"/hot: {result.non_2xx} non-2xx, {result.socket_errors}")
    return result.requests_per_sec, result.requests


def hot_writer(port: int, cookie: str, name: str, until: float, answered: dict[str, int]) -> None:
    """Count this client's requests in its own key of the session, on one connection
    (`answered[name]`: how many were answered, set once all were)."""
    import http.client

    from load_tests.harness import HOST

    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    count = 0
    try:
        while time.monotonic() < until:
            conn.request("GET", f"/hot?c={name}", headers={"Cookie": cookie})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"/hot?c={name}: {response.status} {body[:200]!r}")
            count += 1  # one request at a time: a lost write leaves the key behind this
        answered[name] = count
    finally:
        conn.close()


def hot_rss(master: int) -> dict[str, int]:
    """RSS in KiB of the master and each worker."""
    from load_tests.harness import child_pids, rss_kib

    out = {"master": rss_kib(master)}
    for n, pid in enumerate(child_pids(master)):
        out[f"worker{n + 1}"] = rss_kib(pid)
    return out


def hot_flood(port: int, master: int, seconds: int) -> tuple[float, int, dict[str, list[int]]]:
    """Anonymous requests for `seconds`, in two halves: (req/s, sessions stored, RSS in KiB
    per process before, mid-flood and after)."""
    import orjson

    hot_finish(hot_wrk(port, 1, ""))  # warm-up: both workers have served /hot
    before = hot_rss(master)
    half = max(1, seconds // 2)
    first_rate, _ = hot_finish(hot_wrk(port, half, ""))
    mid = hot_rss(master)
    second_rate, _ = hot_finish(hot_wrk(port, seconds - half, ""))
    after = hot_rss(master)
    sessions = orjson.loads(hot_requests(port, "/hot/count")[0])["sessions"]
    rate = (first_rate * half + second_rate * (seconds - half)) / seconds
    rss = {name: [before[name], mid.get(name, 0), after.get(name, 0)] for name in before}
    return rate, sessions, rss


def hot_run(port: int, master: int, seconds: int) -> HotRun:
    """The three phases against a server already listening on `port`."""
    import threading

    import orjson

    new_rate, sessions, rss = hot_flood(port, master, seconds)

    _, cookie = hot_requests(port, "/hot")
    shared_rate, shared_requests = hot_finish(hot_wrk(port, seconds, cookie))
    counted = orjson.loads(hot_requests(port, "/hot/peek", cookie)[0])["n"]

    # Writers of their own keys while wrk keeps the session hot.
    answered: dict[str, int] = {}
    wrk = hot_wrk(port, seconds, cookie)
    until = time.monotonic() + seconds - 0.5
    writers = [
        threading.Thread(target=hot_writer, args=(port, cookie, f"w{n}", until, answered))
        for n in range(HOT_WRITERS)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    hot_finish(wrk)
    if len(answered) < len(writers):
        raise RuntimeError("a client writing its own key failed (its error is printed above)")
    final = orjson.loads(hot_requests(port, "/hot/peek", cookie)[0])
    kept = {name: final.get(f"c:{name}", 0) for name in answered}
    return HotRun(new_rate, shared_rate, counted, shared_requests, answered, kept, sessions, rss)


@experiment("hot-session")
def hot_session(short: bool) -> Figure:
    """32 clients on one ~300-byte session vs 32 without: rate ratio, lost writes, memory."""
    from load_tests.harness import free_port, serve

    if shutil.which("wrk") is None:
        raise CouldNotRun("wrk is not on PATH (Debian/Ubuntu: apt-get install wrk)")
    seconds = 2 if short else 8
    port = free_port()
    env = [f"SOCKETIFY_STATE_TABLE_MB={HOT_SHORT_TABLE_MB}"] if short else []
    argv = ["env", *env, sys.executable, "-m", "socketify.cli", "run", HOT_APP,
            "--workers", "2", "--bind", f"127.0.0.1:{port}"]  # fmt: skip
    with serve("socketify", argv, port) as server:
        run_ = hot_run(port, server.pid, seconds)
    # The same flood with no table: the master's own store holds every session.
    port = free_port()
    env = ["SOCKETIFY_STATE_TABLE=0", f"SOCKETIFY_STATE_MASTER_MB={HOT_MASTER_MB[not short]}"]
    argv = ["env", *env, *argv[argv.index(sys.executable) : -1], f"127.0.0.1:{port}"]
    with serve("socketify", argv, port) as server:
        _, sessions, rss = hot_flood(port, server.pid, seconds)
    run_ = replace(run_, master_only=(sessions, rss["master"]))
    return hot_figure(run_, short)


def hot_figure(run_: HotRun, short: bool) -> Figure:
    """Judge a run: the rate ratio, no lost write of a client's own key, memory settled."""
    ratio = run_.shared_rate / run_.new_rate
    lost = sum(run_.writes[name] - run_.kept[name] for name in run_.writes)
    sessions, (before, mid, after) = run_.master_only
    rss = {**run_.rss_kib, "master, no table": [before, mid, after]}
    table_kib = (HOT_SHORT_TABLE_MB if short else 102) << 10  # pages every worker may touch
    store_kib = {"master": 0, "master, no table": 2 * HOT_MASTER_MB[not short] << 10}
    growing = [
        name
        for name, (before, mid, after) in rss.items()
        if after - before > store_kib.get(name, table_kib) + RSS_SLACK_KIB
        or (not short and after - mid > RSS_SETTLED_KIB)
    ]
    bar = HOT_SHORT_BAR if short else HOT_BAR
    held = ratio >= bar and lost == 0 and not growing and sum(run_.writes.values()) > 0
    details = [
        f"new session per request: {run_.new_rate:,.0f} req/s; "
        f"one shared session: {run_.shared_rate:,.0f} req/s",
        f"shared counter: {run_.counted:,} of {run_.shared_requests:,} increments kept "
        "(one key, last writer wins: count with the store's incr)",
        f"own keys written beside the hot traffic: {sum(run_.writes.values()):,} writes by "
        f"{len(run_.writes)} clients, {lost} lost",
        f"sessions stored after the anonymous flood: {run_.sessions:,} "
        f"({sessions:,} with no table, in the master's {HOT_MASTER_MB[not short]} MiB)",
    ]
    details += [
        f"RSS {name}: {before / 1024:.1f} -> {mid / 1024:.1f} -> {after / 1024:.1f} MiB "
        "(before, mid-flood, after)"
        for name, (before, mid, after) in rss.items()
    ]
    if growing:
        details.append(f"RSS past its bound or still growing: {', '.join(growing)}")
    return Figure("hot-session", ratio, "x", f">= {bar}x, no lost write, RSS bounded",
                  held, details)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
