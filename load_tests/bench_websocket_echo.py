"""WebSocket echo benchmark: ours vs Node `ws` vs Python `websockets`, same run.

Theory of operation: each server in turn runs 1 worker (or 1 process) pinned to CPU 1 with
taskset, on a free port, polled until GET /ping answers 200. The load generator
(`bench_websocket_client`: raw sockets, precomputed masked frames, epoll) runs in its own
processes pinned to CPU 0, opens 128 connections to the echo route, and keeps exactly one
64-byte text message in flight on each (strict ping-pong) for a warm-up and then the
measured period. The table gives round trips per second, RTT percentiles, how busy the client
was (near 100% means the figure is the client's ceiling, not the server's) and ours÷them.
Bars: ≥ 0.8x Node ws, ≥ 1.4x websockets. Results go to load_tests/results/ as JSON.

Peers are never project dependencies: `--setup` installs `ws` with npm into
load_tests/.peers/node and `websockets` into load_tests/.venv.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.bench_websocket_client import EchoLoad, echo_load
from load_tests.harness import (
    HOST,
    LOAD_TESTS,
    SERVER_CPU,
    WRK_CPU,
    ServerFailedToStart,
    child_pids,
    exit_on_sigterm,
    free_port,
    pinned,
    serve,
)

RESULTS = LOAD_TESTS / "results"
NODE_PEER = LOAD_TESTS / ".peers" / "node"
VENV_PYTHON = LOAD_TESTS / ".venv" / "bin" / "python"
OURS = "socketify"
BARS = {"node-ws": 0.8, "python-websockets": 1.4}


@dataclass(frozen=True)
class EchoServer:
    """One contender: its argv for a port, and the route that echoes."""

    name: str
    description: str
    command: Callable[[int], list[str]]
    path: str = "/pong"


def _ours(port: int) -> list[str]:
    script = Path(sys.executable).parent / "socketify"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    return [*cli, "run", "load_tests.apps.ws_echo:server", "--workers", "1", "--bind",
            f"{HOST}:{port}"]  # fmt: skip


def _node(port: int) -> list[str]:
    return ["node", str(LOAD_TESTS / "apps" / "ws_echo_node.js"), str(port)]


def _websockets(port: int) -> list[str]:
    return [str(VENV_PYTHON), "-m", "load_tests.apps.ws_echo_websockets", str(port)]


CONTENDERS = {
    s.name: s
    for s in (
        EchoServer(OURS, "socketify run, 1 worker, pulse.upgrade + send_text", _ours),
        EchoServer("node-ws", "node + ws@8 (perMessageDeflate off), 1 process", _node),
        EchoServer("python-websockets", "websockets asyncio serve(), 1 process", _websockets),
    )
}


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each selected server; exit 0 when all were measured."""
    args = _parse_args(argv)
    exit_on_sigterm()
    if args.setup:
        setup()
    servers = [CONTENDERS[name] for name in args.only or CONTENDERS]
    if problem := _missing(servers):
        print(f"{problem}\nRun again with --setup (installs the peers outside the project).")
        return 2
    os.environ["NODE_PATH"] = str(NODE_PEER / "node_modules")
    payload = b"x" * args.size
    print(
        f"Echo: {args.connections} connections x {args.size}-byte text, strict ping-pong, "
        f"{args.duration} s after {args.warmup} s warm-up; server on CPU {SERVER_CPU}, "
        f"{args.client_processes} client process(es) on CPU {WRK_CPU}; {args.rounds} round(s)"
    )
    rows: dict[str, list[tuple[EchoLoad, float]]] = {s.name: [] for s in servers}
    errors: dict[str, str] = {}
    for round_no in range(args.rounds):
        for server in servers:
            if server.name in errors:
                continue
            print(f"  round {round_no + 1}: {server.name} ...", end=" ", flush=True)
            try:
                load, server_cpu = measure(server, args, payload)
            except (ServerFailedToStart, RuntimeError, OSError) as error:
                errors[server.name] = str(error)
                print(f"FAILED: {error}")
                continue
            rows[server.name].append((load, server_cpu))
            print(
                f"{load.per_second:,.0f} msg/s, server {_us_per_msg(load, server_cpu):.1f} µs "
                f"CPU/msg, client CPU {_client_busy(load):.0%}"
            )
    record = _record(args, rows, errors)
    print()
    print(render_table(record))
    RESULTS.mkdir(exist_ok=True)
    stem = f"ws-echo-c{args.connections}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    path = RESULTS / f"{stem}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nSaved {path}\nResults are noisy: compare ratios within one run.")
    return 1 if errors else 0


