"""The HTTPS bar: keep-alive /ping over TLS vs plain HTTP, and the new-handshake rate.

    python load_tests/https_vs_http.py [--rounds 3] [--duration 8] [--connections 50]
                                       [--key ec|rsa] [--handshake-clients 4] [--skip-handshakes]
                                       [--peer [--setup]]

Two `socketify run load_tests.apps.ping:server --workers 1` servers run side by side, one plain
and one with `--certfile/--keyfile` (a fresh self-signed certificate from the `openssl` CLI),
both pinned with `taskset -c 1`; wrk runs as `taskset -c 0 wrk -t1`. Each round loads the plain
one, then the TLS one (the idle one costs nothing), and prints both rates and their ratio; the
median ratio is read against the bar (HTTPS >= 0.6x HTTP). wrk negotiates TLS 1.3 and
reuses each connection, so this measures record encryption, not handshakes.

`--peer` adds uvicorn (httptools, uvloop, the raw ASGI app of `run_http.py`) serving the same
certificate with one worker on the same core, measured over TLS in every round right after
ours, so the record says how our HTTPS compares with a peer's (`--setup` installs it into
load_tests/.venv first, as `run_http.py --setup` does). The rounds go to
load_tests/results/https-vs-http-*.json, which `load_tests/charts.py` draws.

Handshakes: `--handshake-clients` processes of `openssl s_time -new -tls1_3` (a full handshake
per connection, no resumption) run together on CPU 0 against the TLS server. The rate is the
sum of their connections per second; the server worker's CPU use over the same window tells
who the bottleneck was: near 100% means the server, clearly less means the clients.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from load_tests.contenders import CONTENDERS, ensure_peers
from load_tests.harness import (
    HOST,
    PING_PATH,
    REPO_ROOT,
    SERVER_CPU,
    WRK_CPU,
    child_pids,
    free_port,
    pinned,
    stop,
)
from load_tests.wrk import WrkRun

APP = "load_tests.apps.ping:server"
BAR = 0.6
READY_TIMEOUT = 20.0
PEER = "uvicorn-asgi"
RESULTS = Path(__file__).resolve().parent / "results"
_S_TIME = re.compile(r"(\d+) connections in [\d.]+ real seconds")
_TICKS = os.sysconf("SC_CLK_TCK")


def make_certificate(directory: Path, key: str) -> tuple[str, str]:
    """A self-signed certificate for localhost/127.0.0.1; `key` is "ec" (P-256) or "rsa"."""
    cert, private = directory / "cert.pem", directory / "key.pem"
    new_key = ["-newkey", "rsa:2048"] if key == "rsa" else ["-newkey", "ec"]
    if key != "rsa":
        new_key += ["-pkeyopt", "ec_paramgen_curve:P-256"]
    subprocess.run(
        ["openssl", "req", "-x509", *new_key, "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(private), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return str(cert), str(private)


@contextlib.contextmanager
def server(port: int, tls: tuple[str, str] | None) -> Iterator[subprocess.Popen[bytes]]:
    """Our /ping app with one worker pinned to SERVER_CPU, until the block exits."""
    argv = [sys.executable, "-m", "socketify.cli", "run", APP, "--workers", "1",
            "--bind", f"{HOST}:{port}"]  # fmt: skip
    if tls is not None:
        argv += ["--certfile", tls[0], "--keyfile", tls[1]]
    with running(argv, _url(port, tls is not None)) as process:
        yield process


@contextlib.contextmanager
def peer_server(port: int, tls: tuple[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """uvicorn's /ping over TLS, one process pinned to SERVER_CPU, until the block exits."""
    tls_args = ["--ssl-certfile", tls[0], "--ssl-keyfile", tls[1]]
    argv = [*CONTENDERS[PEER].command(port, 1), *tls_args]
    with running(argv, _url(port, True)) as process:
        yield process


