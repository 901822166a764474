"""Hub broadcast benchmark: 1000 WebSocket clients in one room over 2 workers, 256-byte
messages, delivered messages per second; encode-once vs a naive per-member `send_text` loop.

Theory of operation, part 1 (sockets, the end-to-end number):
`socketify run load_tests.apps.ws_hub:server --workers 2` (unpinned: on 2 cores the clients
share them). Client processes open 999 connections to `/room` (checking both workers got
some) and count the bytes they receive: each delivery is a 260-byte frame (4-byte header,
256-byte text), so no parsing is needed. A publisher connection, the 1000th member, sends M
messages back to back, `hub <payload>` (Hub.broadcast_text: encoded once, published once
on the bus, written as is to every member) or `naive <payload>` (published as text; each
worker encodes a frame per member with `send_text`). Rate = deliveries / (last delivery -
first send). Phases alternate hub/naive for `--rounds` rounds on the same connections.

Part 2 (in-process micro-benchmark): 1000 `Channel`s whose sends queue in memory (a channel
keeps what is sent before its socket is attached), `rounds` x 1000 `send_text(payload)` vs
`rounds` x (one `frame_bytes` + 1000 `send_frame(frame)`). CPU time of this process.
Bar: encode-once ≥ 5x naive.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import select
import socket
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.bench_websocket_client import masked_frame, open_websocket
from load_tests.harness import (
    HOST,
    LOAD_TESTS,
    ServerFailedToStart,
    exit_on_sigterm,
    free_port,
    raise_nofile,
    serve,
)
from socketify.protocol.websocket import Connection, Opcode, frame_bytes
from socketify.realtime.pulse import UNBOUNDED
from socketify.realtime.pulse.channel import Channel

RESULTS = LOAD_TESTS / "results"
PAYLOAD = 256
FRAME = 4 + PAYLOAD  # 16-bit length form
BAR = 5.0


def main(argv: Sequence[str] | None = None) -> int:
    """Run both parts, print the figures, save JSON."""
    args = _parse_args(argv)
    exit_on_sigterm()
    record: dict[str, object] = {
        "scenario": "websocket-hub-broadcast",
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "members": args.members,
        "payload_bytes": PAYLOAD,
        "cpu_cores": os.cpu_count(),
    }
    print(f"Part 2 (in-process): {args.members} channels, {args.micro_rounds} rounds")
    micro = in_process(args.members, args.micro_rounds, repeats=5)
    record["in_process"] = micro
    print(
        f"  naive send_text per member: {micro['naive_per_s']:,.0f} deliveries/s\n"
        f"  encode once + send_frame:   {micro['encode_once_per_s']:,.0f} deliveries/s\n"
        f"  encode-once ÷ naive: {micro['speedup']:.2f}x (bar ≥ {BAR}x: "
        f"{'met' if micro['speedup'] >= BAR else 'MISSED'})"
    )
    if not args.micro_only:
        print(f"Part 1 (sockets): {args.members} members over 2 workers, {args.messages} messages")
        try:
            record["sockets"] = over_sockets(args)
        except (ServerFailedToStart, RuntimeError, OSError) as error:
            print(f"FAILED: {error}", file=sys.stderr)
            return 1
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"ws-hub-{args.members}-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"Saved {path}")
    return 0


def in_process(members: int, rounds: int, repeats: int) -> dict[str, float]:
    """Deliveries/s of naive per-member send_text vs encode-once send_frame (best of repeats)."""

    # Not connected: every send waits in the channel's queue, so no backlog bound here.
    def fresh() -> list[Channel]:
        return [Channel(Connection(), max_backpressure=UNBOUNDED) for _ in range(members)]

    peers = fresh()
    text = "p" * PAYLOAD

    def drain() -> None:
        peers[:] = fresh()  # new, empty queues

    def naive() -> float:
        started = time.process_time()
        for _ in range(rounds):
            for ch in peers:
                ch.send_text(text)
        return time.process_time() - started

    def encode_once() -> float:
        started = time.process_time()
        for _ in range(rounds):
            frame = frame_bytes(Opcode.TEXT, text.encode())
            for ch in peers:
                ch.send_frame(frame)
        return time.process_time() - started

    naive_s, once_s = [], []
    for _ in range(repeats):
        naive_s.append(naive())
        drain()
        once_s.append(encode_once())
        drain()
    deliveries = rounds * members
    return {
        "naive_per_s": deliveries / min(naive_s),
        "encode_once_per_s": deliveries / min(once_s),
        "speedup": min(naive_s) / min(once_s),
    }


def over_sockets(args: argparse.Namespace) -> dict[str, object]:
    """Part 1: rounds of hub and naive phases against a real 2-worker server."""
    raise_nofile(args.members + 1024)
    port = free_port()
    script = Path(sys.executable).parent / "socketify"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]
    argv = [*cli, "run", "load_tests.apps.ws_hub:server", "--workers", "2", "--bind",
            f"{HOST}:{port}"]  # fmt: skip
    phases = ["hub", "naive"] * args.rounds
    ctx = multiprocessing.get_context("fork")
    receivers = args.members - 1
    shares = [receivers // args.processes + (i < receivers % args.processes)
              for i in range(args.processes)]  # fmt: skip
    barrier = ctx.Barrier(args.processes + 1)
    with serve("socketify", argv, port, nofile=args.members + 1024):
        pipes, children = [], []
        for share in shares:
            parent_end, child_end = ctx.Pipe(duplex=False)
            child = ctx.Process(
                target=_receiver,
                args=(child_end, barrier, port, share, phases, args.messages),
                daemon=True,
            )
            child.start()
            pipes.append(parent_end)
            children.append(child)
        publisher, _ = _member(port)
        barrier.wait(timeout=120)  # all members connected
        pids = set()
        for pipe in pipes:
            pids |= pipe.recv()
        if len(pids) < 2:
            raise RuntimeError(f"all members landed on worker(s) {sorted(pids)}")
        rates: dict[str, list[float]] = {"hub": [], "naive": []}
        for phase in phases:
            barrier.wait(timeout=60)
            frames = b"".join(
                masked_frame(0x1, f"{phase} ".encode() + b"p" * PAYLOAD)
                for _ in range(args.messages)
            )
            started = time.perf_counter()
            publisher.sendall(frames)
            _read_frames(publisher, args.messages)
            last = time.perf_counter()
            total = args.messages
            for pipe in pipes:
                result = pipe.recv()
                if isinstance(result, str):
                    raise RuntimeError(result)
                count, finished = result
                total += count
                last = max(last, finished)
            rate = total / (last - started)
            rates[phase].append(rate)
            print(f"  {phase:5s}: {total:,} deliveries in {last - started:.2f} s = {rate:,.0f}/s")
        publisher.close()
        for child in children:
            child.join(10)
    hub, naive = statistics.median(rates["hub"]), statistics.median(rates["naive"])
    print(f"  median: hub {hub:,.0f}/s, naive {naive:,.0f}/s, hub ÷ naive {hub / naive:.2f}x")
    return {"workers": 2, "messages_per_phase": args.messages, "hub_per_s": rates["hub"],
            "naive_per_s": rates["naive"], "hub_over_naive": hub / naive}  # fmt: skip


def _member(port: int) -> tuple[socket.socket, int]:
    """A connection to /room and the pid of the worker that took it (its greeting)."""
    sock, data = open_websocket(port, "/room")
    while len(data) < 2 or len(data) < 2 + (data[1] & 0x7F):
        data += sock.recv(4096)
    greeting = data[2 : 2 + (data[1] & 0x7F)].decode()
    if not greeting.startswith("pid:") or len(data) != 2 + len(greeting):
        raise ConnectionError(f"unexpected greeting {data[:80]!r}")
    return sock, int(greeting[4:])


def _read_frames(sock: socket.socket, count: int) -> None:
    """Read `count` broadcast frames from a blocking socket."""
    want = count * FRAME
    while want > 0:
        want -= len(sock.recv(min(want, 1 << 20)))


def _receiver(pipe, barrier, port: int, count: int, phases: list[str], messages: int) -> None:
    try:
        members = [_member(port) for _ in range(count)]
        socks = [sock for sock, _ in members]
        pids = {pid for _, pid in members}
        barrier.wait(timeout=120)
        pipe.send(pids)
        poller = select.epoll()
        for sock in socks:
            sock.setblocking(False)
            poller.register(sock.fileno(), select.EPOLLIN)
        for _ in phases:
            barrier.wait(timeout=60)
            want = dict.fromkeys((s.fileno() for s in socks), messages * FRAME)
            left = len(want)
            last = time.perf_counter()
            deadline = last + 120
            while left and time.perf_counter() < deadline:
                for fd, _ in poller.poll(1.0):
                    n = len(os.read(fd, 1 << 20))
                    if n and want[fd] > 0:
                        want[fd] -= n
                        if want[fd] <= 0:
                            left -= 1
                last = time.perf_counter()
            received = sum(messages * FRAME - max(w, 0) for w in want.values()) // FRAME
            pipe.send((received, last))
    except Exception as error:  # tell the parent instead of dying silently
        pipe.send(f"receiver {os.getpid()}: {error!r}")
        barrier.abort()


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=1000, help="room members (default 1000)")
    parser.add_argument("--messages", type=int, default=200, help="broadcasts per phase")
    parser.add_argument("--rounds", type=int, default=3, help="hub+naive phase pairs")
    parser.add_argument("--processes", type=int, default=2, help="receiving client processes")
    parser.add_argument("--micro-rounds", type=int, default=200, help="in-process rounds")
    parser.add_argument("--micro-only", action="store_true", help="skip the socket part")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
