"""The WebSocket load generator: raw non-blocking sockets, precomputed masked frames, epoll.

Theory of operation: a client library would spend more CPU per message than the server under
test (an asyncio client becomes the bottleneck well before a fast server), so this one does the
least a conforming client can: every connection sends the same pre-masked frame (RFC 6455
requires masking, not a fresh key per frame for a benchmark's fixed payload), and a reply is
recognised by its byte count alone, since an echo of a fixed message has a fixed size (the
first reply on each connection is checked byte for byte). Strict ping-pong: one message in
flight per connection; the next one goes out when the previous echo is complete.

`echo_load` forks `processes` workers, each pinned to the given CPUs, each owning a share of
the connections; all open and upgrade their connections, wait at a barrier, run a warm-up
(discarded) and then the measured period, and send back their counts, round-trip times and
the CPU time they used. That CPU share tells whether the client, not the server, was the
limit: a client near 100% of its core means the figure is a floor for the server.
"""

from __future__ import annotations

import base64
import multiprocessing
import os
import resource
import select
import socket
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from socketify.protocol.websocket.frames import unmask

HOST = "127.0.0.1"
MASK = bytes.fromhex("5a1c33e7")


@dataclass(frozen=True)
class EchoLoad:
    """What happened during the measured period, summed over the client processes."""

    messages: int
    seconds: float
    all_messages: int  # warm-up included: what the server's CPU time was spent on
    latencies_ms: list[float]  # sorted
    client_cpu_s: float  # user + system CPU of all client processes during the whole run
    client_wall_s: float  # warm-up + measured period

    @property
    def per_second(self) -> float:
        """Round trips per second."""
        return self.messages / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        """The p-th percentile RTT in ms, at index round(p/100 * (n-1))."""
        lat = self.latencies_ms
        return lat[round(p / 100 * (len(lat) - 1))] if lat else float("nan")

    @property
    def avg_ms(self) -> float:
        """Mean RTT in ms."""
        return sum(self.latencies_ms) / len(self.latencies_ms) if self.latencies_ms else 0.0


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A final client frame masked with MASK."""
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, 0x80 | n))
    elif n < 0x10000:
        head = bytes((0x80 | opcode, 0xFE)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 0xFF)) + n.to_bytes(8, "big")
    return head + MASK + unmask(payload, MASK)  # XOR with the mask is its own inverse


def server_frame(opcode: int, payload: bytes) -> bytes:
    """The unmasked frame a server sends for payload."""
    n = len(payload)
    head = bytes((0x80 | opcode, n)) if n < 126 else bytes((0x80 | opcode, 126)) + n.to_bytes(2)
    return head + payload


def open_websocket(port: int, path: str, timeout: float = 10.0) -> tuple[socket.socket, bytes]:
    """A connected, upgraded socket (blocking) and the bytes that came right after the 101."""
    sock = socket.create_connection((HOST, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed during the handshake: {head!r}")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"upgrade refused: {head[:200]!r}")
    return sock, head.partition(b"\r\n\r\n")[2]


def echo_load(
    port: int,
    path: str,
    *,
    connections: int,
    seconds: float,
    warmup: float,
    payload: bytes,
    processes: int,
    cpus: Sequence[int] | None,
) -> EchoLoad:
    """Strict ping-pong text echo over `connections`, split among `processes` processes."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(processes + 1)
    shares = [connections // processes + (i < connections % processes) for i in range(processes)]
    pipes, children = [], []
    for share in shares:
        parent_end, child_end = ctx.Pipe(duplex=False)
        child = ctx.Process(
            target=_client_process,
            args=(child_end, barrier, port, path, share, seconds, warmup, payload, cpus),
            daemon=True,
        )
        child.start()
        pipes.append(parent_end)
        children.append(child)
    barrier.wait(timeout=60)  # every connection is open and upgraded
    results = [pipe.recv() for pipe in pipes]
    for child in children:
        child.join(10)
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        raise RuntimeError(errors[0])
    latencies: list[float] = []
    for r in results:
        chunk = array("d")
        chunk.frombytes(r["latencies"])
        latencies.extend(chunk)
    latencies.sort()
    return EchoLoad(
        messages=sum(r["messages"] for r in results),
        all_messages=sum(r["all_messages"] for r in results),
        seconds=max(r["seconds"] for r in results),
        latencies_ms=latencies,
        client_cpu_s=sum(r["cpu_s"] for r in results),
        client_wall_s=max(r["wall_s"] for r in results),
    )


def _client_process(
    pipe, barrier, port, path, count, seconds, warmup, payload, cpus
) -> None:  # fmt: skip
    try:
        if cpus:
            os.sched_setaffinity(0, set(cpus))
        socks = []
        for _ in range(count):
            sock, early = open_websocket(port, path)
            if early:
                raise ConnectionError(f"unexpected bytes right after the 101: {early[:80]!r}")
            socks.append(sock)
        barrier.wait(timeout=60)
        pipe.send(_ping_pong(socks, seconds, warmup, payload))
    except Exception as error:  # report it to the parent rather than dying silently
        pipe.send(f"client process {os.getpid()}: {error!r}")
        barrier.abort()


def _ping_pong(
    socks: list[socket.socket], seconds: float, warmup: float, payload: bytes
) -> dict[str, object]:
    frame = masked_frame(0x1, payload)
    expected = server_frame(0x1, payload)
    reply = len(expected)
    poller = select.epoll()
    fds = []
    for sock in socks:
        sock.setblocking(False)
        fd = sock.fileno()
        fds.append(fd)
        poller.register(fd, select.EPOLLIN)
    got = dict.fromkeys(fds, 0)
    checked: set[int] = set()
    sent_at: dict[int, float] = {}
    latencies = array("d")
    messages = warm = 0
    read, write, clock = os.read, os.write, time.perf_counter
    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    started = clock()
    measure_from = started + warmup
    end = measure_from + seconds
    for fd in fds:
        write(fd, frame)
        sent_at[fd] = started
    while True:
        events = poller.poll(1.0)
        now = clock()
        if now >= end:
            break
        for fd, _ in events:
            data = read(fd, 65536)
            if not data:
                raise ConnectionError("the server closed a connection during the run")
            have = got[fd] + len(data)
            if fd not in checked:
                if not expected.startswith(data[:reply]):
                    raise ValueError(f"unexpected echo {data[:80]!r}")
                checked.add(fd)
            if have < reply:
                got[fd] = have
                continue
            got[fd] = have - reply
            if now >= measure_from:
                messages += 1
                latencies.append((now - sent_at[fd]) * 1000)
            else:
                warm += 1
            write(fd, frame)
            sent_at[fd] = now
    measured = clock() - measure_from
    cpu_end = resource.getrusage(resource.RUSAGE_SELF)
    for sock in socks:
        sock.close()
    cpu = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    return {
        "messages": messages,
        "all_messages": messages + warm,
        "seconds": measured,
        "latencies": latencies.tobytes(),
        "cpu_s": cpu,
        "wall_s": warmup + measured,
    }