@contextlib.contextmanager
def running(argv: list[str], url: str) -> Iterator[subprocess.Popen[bytes]]:
    """`argv` pinned to SERVER_CPU in its own session, from the first 200 on `url` on."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            pinned(argv, SERVER_CPU),
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_ready(process, url, log)
            yield process
        finally:
            stop(process)


def _url(port: int, https: bool) -> str:
    return f"{'https' if https else 'http'}://{HOST}:{port}{PING_PATH}"


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: IO[bytes]) -> None:
    unverified = ssl._create_unverified_context()  # our own throwaway certificate
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise SystemExit(f"{url}: server exited:\n{log.read().decode(errors='replace')}")
        try:
            with urllib.request.urlopen(url, timeout=1, context=unverified) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{url}: no 200 after {READY_TIMEOUT:.0f} s")


def wrk(url: str, duration: int, connections: int, worker: int) -> tuple[float, float]:
    """(req/s, worker CPU microseconds per request) of one pinned wrk run.

    CPU per request is the figure that survives a busy machine: req/s drops when other
    processes take turns on the server's core, the cost of each request does not.
    """
    cpu_before = cpu_seconds(worker)
    result = WrkRun(connections=connections, duration=duration, cpu=WRK_CPU).run(url)
    used = cpu_seconds(worker) - cpu_before
    if result.non_2xx or result.socket_errors.total:
        raise SystemExit(f"{url}: {result.non_2xx} non-2xx, socket errors {result.socket_errors}")
    return result.requests_per_sec, 1e6 * used / max(result.requests, 1)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def handshakes(port: int, clients: int, duration: int, worker: int) -> tuple[float, float]:
    """(full TLS 1.3 handshakes per second, share of the time the worker was on a CPU)."""
    argv = ["openssl", "s_time", "-connect", f"{HOST}:{port}", "-new", "-tls1_3",
            "-time", str(duration)]  # fmt: skip
    cpu_before, started = cpu_seconds(worker), time.monotonic()
    runs = [
        subprocess.Popen(pinned(argv, WRK_CPU), stdout=subprocess.PIPE, text=True)
        for _ in range(clients)
    ]
    outputs = [run.communicate()[0] for run in runs]
    elapsed = time.monotonic() - started
    share = (cpu_seconds(worker) - cpu_before) / elapsed
    total = 0
    for output in outputs:
        # s_time rounds its own wall time to whole seconds: count connections, time them here.
        match = _S_TIME.search(output)
        if match is None:
            raise SystemExit(f"unexpected `openssl s_time` output:\n{output}")
        total += int(match[1])
    return total / elapsed, share


def keep_alive_rounds(
    args: argparse.Namespace, urls: dict[str, str], workers: dict[str, int]
) -> dict[str, list[dict[str, float]]]:
    """wrk on plain HTTP, HTTPS (and the peer's HTTPS), `args.rounds` times; prints the rows
    and the verdict, and returns each target's (req/s, worker us per request) per round."""
    for name, url in urls.items():
        wrk(url, 1, args.connections, workers[name])  # warm-up
    print(f"/ping, 1 worker on CPU {SERVER_CPU}, wrk -t1 -c{args.connections} -d{args.duration}s")
    print(f"on CPU {WRK_CPU}, {args.key} certificate, TLS 1.3 (wrk's choice), keep-alive")
    peer_header = f"  {PEER} https  ours/peer" if PEER in urls else ""
    print(
        "round  http req/s  https req/s  ratio  http us/req  https us/req  cpu ratio" + peer_header
    )
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in urls}
    ratios, cpu_ratios, peer_ratios = [], [], []
    for round_ in range(1, args.rounds + 1):
        for name, url in urls.items():
            rate, cost = wrk(url, args.duration, args.connections, workers[name])
            rounds[name].append({"requests_per_sec": rate, "worker_us_per_request": cost})
        plain, secure = rounds["http"][-1], rounds["https"][-1]
        ratios.append(secure["requests_per_sec"] / plain["requests_per_sec"])
        cpu_ratios.append(plain["worker_us_per_request"] / secure["worker_us_per_request"])
        line = (
            f"{round_:>5} {plain['requests_per_sec']:>11,.0f} {secure['requests_per_sec']:>12,.0f}"
            f" {ratios[-1]:>5.2f}x {plain['worker_us_per_request']:>12.1f}"
            f" {secure['worker_us_per_request']:>13.1f} {cpu_ratios[-1]:>9.2f}x"
        )
        if PEER in urls:
            peer = rounds[PEER][-1]["requests_per_sec"]
            peer_ratios.append(secure["requests_per_sec"] / peer)
            line += f" {peer:>18,.0f} {peer_ratios[-1]:>9.2f}x"
        print(line)
    median = statistics.median(ratios)
    verdict = "PASS" if median >= BAR else "MISS"
    print(
        f"median https/http: {median:.2f}x req/s (bar {BAR}x) {verdict}; "
        f"{statistics.median(cpu_ratios):.2f}x by worker CPU per request"
    )
    if peer_ratios:
        print(f"median ours/{PEER} over TLS: {statistics.median(peer_ratios):.2f}x req/s")
    return rounds