def measure(server: EchoServer, args: argparse.Namespace, payload: bytes) -> tuple[EchoLoad, float]:
    """Start one server pinned to SERVER_CPU, load it (optionally profiled), stop it.

    Also returns the CPU seconds the server's processes used meanwhile: CPU time per
    message does not depend on how much of its core the server got on a busy machine.
    """
    port = free_port()
    with serve(server.name, pinned(server.command(port), SERVER_CPU), port) as running:
        profiler = None
        if args.py_spy and server.name == OURS:
            worker = (child_pids(running.pid) or [running.pid])[0]
            profiler = subprocess.Popen(
                ["py-spy", "record", "-p", str(worker), "-o", args.py_spy, "-r", "200",
                 "-d", str(int(args.warmup + args.duration)), "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        pids = [running.pid, *child_pids(running.pid)]
        cpu_before = sum(map(cpu_seconds, pids))
        load = echo_load(
            port,
            server.path,
            connections=args.connections,
            seconds=args.duration,
            warmup=args.warmup,
            payload=payload,
            processes=args.client_processes,
            cpus=[WRK_CPU],
        )
        server_cpu = sum(map(cpu_seconds, pids)) - cpu_before
        if profiler is not None:
            profiler.wait(30)
        return load, server_cpu


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of pid so far (/proc/<pid>/stat, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup() -> None:
    """Install the peers: ws into load_tests/.peers/node, websockets into load_tests/.venv."""
    print("Installing ws (npm) into load_tests/.peers/node and websockets into load_tests/.venv")
    NODE_PEER.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "ws@8"], cwd=NODE_PEER,
                   check=True)  # fmt: skip
    if not VENV_PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV_PYTHON.parents[1])], check=True)
    subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", "websockets"], check=True)  # fmt: skip


def render_table(record: dict) -> str:
    """One row per server (median round): msg/s, RTTs, CPU per message, ours÷them, the bar."""
    header = ["server", "msg/s", "avg ms", "p50 ms", "p99 ms", "server µs CPU/msg",
              "client CPU", "ours÷them msg/s", "ours÷them CPU", "bar"]  # fmt: skip
    lines = [header]
    for name, row in record["servers"].items():
        if "error" in row:
            lines.append([name, "FAILED", *[""] * 7, row["error"][:40]])
            continue
        ratio = row.get("ours_over_them")
        cpu_ratio = row.get("ours_over_them_cpu")
        bar = BARS.get(name)
        verdict = ""
        if bar is not None and ratio is not None:
            verdict = f"≥{bar}: msg/s " + ("met" if ratio >= bar else "MISSED")
            verdict += ", CPU " + ("met" if cpu_ratio >= bar else "MISSED")
        lines.append([
            name, f"{row['msgs_per_sec']:,.0f}", f"{row['avg_ms']:.2f}", f"{row['p50_ms']:.2f}",
            f"{row['p99_ms']:.2f}", f"{row['server_us_per_msg']:.1f}", f"{row['client_cpu']:.0%}",
            "" if ratio is None else f"{ratio:.2f}",
            "" if cpu_ratio is None else f"{cpu_ratio:.2f}", verdict,
        ])  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths,
           strict=True))) for line in lines]  # fmt: skip
    out.insert(1, "-" * len(out[0]))
    legend = (
        "ours÷them msg/s: our round trips/s over theirs, same round, median of rounds.\n"
        "ours÷them CPU: their server CPU µs per message over ours (how many of our messages\n"
        "fit in the CPU one of theirs takes); steadier than msg/s on a shared machine."
    )
    return "\n".join(out) + "\n" + legend


