"""Serve one 1 MiB file with ours (1 worker) and with nginx; print both and the ratio.

Theory of operation: a temporary directory gets `file.bin` (1 MiB of random bytes). Each round
starts ours (`socketify run load_tests.apps.static_site:server --workers 1`) and then nginx
(one worker process, `sendfile on`, access log off) in turn, each pinned to CPU 1 with
`taskset`, polls GET /ping until it answers, checks that GET /file.bin returns the exact file,
and runs `wrk -t1 -c50 -d8s` pinned to CPU 0. Rounds alternate the two servers so drifting
machine load hits both; the median of the rounds is reported. On a busy shared machine use
`--paired`: both servers run at once on CPU 1 and two wrk drive them at the same time, so
the ratio of their rates is the ratio of their costs whatever else runs. nginx is never installed
silently: when it is missing the script says how to install it (`apt-get install -y
nginx-light`) and exits with status 2.

    python load_tests/static_vs_nginx.py [--rounds 3] [--duration 8] [--connections 50] [--paired]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import HOST, SERVER_CPU, WRK_CPU, free_port, pinned, serve
from load_tests.wrk import WrkResult, WrkRun

FILE_SIZE = 1 << 20
APT_HINT = "apt-get install -y nginx-light"
NGINX_CONF = """\
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    types {{ application/octet-stream bin; }}
    server {{
        listen {host}:{port} reuseport;
        root {root};
        location = /ping {{ default_type application/json; return 200 '{{"ok":true}}'; }}
    }}
}}
"""


def _ours(port: int) -> list[str]:
    cli = [sys.executable, "-m", "socketify.cli"]
    app = "load_tests.apps.static_site:server"
    return pinned([*cli, "run", app, "--workers", "1", "--bind", f"{HOST}:{port}"], SERVER_CPU)


def _nginx(port: int, root: Path, prefix: Path) -> list[str]:
    conf = prefix / f"nginx-{port}.conf"
    conf.write_text(NGINX_CONF.format(prefix=prefix, host=HOST, port=port, root=root))
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    return pinned([nginx, "-p", str(prefix), "-c", str(conf)], SERVER_CPU)


def _measure(name: str, argv: list[str], port: int, expected: bytes, run: WrkRun) -> float:
    with serve(name, argv, port):
        url = f"http://{HOST}:{port}/file.bin"
        with urllib.request.urlopen(url, timeout=5) as response:
            if response.read() != expected:
                raise SystemExit(f"{name} did not return the file intact")
        WrkRun(connections=run.connections, duration=1, cpu=WRK_CPU).run(url)  # warm up
        result = run.run(url)
        if result.non_2xx or result.socket_errors.total:
            print(f"  {name}: {result.non_2xx} non-2xx, {result.socket_errors}", flush=True)
        rate = result.requests_per_sec
        gib = result.transfer_bytes_per_sec / (1 << 30)
        print(f"  {name:6} {rate:10.0f} req/s  {gib:6.2f} GiB/s  p99 {result.p99_ms:.1f} ms")
        return rate


def _check(name: str, port: int, expected: bytes) -> str:
    url = f"http://{HOST}:{port}/file.bin"
    with urllib.request.urlopen(url, timeout=5) as response:
        if response.read() != expected:
            raise SystemExit(f"{name} did not return the file intact")
    return url


def _together(run: WrkRun, urls: dict[str, str]) -> dict[str, WrkResult]:
    """One wrk per URL, all at the same time; results by name."""
    results: dict[str, WrkResult] = {}
    threads = [
        threading.Thread(target=lambda n, u: results.__setitem__(n, run.run(u)), args=item)
        for item in urls.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(results) != len(urls):
        raise SystemExit("a wrk run failed")
    return results


def _paired(root: Path, prefix: Path, data: bytes, run: WrkRun, rounds: int) -> list[float]:
    """Both servers up at once; each round drives them together. Returns ours/nginx ratios."""
    ratios = []
    with contextlib.ExitStack() as stack:
        port = free_port()
        stack.enter_context(serve("ours", _ours(port), port))
        urls = {"ours": _check("ours", port, data)}
        port = free_port()
        stack.enter_context(serve("nginx", _nginx(port, root, prefix), port))
        urls["nginx"] = _check("nginx", port, data)
        warm = WrkRun(connections=run.connections, duration=1, cpu=WRK_CPU)
        _together(warm, urls)
        for number in range(1, rounds + 1):
            results = _together(run, urls)
            ours, nginx = results["ours"].requests_per_sec, results["nginx"].requests_per_sec
            ratios.append(ours / nginx)
            print(f"round {number}: ours {ours:.0f} req/s, nginx {nginx:.0f} req/s, "
                  f"ratio {ours / nginx:.2f}", flush=True)  # fmt: skip
    return ratios


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison; 0 when both were measured, 2 when nginx is missing."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--paired", action="store_true", help="run both servers at once")
    args = parser.parse_args(argv)
    if shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"):
        print(f"nginx is not installed; to compare against it run:\n  {APT_HINT}", file=sys.stderr)
        return 2
    run = WrkRun(connections=args.connections, duration=args.duration, cpu=WRK_CPU)
    ours: list[float] = []
    theirs: list[float] = []
    with tempfile.TemporaryDirectory(prefix="static-bench-") as tmp:
        os.chmod(tmp, 0o755)  # nginx started as root serves as an unprivileged user
        root = Path(tmp) / "site"
        root.mkdir(mode=0o755)
        data = os.urandom(FILE_SIZE)
        (root / "file.bin").write_bytes(data)
        os.chmod(root / "file.bin", 0o644)
        prefix = Path(tmp) / "nginx"
        prefix.mkdir()
        os.environ["STATIC_ROOT"] = str(root)  # inherited by `socketify run`
        print(
            f"GET /file.bin ({FILE_SIZE} bytes), server on CPU {SERVER_CPU}, "
            f"wrk -t1 -c{args.connections} -d{args.duration}s on CPU {WRK_CPU}"
        )
        if args.paired:
            ratios = _paired(root, prefix, data, run, args.rounds)
            print(f"median ratio ours/nginx, side by side: {statistics.median(ratios):.2f} "
                  "(bar: >= 0.80)")  # fmt: skip
            return 0
        for number in range(1, args.rounds + 1):
            print(f"round {number}:", flush=True)
            ours.append(_measure("ours", _ours(port := free_port()), port, data, run))
            nginx = _nginx(port := free_port(), root, prefix)
            theirs.append(_measure("nginx", nginx, port, data, run))
    ours_rate, nginx_rate = statistics.median(ours), statistics.median(theirs)
    print(
        f"median: ours {ours_rate:.0f} req/s, nginx {nginx_rate:.0f} req/s, "
        f"ratio {ours_rate / nginx_rate:.2f} (bar: >= 0.80)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