def save_record(args: argparse.Namespace, rounds: dict[str, list[dict[str, float]]]) -> Path:
    """Write the rounds to results/https-vs-http-<time>.json; return its path."""
    started = datetime.datetime.now(datetime.UTC)
    record = {
        "scenario": "https-vs-http",
        "started": started.isoformat(timespec="seconds"),
        "connections": args.connections,
        "duration_s": args.duration,
        "rounds": args.rounds,
        "key": args.key,
        "pinning": f"servers cpu {SERVER_CPU}, wrk cpu {WRK_CPU}",
        "cpu_cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "bar": BAR,
        "targets": rounds,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"https-vs-http-{started:%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def handshake_report(args: argparse.Namespace, port: int, worker: int) -> None:
    """Measure and print the new-handshake rate and who limited it."""
    clients = args.handshake_clients
    rate, share = handshakes(port, clients, args.duration, worker)
    bound = "server-bound" if share >= 0.9 else "client-bound"
    print(
        f"new TLS 1.3 handshakes, no resumption ({args.key} key, {clients} x "
        f"`openssl s_time -new` on CPU {WRK_CPU}): {rate:,.0f}/s, {bound}"
    )
    print(
        f"  the worker was on a CPU {share:.0%} of the time: {1000 * share / rate:.2f} ms "
        f"per handshake, a ceiling of ~{rate / share:,.0f}/s per worker"
    )


def main() -> int:
    """Run the rounds, then the handshake measurement, and print the verdicts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--key", choices=("ec", "rsa"), default="ec")
    parser.add_argument("--handshake-clients", type=int, default=4)
    parser.add_argument("--skip-handshakes", action="store_true")
    parser.add_argument("--peer", action="store_true", help=f"also measure {PEER} over TLS")
    parser.add_argument("--setup", action="store_true", help="install the peer first")
    args = parser.parse_args()
    if args.peer and (problem := ensure_peers([CONTENDERS[PEER]], setup=args.setup)):
        raise SystemExit(problem)
    plain_port, tls_port, peer_port = free_port(), free_port(), free_port()
    with tempfile.TemporaryDirectory() as directory, contextlib.ExitStack() as stack:
        cert = make_certificate(Path(directory), args.key)
        plain_server = stack.enter_context(server(plain_port, None))
        tls_server = stack.enter_context(server(tls_port, cert))
        urls = {"http": _url(plain_port, False), "https": _url(tls_port, True)}
        (plain_worker,) = child_pids(plain_server.pid)
        (tls_worker,) = child_pids(tls_server.pid)
        workers = {"http": plain_worker, "https": tls_worker}
        if args.peer:
            peer = stack.enter_context(peer_server(peer_port, cert))
            urls[PEER], workers[PEER] = _url(peer_port, True), peer.pid  # one process
        rounds = keep_alive_rounds(args, urls, workers)
        print(f"Saved {save_record(args, rounds)}")
        if not args.skip_handshakes:
            handshake_report(args, tls_port, tls_worker)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
