"""The HTTP/2 bars in one run: /ping over h2c against Hypercorn and against our HTTP/1.1, TLS h2
against h2c, and a 1 MiB static file over h2c against our HTTP/1.1 sendfile.

    python load_tests/bench_http2.py [--rounds 3] [--duration 8] [--connections 50]
                                     [--streams 10] [--static-streams 1] [--setup]

Theory of operation: three servers start once, each in its own process group, pinned with
`taskset -c 1` (SERVER_CPU): ours twice, `load_tests.apps.ping:server` and
`load_tests.apps.static_site:server` (1 MiB of random bytes in a temporary STATIC_ROOT), each
with one worker and two binds, `http://` (HTTP/1.1 and h2c by prior knowledge) and `https://`
(a throwaway self-signed certificate from the `openssl` CLI, h2 by ALPN); and Hypercorn (uvloop,
1 worker) serving the raw ASGI /ping of `apps/asgi_raw.py` on a plain bind, h2c by prior
knowledge. Before loading anything, every HTTP/2 target is probed: the client preface must be
answered with a SETTINGS frame (a server without HTTP/2 answers it with an HTTP/1.1 error
status, which is reported as such) and `nghttp` must fetch the exact body. A target that fails
its probe is reported with the reason and not loaded; the others still run.

Each round loads every target once, the load generator pinned with `taskset -c 0` (WRK_CPU):
`h2load -c 50 -m 10` for /ping over h2 (`-m 1` for the file, the 50 requests in flight of
`wrk -c50`), `wrk -t1 -c50` for HTTP/1.1. The order rotates from round to round and the idle
servers cost nothing, so noise on the shared machine hits both sides of each ratio alike. A run
with failed, errored or timed-out requests or non-2xx answers is printed with its counts and
left out of the medians; a ratio needs a clean run on both sides in the same round. The median
ratio over the rounds is read against each bar.

Beside each rate goes the server's CPU time per response: its processes' /proc times over the
run divided by the responses in it. h2load therefore runs without --warm-up-time (it would not
count the warm-up's responses); one discarded 1 s run of every target before the first round
warms up instead. The ratios from those costs move much less when the shared machine takes
turns on the server's core; where wrk, not the server, is the bottleneck (HTTP/1.1 /ping here),
they differ from the rate ratios, which are what the bars name. The table and a JSON record
(load_tests/results/http2-<timestamp>.json) carry every round.

To measure another tree's socketify (a branch under work), put it first on PYTHONPATH and this
tree after it: PYTHONPATH=/path/to/other:/path/to/this. The script prints which socketify the
servers import.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.contenders import CONTENDERS, OURS, ensure_peers
from load_tests.h2load import APT_HINT, H2loadFailed, H2loadRun
from load_tests.harness import (
    HOST,
    LOAD_TESTS,
    SERVER_CPU,
    WRK_CPU,
    ServerFailedToStart,
    child_pids,
    cpu_seconds,
    exit_on_sigterm,
    free_port,
    pinned,
    serve,
    server_env,
)
from load_tests.https_vs_http import make_certificate
from load_tests.wrk import WrkFailed, WrkRun

RESULTS = LOAD_TESTS / "results"
HYPERCORN = "hypercorn-asgi"
FILE_SIZE = 1 << 20
PING_BODY = b'{"ok":true}'
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, stream 0
SETTINGS = 0x4


@dataclass(frozen=True)
class Server:
    """One server process: a name, its plain port and, when it serves TLS too, its TLS port."""

    name: str
    argv: list[str]
    port: int
    tls_port: int | None = None


@dataclass(frozen=True)
class Target:
    """One thing loaded in every round: a path on a server over one transport with one tool."""

    key: str
    label: str
    server: str
    path: str
    transport: str  # "h2c", "h2" (TLS, ALPN) or "http/1.1"
    streams: int = 1  # h2load -m

    def url(self, server: Server) -> str:
        """Where the tool sends its requests."""
        if self.transport == "h2":
            return f"https://{HOST}:{server.tls_port}{self.path}"
        return f"http://{HOST}:{server.port}{self.path}"


@dataclass
class Sample:
    """One round of one target: its rate, and why it does not count when it does not."""

    rate: float
    problem: str | None
    result: dict[str, object]
    responses: int = 0  # over the whole run, which is what the CPU time covers
    cpu_us: float | None = None  # server CPU time per response


@dataclass
class Outcome:
    """Everything measured for one target, or why it could not be."""

    target: Target
    unavailable: str | None = None
    samples: list[Sample] = field(default_factory=list)

    def clean(self, round_index: int) -> Sample | None:
        """That round's sample when it was a clean run."""
        if self.unavailable or round_index >= len(self.samples):
            return None
        sample = self.samples[round_index]
        return None if sample.problem else sample


