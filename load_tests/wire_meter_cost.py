"""What `socketify_bytes_total` costs a worker: one `WireMeter` look per open connection a second.

Theory of operation: the meter reads each open connection's kernel byte counters once a
second, so its cost grows with open connections, not with requests (a /ping answered on a
keep-alive connection costs it nothing; `metrics_overhead.py` shows that). This times
`look_all` over N loopback connections in this process: idle ones (nothing moved since the
last look, the common case) and ones that each received a byte since (the time of that send
subtracted), plus the bare `TCP_INFO` read. Microseconds per connection and look; times N is
the worker CPU a second of sampling costs.

    python load_tests/wire_meter_cost.py [--connections 1000]
"""

from __future__ import annotations

import argparse
import socket
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from socketify.metrics.recorder import Recorder
from socketify.server.wire_meter import WireMeter, wire_bytes
from workers.shared.tally import TallyTable

ROUNDS = 50


class _Served:
    """A connection as the acceptor holds it: the meter only reads its `sock`."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock


def _best(run: Callable[[], object], rounds: int = ROUNDS) -> float:
    return min(timeit.repeat(run, number=rounds, repeat=5)) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--connections", type=int, default=1000)
    count = parser.parse_args().connections
    listener = socket.create_server(("127.0.0.1", 0), backlog=count)
    clients, served = [], []
    for _ in range(count):
        clients.append(socket.create_connection(listener.getsockname()))
        served.append(_Served(listener.accept()[0]))
    meter = WireMeter(Recorder(TallyTable(capacity=1).writer(0)))
    meter.look_all(served)

    def send_a_byte() -> None:
        for client in clients:
            client.send(b"x")

    def busy_look() -> None:
        send_a_byte()
        meter.look_all(served)

    per = 1e6 / count
    idle = _best(lambda: meter.look_all(served)) * per
    busy = (_best(busy_look) - _best(send_a_byte)) * per
    bare = _best(lambda: [wire_bytes(conn.sock) for conn in served]) * per
    print(f"{count} connections, microseconds per connection and look:")
    print(f"  idle since the last look   {idle:6.2f}")
    print(f"  received since             {busy:6.2f}")
    print(f"  the TCP_INFO read alone    {bare:6.2f}")


if __name__ == "__main__":
    main()