def _record(
    args: argparse.Namespace,
    rows: dict[str, list[tuple[EchoLoad, float]]],
    errors: dict[str, str],
) -> dict:
    servers: dict[str, dict] = {}
    for name, loads in rows.items():
        if name in errors or not loads:
            servers[name] = {"error": errors.get(name, "not measured")}
            continue
        median, _ = sorted(loads, key=lambda pair: pair[0].per_second)[len(loads) // 2]
        servers[name] = {
            "msgs_per_sec": median.per_second,
            "rounds_msgs_per_sec": [load.per_second for load, _ in loads],
            "messages": median.messages,
            "avg_ms": median.avg_ms,
            "p50_ms": median.percentile(50),
            "p99_ms": median.percentile(99),
            "server_us_per_msg": statistics.median(_us_per_msg(load, c) for load, c in loads),
            "rounds_server_us_per_msg": [_us_per_msg(load, c) for load, c in loads],
            "client_cpu": _client_busy(median),
        }
    ours = rows.get(OURS) or []
    for name, loads in rows.items():
        if name == OURS or not ours or not loads or name in errors:
            continue
        pairs = list(zip(ours, loads, strict=False))
        per_round = [a.per_second / b.per_second for (a, _), (b, _) in pairs]
        cpu_round = [_us_per_msg(b, cb) / _us_per_msg(a, ca) for (a, ca), (b, cb) in pairs]
        servers[name]["ours_over_them"] = statistics.median(per_round)
        servers[name]["ours_over_them_rounds"] = per_round
        servers[name]["ours_over_them_cpu"] = statistics.median(cpu_round)
        servers[name]["ours_over_them_cpu_rounds"] = cpu_round
    return {
        "scenario": "websocket-echo",
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "connections": args.connections,
        "payload_bytes": args.size,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "rounds": args.rounds,
        "client": f"load_tests/bench_websocket_client.py, {args.client_processes} process(es)",
        "pinning": f"server cpu {SERVER_CPU}, client cpu {WRK_CPU}",
        "bars": BARS,
        "cpu_cores": os.cpu_count(),
        "python": platform.python_version(),
        "servers": servers,
    }


def _us_per_msg(load: EchoLoad, server_cpu: float) -> float:
    return server_cpu / load.all_messages * 1e6 if load.all_messages else float("nan")


def _client_busy(load: EchoLoad) -> float:
    return load.client_cpu_s / load.client_wall_s if load.client_wall_s else 0.0


def _missing(servers: Sequence[EchoServer]) -> str | None:
    names = {s.name for s in servers}
    if "node-ws" in names:
        if shutil.which("node") is None:
            return "node is not on PATH"
        if not (NODE_PEER / "node_modules" / "ws").is_dir():
            return f"ws is not installed in {NODE_PEER}"
    if "python-websockets" in names:
        check = subprocess.run([str(VENV_PYTHON), "-c", "import websockets"], capture_output=True)
        if check.returncode != 0:
            return "websockets is not installed in load_tests/.venv"
    if not {SERVER_CPU, WRK_CPU} <= os.sched_getaffinity(0):
        return f"the run pins to CPUs {WRK_CPU} and {SERVER_CPU}; this process cannot use both"
    return None


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=list(CONTENDERS), metavar="SERVER")
    parser.add_argument("--connections", type=int, default=128, help="default 128")
    parser.add_argument("--size", type=int, default=64, help="payload bytes (default 64)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds (default 8)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds (default 1)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat all servers N times")
    parser.add_argument("--client-processes", type=int, default=2, help="default 2")
    parser.add_argument("--py-spy", metavar="FILE.svg", help="flame graph of our worker")
    parser.add_argument("--setup", action="store_true", help="install the peers first")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
