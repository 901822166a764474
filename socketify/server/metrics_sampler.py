"""Gauges only the serving layer can see, sampled once a second into the worker's metrics.

Open connections by protocol (`http1`, `h2`, `tcp`; upgraded WebSocket and SSE connections
are counted by `socketify.metrics.request_metrics` when they switch), whether the state
backends this worker uses (the Redis breakers) are up, and the database connections its pools
have checked out; and, through the `WireMeter`, the bytes every connection moved since the
last sample. Sampling keeps the cost off the per-connection path: a gauge may lag by up to
`INTERVAL`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import gevent

from socketify.metrics.builtin import BACKEND_UP, CONNECTIONS, DB_POOL_IN_USE
from socketify.metrics.recorder import Recorder
from socketify.server.connection import UPGRADED
from socketify.server.service import HttpService
from socketify.server.tcp_service import TcpService
from socketify.server.wire_meter import WireMeter
from socketify.state.breaker import breakers

__all__ = ["INTERVAL", "sample", "sample_forever"]

INTERVAL = 1.0


def sample(services: Sequence[Any], recorder: Recorder, meter: WireMeter) -> None:
    """Write the gauges once, and count the bytes `meter` sees."""
    http1 = h2 = tcp = 0
    for service in services:
        meter.look_all(service.connections)
        if isinstance(service, HttpService):
            for conn in list(service.connections):
                if conn.http2 is not None:
                    h2 += 1
                elif conn.phase != UPGRADED:
                    http1 += 1
        elif isinstance(service, TcpService):
            tcp += len(service.connections)
    recorder.set(CONNECTIONS, http1, ("http1",))
    recorder.set(CONNECTIONS, h2, ("h2",))
    recorder.set(CONNECTIONS, tcp, ("tcp",))
    backends = breakers()
    if backends:
        recorder.set(BACKEND_UP, float(all(b.available for b in backends)))
    # Looked up, not imported: an app without a database never loads socketify.db.
    pool = sys.modules.get("socketify.db.pool")
    if pool is not None:
        recorder.set(DB_POOL_IN_USE, sum(p.stats().in_use for p in pool.pools()))


def sample_forever(services: Sequence[Any], recorder: Recorder, meter: WireMeter) -> None:
    """Sample every `INTERVAL` seconds until the greenlet is killed."""
    while True:
        sample(services, recorder, meter)
        gevent.sleep(INTERVAL)