@dataclass(frozen=True)
class Bar:
    """A ratio of two targets' rates in the same round, and the least it may be."""

    label: str
    numerator: str
    denominator: str
    least: float


BARS = (
    Bar("/ping ours h2c ÷ Hypercorn h2c", "ping-h2c-ours", "ping-h2c-hypercorn", 3.0),
    Bar("/ping ours h2c ÷ ours HTTP/1.1", "ping-h2c-ours", "ping-http1-ours", 0.25),
    Bar("/ping ours TLS h2 ÷ ours h2c", "ping-h2-ours", "ping-h2c-ours", 0.6),
    Bar("1 MiB file ours h2c ÷ ours HTTP/1.1 sendfile", "file-h2c-ours", "file-http1-ours", 0.5),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Start the servers, probe them, run the rounds; 0 when every bar was measured."""
    args = _parse_args(argv)
    exit_on_sigterm()
    if problem := _prepare(args):
        print(problem, file=sys.stderr)
        return 2
    targets = _targets(args)
    with tempfile.TemporaryDirectory(prefix="bench-http2-") as tmp:
        directory = Path(tmp)
        data = os.urandom(FILE_SIZE)
        (directory / "file.bin").write_bytes(data)
        os.environ["STATIC_ROOT"] = str(directory)  # inherited by `socketify run`
        servers = _servers(make_certificate(directory, "ec"))
        bodies = {"/ping": PING_BODY, "/file.bin": data}
        location = _socketify_location(directory)
        commit = _commit(Path(location).parent)  # at the start: the tree may move on meanwhile
        print(_describe(args, servers, f"{location} (commit {commit})"))
        with contextlib.ExitStack() as stack:
            outcomes, pids = _start(stack, servers, targets, directory)
            for outcome in outcomes:
                if not outcome.unavailable:
                    server = servers[outcome.target.server]
                    outcome.unavailable = _check(outcome.target, server, bodies)
                if outcome.unavailable:
                    print(f"  {outcome.target.label}: NOT MEASURED: {outcome.unavailable}")
            _rounds(args, servers, pids, outcomes)
    verdicts = [_verdict(bar, outcomes, args.rounds) for bar in BARS]
    print()
    print(_table(outcomes, args.rounds))
    print()
    print(_bar_table(verdicts))
    path = _save(args, servers, location, commit, outcomes, verdicts)
    print(f"\nSaved {path}\nResults are noisy: compare ratios within one run.")
    return 0 if all(v["median"] is not None for v in verdicts) else 1


def _prepare(args: argparse.Namespace) -> str | None:
    for tool in ("h2load", "nghttp"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH; it comes with nghttp2's client tools: {APT_HINT}"
    if shutil.which("wrk") is None:
        return "wrk is not on PATH: apt-get install wrk"
    if shutil.which("openssl") is None:
        return "openssl is not on PATH (the throwaway certificate): apt-get install openssl"
    if problem := ensure_peers([CONTENDERS[HYPERCORN]], setup=args.setup):
        return problem.replace(f", or use --only {OURS}.", ".")
    if not {SERVER_CPU, WRK_CPU} <= os.sched_getaffinity(0):
        return f"the runs pin to CPUs {WRK_CPU} and {SERVER_CPU}; this process cannot use both"
    return None


def _targets(args: argparse.Namespace) -> list[Target]:
    h2 = f"h2load -c{args.connections} -m{args.streams}"
    h2_file = f"h2load -c{args.connections} -m{args.static_streams}"
    wrk = f"wrk -t1 -c{args.connections}"
    ping, file = "/ping", "/file.bin"
    return [
        Target("ping-h2c-ours", f"/ping ours h2c ({h2})", "ours", ping, "h2c", args.streams),
        Target("ping-h2c-hypercorn", f"/ping Hypercorn h2c ({h2})", HYPERCORN, ping, "h2c",
               args.streams),
        Target("ping-http1-ours", f"/ping ours HTTP/1.1 ({wrk})", "ours", ping, "http/1.1"),
        Target("ping-h2-ours", f"/ping ours TLS h2 ({h2})", "ours", ping, "h2", args.streams),
        Target("file-h2c-ours", f"1 MiB ours h2c ({h2_file})", "ours-static", file, "h2c",
               args.static_streams),
        Target("file-http1-ours", f"1 MiB ours HTTP/1.1 ({wrk})", "ours-static", file,
               "http/1.1"),
        Target("file-h2-ours", f"1 MiB ours TLS h2 ({h2_file}), for information",
               "ours-static", file, "h2", args.static_streams),
    ]  # fmt: skip


def _servers(certificate: tuple[str, str]) -> dict[str, Server]:
    def ours(name: str, app: str) -> Server:
        port, tls_port = free_port(), free_port()
        argv = [
            sys.executable, "-m", "socketify.cli", "run", app, "--workers", "1",
            "--bind", f"http://{HOST}:{port}", "--bind", f"https://{HOST}:{tls_port}",
            "--certfile", certificate[0], "--keyfile", certificate[1],
        ]  # fmt: skip
        return Server(name, pinned(argv, SERVER_CPU), port, tls_port)

    port = free_port()
    hypercorn = pinned(CONTENDERS[HYPERCORN].command(port, 1), SERVER_CPU)
    return {
        "ours": ours("ours", "load_tests.apps.ping:server"),
        "ours-static": ours("ours-static", "load_tests.apps.static_site:server"),
        HYPERCORN: Server(HYPERCORN, hypercorn, port),
    }


def _describe(args: argparse.Namespace, servers: dict[str, Server], location: str) -> str:
    return (
        f"HTTP/2 bars: {args.rounds} round(s) of {args.duration} s per target "
        f"after a 1 s warm-up of each, servers (1 worker each) on CPU {SERVER_CPU}, "
        f"h2load and wrk on CPU {WRK_CPU}\n"
        f"ours imports socketify from {location}\n"
        + "\n".join(f"  {s.name}: {' '.join(s.argv)}" for s in servers.values())
    )


def _socketify_location(cwd: Path) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", "import socketify; print(socketify.__file__)"],
        cwd=cwd,
        env=server_env(),
        capture_output=True,
        text=True,
    )
    return completed.stdout.strip() or completed.stderr.strip()


def _start(
    stack: contextlib.ExitStack, servers: dict[str, Server], targets: list[Target], cwd: Path
) -> tuple[list[Outcome], dict[str, list[int]]]:
    """Start every server (each polled on plain GET /ping); a failed start marks its targets.

    The servers run in cwd, not in this tree: `python -m` would put this tree's socketify first
    on sys.path whatever PYTHONPATH says. Also returns each server's processes whose CPU time is
    counted: the master's children (the worker; Hypercorn's also has an idle resource tracker),
    or the process itself.
    """
    failures: dict[str, str] = {}
    pids: dict[str, list[int]] = {}
    for server in servers.values():
        try:
            running = stack.enter_context(serve(server.name, server.argv, server.port, cwd=cwd))
        except ServerFailedToStart as error:
            failures[server.name] = f"the server did not start: {error}"
            continue
        pids[server.name] = child_pids(running.pid) or [running.pid]
    return [Outcome(target, failures.get(target.server)) for target in targets], pids


def _check(target: Target, server: Server, bodies: dict[str, bytes]) -> str | None:
    """Why target cannot be measured (no HTTP/2, wrong body), or None when it can."""
    expected = bodies[target.path]
    url = target.url(server)
    try:
        if target.transport == "http/1.1":
            with urllib.request.urlopen(url, timeout=5) as response:
                body = response.read()
        else:
            port = server.tls_port if target.transport == "h2" else server.port
            assert port is not None  # every h2 target is on a server with a TLS bind
            if refusal := h2_refusal(port, tls=target.transport == "h2"):
                return refusal
            fetched = subprocess.run(["nghttp", url], capture_output=True, timeout=30)
            if fetched.returncode != 0:
                return f"nghttp {url} exited with {fetched.returncode}: {fetched.stderr[-300:]!r}"
            body = fetched.stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"GET {url} failed: {error}"
    if body != expected:
        return f"GET {url} returned {len(body)} bytes, not the expected {len(expected)}"
    return None


def h2_refusal(port: int, *, tls: bool) -> str | None:
    """Why the server on port does not speak HTTP/2 (h2c by prior knowledge, or h2 by ALPN)."""
    try:
        with contextlib.ExitStack() as stack:
            sock = stack.enter_context(socket.create_connection((HOST, port), timeout=5))
            if tls:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE  # our own throwaway certificate
                context.set_alpn_protocols(["h2", "http/1.1"])
                sock = stack.enter_context(context.wrap_socket(sock, server_hostname=HOST))
                if (chosen := sock.selected_alpn_protocol()) != "h2":
                    return f"TLS ALPN chose {chosen or 'no protocol'}, not h2"
            sock.sendall(PREFACE + EMPTY_SETTINGS)
            answer = b""
            while len(answer) < 9 and (chunk := sock.recv(4096)):
                answer += chunk
    except OSError as error:
        return f"the HTTP/2 preface failed: {error}"
    if answer.startswith(b"HTTP/"):
        status = answer.split(b"\r\n", 1)[0].decode("latin-1")
        return f"answered the HTTP/2 client preface with '{status}': no HTTP/2 there"
    if len(answer) < 9:
        return f"closed the connection after the HTTP/2 preface ({answer!r})"
    if answer[3] != SETTINGS:
        return f"answered the HTTP/2 preface with a frame of type {answer[3]}, not SETTINGS"
    return None


def _rounds(
    args: argparse.Namespace,
    servers: dict[str, Server],
    pids: dict[str, list[int]],
    outcomes: list[Outcome],
) -> None:
    live = [o for o in outcomes if not o.unavailable]
    for outcome in live:  # warm-up, not recorded
        _load(outcome.target, servers, args, duration=1)
    for index in range(args.rounds):
        print(f"round {index + 1}:", flush=True)
        shift = index % len(live) if live else 0
        for outcome in live[shift:] + live[:shift]:
            target = outcome.target
            before = _cpu(pids[target.server])
            sample = _load(target, servers, args, args.duration)
            if sample.responses:
                sample.cpu_us = 1e6 * (_cpu(pids[target.server]) - before) / sample.responses
            outcome.samples.append(sample)
            cost = f"{sample.cpu_us:8.1f} us CPU/req" if sample.cpu_us else ""
            note = f"  !! {sample.problem}" if sample.problem else ""
            print(f"  {target.label:58} {sample.rate:>10,.0f} req/s {cost}{note}", flush=True)


def _cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def _load(
    target: Target,
    servers: dict[str, Server],
    args: argparse.Namespace,
    duration: int,
) -> Sample:
    url = target.url(servers[target.server])
    try:
        if target.transport == "http/1.1":
            wrk = WrkRun(connections=args.connections, duration=duration, cpu=WRK_CPU).run(url)
            problem = None
            if wrk.non_2xx or wrk.socket_errors.total:
                problem = f"{wrk.non_2xx} non-2xx/3xx, socket errors {wrk.socket_errors}"
            return Sample(wrk.requests_per_sec, problem, asdict(wrk), wrk.requests)
        run = H2loadRun(args.connections, target.streams, duration, warmup=0, cpu=WRK_CPU)
        h2 = run.run(url)
        problem = h2.problem
        if h2.protocol != target.transport and not problem:
            problem = f"negotiated {h2.protocol}, not {target.transport}"
        return Sample(h2.requests_per_sec, problem, asdict(h2), h2.done)
    except (WrkFailed, H2loadFailed) as error:
        return Sample(0.0, str(error), {})


def _verdict(bar: Bar, outcomes: list[Outcome], rounds: int) -> dict[str, object]:
    by_key = {o.target.key: o for o in outcomes}
    top, bottom = by_key[bar.numerator], by_key[bar.denominator]
    ratios, cpu_ratios = [], []
    for index in range(rounds):
        a, b = top.clean(index), bottom.clean(index)
        if a is None or b is None or not b.rate:
            continue
        ratios.append(a.rate / b.rate)
        if a.cpu_us and b.cpu_us:  # oriented like the rates: their cost over ours
            cpu_ratios.append(b.cpu_us / a.cpu_us)
    median = statistics.median(ratios) if ratios else None
    if median is None:
        reasons = [
            f"{o.target.label}: {o.unavailable or 'no clean round'}"
            for o in (top, bottom)
            if o.unavailable or all(s.problem for s in o.samples)
        ]
        verdict = "NOT MEASURED (" + "; ".join(reasons or ["no round clean on both sides"]) + ")"
    else:
        verdict = "PASS" if median >= bar.least else "MISS"
    return {
        "bar": bar.label,
        "numerator": bar.numerator,
        "denominator": bar.denominator,
        "least": bar.least,
        "ratios": ratios,
        "median": median,
        "cpu_ratios": cpu_ratios,
        "cpu_median": statistics.median(cpu_ratios) if cpu_ratios else None,
        "verdict": verdict,
    }


def _table(outcomes: list[Outcome], rounds: int) -> str:
    head = f"{'req/s':60}" + "".join(f"{f'round {i + 1}':>11}" for i in range(rounds))
    lines = [head + f"{'median':>11}"]
    for outcome in outcomes:
        line = f"{outcome.target.label:60}"
        if outcome.unavailable:
            lines.append(line + "  not measured")
            continue
        for index in range(rounds):
            sample = outcome.samples[index]
            line += f"{sample.rate:>10,.0f}" + ("!" if sample.problem else " ")
        clean = [s.rate for s in outcome.samples if not s.problem]
        line += f"{statistics.median(clean):>10,.0f}" if clean else f"{'—':>10}"
        lines.append(line)
    lines.append("! = the run had errors (printed above) and is left out of the median and ratios")
    return "\n".join(lines)


def _bar_table(verdicts: list[dict[str, object]]) -> str:
    ratios = {str(v["bar"]): " ".join(f"{r:.2f}" for r in v["ratios"]) for v in verdicts}
    width = max(6, *map(len, ratios.values()))
    lines = [f"{'bar':46} {'median':>7} {'least':>6}  {'rounds':{width}} {'by CPU':>7}  verdict"]
    for v in verdicts:
        median = f"{v['median']:.2f}x" if v["median"] is not None else "—"
        by_cpu = f"{v['cpu_median']:.2f}x" if v["cpu_median"] is not None else "—"
        lines.append(
            f"{v['bar']:46} {median:>7} {v['least']:>5.2f}x  {ratios[str(v['bar'])]:{width}} "
            f"{by_cpu:>7}  {v['verdict']}"
        )
    lines.append(
        "median: of the per-round req/s ratios; by CPU: the same ratio from server CPU time per "
        "response (steadier on a busy machine)"
    )
    return "\n".join(lines)


def _save(
    args: argparse.Namespace,
    servers: dict[str, Server],
    location: str,
    commit: str | None,
    outcomes: list[Outcome],
    verdicts: list[dict[str, object]],
) -> Path:
    record = {
        "scenario": "http2",
        "meta": {
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "rounds": args.rounds,
            "duration_s": args.duration,
            "warmup_s": 1,
            "connections": args.connections,
            "streams": args.streams,
            "static_streams": args.static_streams,
            "file_bytes": FILE_SIZE,
            "pinning": f"servers cpu {SERVER_CPU}, h2load/wrk cpu {WRK_CPU}",
            "socketify": location,
            "socketify_commit": commit,
            "h2load": _version(["h2load", "--version"]),
            "wrk": _version(["wrk", "-v"]),
            "cpu_cores": os.cpu_count(),
            "python": platform.python_version(),
            "kernel": platform.release(),
        },
        "servers": {name: server.argv for name, server in servers.items()},
        "targets": [
            {
                **asdict(o.target),
                "url": o.target.url(servers[o.target.server]),
                "unavailable": o.unavailable,
                "rounds": [asdict(s) for s in o.samples],
            }
            for o in outcomes
        ],
        "bars": verdicts,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"http2-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def _commit(directory: Path) -> str | None:
    """The commit of the tree that socketify came from, "+dirty" when it has changes."""
    git = ["git", "-C", str(directory)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return None
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True)
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def _version(argv: list[str]) -> str:
    completed = subprocess.run(argv, capture_output=True, text=True)
    return (completed.stdout or completed.stderr).strip().splitlines()[0]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be ≥ 1")
    return value


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    option = parser.add_argument
    option("--rounds", type=_positive, default=3, help="rounds (default 3)")
    option("--duration", type=_positive, default=8, help="seconds per target per round")
    option("--connections", type=_positive, default=50, help="h2load -c and wrk -c (50)")
    option("--streams", type=_positive, default=10, help="h2load -m for /ping (default 10)")
    option("--static-streams", type=_positive, default=1, help="h2load -m for the file (1)")
    option("--setup", action="store_true", help="install Hypercorn into load_tests/.venv first")
    option("--results-dir", type=Path, default=RESULTS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
