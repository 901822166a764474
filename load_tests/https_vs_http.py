"""The HTTPS bar: keep-alive /ping over TLS vs plain HTTP, and the new-handshake rate.

    python load_tests/https_vs_http.py [--rounds 3] [--duration 8] [--connections 50]
                                       [--key ec|rsa] [--handshake-clients 4] [--skip-handshakes]

Two `socketify run load_tests.apps.ping:server --workers 1` servers run side by side, one plain
and one with `--certfile/--keyfile` (a fresh self-signed certificate from the `openssl` CLI),
both pinned with `taskset -c 1`; wrk runs as `taskset -c 0 wrk -t1`. Each round loads the plain
one, then the TLS one (the idle one costs nothing), and prints both rates and their ratio; the
median ratio is read against the bar (HTTPS >= 0.6x HTTP). wrk negotiates TLS 1.3 and
reuses each connection, so this measures record encryption, not handshakes.

Handshakes: `--handshake-clients` processes of `openssl s_time -new -tls1_3` (a full handshake
per connection, no resumption) run together on CPU 0 against the TLS server. The rate is the
sum of their connections per second; the server worker's CPU use over the same window tells
who the bottleneck was: near 100% means the server, clearly less means the clients.
"""

from __future__ import annotations

import argparse
import contextlib
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
            _wait_ready(process, _url(port, tls is not None), log)
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
    args: argparse.Namespace, urls: tuple[str, str], workers: tuple[int, int]
) -> None:
    """wrk on plain HTTP then HTTPS, `args.rounds` times; prints the rows and the verdict."""
    for url, worker in zip(urls, workers, strict=True):
        wrk(url, 1, args.connections, worker)  # warm-up
    print(f"/ping, 1 worker on CPU {SERVER_CPU}, wrk -t1 -c{args.connections} -d{args.duration}s")
    print(f"on CPU {WRK_CPU}, {args.key} certificate, TLS 1.3 (wrk's choice), keep-alive")
    print("round  http req/s  https req/s  ratio  http us/req  https us/req  cpu ratio")
    ratios, cpu_ratios = [], []
    for round_ in range(1, args.rounds + 1):
        (plain, plain_cost), (secure, secure_cost) = (
            wrk(url, args.duration, args.connections, worker)
            for url, worker in zip(urls, workers, strict=True)
        )
        ratios.append(secure / plain)
        cpu_ratios.append(plain_cost / secure_cost)
        print(
            f"{round_:>5} {plain:>11,.0f} {secure:>12,.0f} {ratios[-1]:>5.2f}x"
            f" {plain_cost:>12.1f} {secure_cost:>13.1f} {cpu_ratios[-1]:>9.2f}x"
        )
    median = statistics.median(ratios)
    verdict = "PASS" if median >= BAR else "MISS"
    print(
        f"median https/http: {median:.2f}x req/s (bar {BAR}x) {verdict}; "
        f"{statistics.median(cpu_ratios):.2f}x by worker CPU per request"
    )


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
    args = parser.parse_args()
    plain_port, tls_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as directory:
        cert = make_certificate(Path(directory), args.key)
        with server(plain_port, None) as plain_server, server(tls_port, cert) as tls_server:
            (plain_worker,) = child_pids(plain_server.pid)
            (tls_worker,) = child_pids(tls_server.pid)
            urls = (_url(plain_port, False), _url(tls_port, True))
            keep_alive_rounds(args, urls, (plain_worker, tls_worker))
            if not args.skip_handshakes:
                handshake_report(args, tls_port, tls_worker)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
