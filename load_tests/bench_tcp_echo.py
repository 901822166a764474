"""TCP echo benchmark: `socketify run examples.tcp_echo:service` vs a raw gevent StreamServer.

Theory of operation: each server in turn runs 1 worker (or 1 process) pinned to CPU 1 with
taskset, on a free port, polled until a line comes back. The load generator (raw non-blocking
sockets and epoll, in processes pinned to CPU 0) opens N connections and keeps exactly one
64-byte message (63 bytes and a newline) in flight on each: strict ping-pong, the next one
goes out when the previous echo is complete. Rounds alternate ours and the peer, so drift on
the shared machine hits both alike; the table gives messages per second per round, the
median of each, each round's ratio, how busy the client was (near 100% means the client,
not the server, set the figure) and ours÷peer. Bar: ≥ 0.8x the peer.

    flock /tmp/bench.lock python load_tests/bench_tcp_echo.py [--rounds 3] [--seconds 5]

The peer runs from load_tests/.venv when it exists (gevent is in PEER_PACKAGES), else from
this interpreter.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import HOST, LOAD_TESTS, REPO_ROOT, SERVER_CPU, WRK_CPU, free_port

MESSAGE = b"x" * 63 + b"\n"
READY_TIMEOUT = 20.0
VENV_PYTHON = LOAD_TESTS / ".venv" / "bin" / "python"


def ours(port: int) -> list[str]:
    """Our echo example, 1 worker."""
    cli = Path(sys.executable).with_name("socketify")
    return [str(cli), "run", "examples.tcp_echo:service", "--workers", "1",
            "--bind", f"{HOST}:{port}", "--log-level", "warning"]  # fmt: skip


def peer(port: int) -> list[str]:
    """gevent's StreamServer echo."""
    python = VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable)
    return [str(python), str(LOAD_TESTS / "apps" / "tcp_echo_gevent.py"), str(port)]


@contextlib.contextmanager
def running(argv: Sequence[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """argv pinned to the server CPU until the block exits; waits until it echoes a line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
           os.environ.get("PYTHONPATH")]))}  # fmt: skip
    process = subprocess.Popen(
        ["taskset", "-c", str(SERVER_CPU), *argv],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_echo(port, process)
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_echo(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with status {process.returncode}")
        try:
            with socket.create_connection((HOST, port), timeout=1) as sock:
                sock.sendall(MESSAGE)
                if sock.recv(100) == MESSAGE:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{process.args} did not echo within {READY_TIMEOUT} s")


def load(port: int, connections: int, seconds: float, warmup: float, processes: int) -> dict:
    """Strict 64-byte ping-pong on `connections`, split among client processes on CPU 0."""
    ctx = get_context("fork")
    pipes, children = [], []
    shares = [connections // processes + (i < connections % processes) for i in range(processes)]
    for share in shares:
        parent_end, child_end = ctx.Pipe(duplex=False)
        child = ctx.Process(
            target=_client, args=(child_end, port, share, seconds, warmup), daemon=True
        )
        child.start()
        pipes.append(parent_end)
        children.append(child)
    results = [pipe.recv() for pipe in pipes]
    for child in children:
        child.join(10)
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        raise RuntimeError(errors[0])
    measured = max(r["seconds"] for r in results)
    return {
        "rate": sum(r["messages"] for r in results) / measured,
        "client_cpu": sum(r["cpu_s"] for r in results) / (warmup + measured),
    }


def _client(pipe, port, count, seconds, warmup) -> None:  # type: ignore[no-untyped-def]
    try:
        os.sched_setaffinity(0, {WRK_CPU})
        socks = [socket.create_connection((HOST, port)) for _ in range(count)]
        pipe.send(_ping_pong(socks, seconds, warmup))
    except Exception as error:  # report it to the parent rather than dying silently
        pipe.send(f"client process {os.getpid()}: {error!r}")


def _ping_pong(socks: list[socket.socket], seconds: float, warmup: float) -> dict:
    poller = select.epoll()
    for sock in socks:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        poller.register(sock.fileno(), select.EPOLLIN)
    size = len(MESSAGE)
    got = {sock.fileno(): 0 for sock in socks}
    read, write, clock = os.read, os.write, time.perf_counter
    messages = 0
    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    started = clock()
    measure_from = started + warmup
    end = measure_from + seconds
    for fd in got:
        write(fd, MESSAGE)
    while (now := clock()) < end:
        for fd, _ in poller.poll(1.0):
            data = read(fd, 65536)
            if not data:
                raise ConnectionError("the server closed a connection during the run")
            have = got[fd] + len(data)
            if have < size:
                got[fd] = have
                continue
            got[fd] = have - size
            if now >= measure_from:
                messages += 1
            write(fd, MESSAGE)
    measured = clock() - measure_from
    cpu_end = resource.getrusage(resource.RUSAGE_SELF)
    for sock in socks:
        sock.close()
    cpu = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    return {"messages": messages, "seconds": measured, "cpu_s": cpu}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the interleaved rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--client-processes", type=int, default=1)
    options = parser.parse_args(argv)
    contenders = {"socketify tcp": ours, "gevent StreamServer": peer}
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for round_number in range(options.rounds):
        for name, command in contenders.items():
            port = free_port()
            with running(command(port), port):
                result = load(
                    port,
                    options.connections,
                    options.seconds,
                    options.warmup,
                    options.client_processes,
                )
            rates[name].append(result["rate"])
            print(
                f"round {round_number + 1} {name:<20} {result['rate']:>9.0f} msg/s"
                f"  client CPU {100 * result['client_cpu']:.0f}%",
                flush=True,
            )
    medians = {name: statistics.median(values) for name, values in rates.items()}
    # Each round's ratio compares two runs minutes apart at most: the fairest single figure
    # on a shared machine is the median of those, beside the ratio of the medians.
    pairs = zip(rates["socketify tcp"], rates["gevent StreamServer"], strict=True)
    ratios = [ours_rate / peer_rate for ours_rate, peer_rate in pairs]
    for name, value in medians.items():
        print(f"median {name:<20} {value:>9.0f} msg/s")
    print("per-round ours / peer: " + ", ".join(f"{ratio:.2f}" for ratio in ratios))
    print(f"median of per-round ratios: {statistics.median(ratios):.2f}x (bar >= 0.8x)")
    print(f"ratio of medians: {medians['socketify tcp'] / medians['gevent StreamServer']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
