"""An HTTP/2 client that opens many streams and reads none holds a bounded part of the worker.

The client grants no send window (SETTINGS_INITIAL_WINDOW_SIZE 0), so every answer waits in
the server. Only the first few streams may have their 1 MiB answer made; the others wait
before their handler runs, so the worker's memory grows by a few MiB, not by an answer per
stream. Once the client grants window, every stream is answered in full.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hyperframe.frame import WindowUpdateFrame

from socketify.server.http2 import MAX_HELD
from tests.support.ports import free_port
from tests.support.raw_h2 import H2Client, Setting
from tests.support.serve import Launcher

pytestmark = pytest.mark.timeout(90)

APP = "load_tests.apps.flood_targets:site"
STREAMS = 40
ANSWER = 1 << 20  # what /large answers, made afresh per request
SETTLE = 2.0  # seconds the handlers get to run (and hold their answers) before RSS is read


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_streams_a_client_does_not_read_hold_a_bounded_amount_then_all_are_answered(
    serve: Launcher,
) -> None:
    server = serve(APP, workers=1, env={"FLOOD_TCP_PORT": str(free_port())})
    (worker,) = server.workers()
    with H2Client.connect(server.tcp, timeout=20) as warm:
        warm.handshake()
        assert len(warm.get("/large").body) == ANSWER  # the paths and buffers of one answer
    before = _rss_kib(worker)
    with H2Client.connect(server.tcp, timeout=30) as client:
        client.handshake({Setting.INITIAL_WINDOW_SIZE: 0})
        streams = [client.new_stream() for _ in range(STREAMS)]
        for stream in streams:
            client.send_headers(stream, client.request_headers("GET", "/large"))
        time.sleep(SETTLE)
        held_kib = _rss_kib(worker) - before
        # Without the bound every stream holds its answer: STREAMS MiB and more.
        bound_kib = (MAX_HELD + 4 * ANSWER) // 1024 + 8 * 1024  # the rest: allocator slack
        assert held_kib < bound_kib, f"worker grew {held_kib} KiB (bound {bound_kib} KiB)"
        client.send_settings({Setting.INITIAL_WINDOW_SIZE: 1 << 20})
        client.grant(WindowUpdateFrame(0, window_increment=1 << 30))
        for stream in streams:
            assert len(client.response(stream).body) == ANSWER
