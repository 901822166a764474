"""One connection flooding a worker never keeps it from serving its other clients.

Each flood (`load_tests/floods.py`) runs for a few seconds against one worker started by the
real CLI with a 2 s heartbeat timeout, while a fresh client asks `/pid` every 0.1 s. Every
probe must be answered within `BAR`, by the worker the flood began with: a worker whose
loop a flood holds misses its heartbeats and is replaced within the flood. The HTTP/2 floods
of frames that carry nothing must also end with GOAWAY ENHANCE_YOUR_CALM, seen with the raw
HTTP/2 client.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from load_tests.floods import FLOODS, FloodRun, flood
from tests.support.pki import make_pki
from tests.support.ports import free_port
from tests.support.raw_client import get
from tests.support.raw_h2 import ErrorCode, FrameType, H2Client, frame
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)

APP = "load_tests.apps.flood_targets:site"
# Looser than the 0.5 s bar of `load_tests/faults.py`: this machine may be busy with other
# tests. Without turn-taking the probes wait for the whole flood (or get no answer).
BAR = 2.0
FLOOD_SECONDS = 3.0
HEARTBEAT_TIMEOUT = "2"


def _start(serve: Launcher) -> tuple[ServerProcess, int]:
    tcp_port = free_port()
    server = serve(
        APP,
        workers=1,
        args=["--timeout", HEARTBEAT_TIMEOUT],
        env={"FLOOD_TCP_PORT": str(tcp_port)},
    )
    return server, tcp_port


def _describe(run: FloodRun) -> str:
    return (
        f"{run.name}: {len(run.latencies)} probes answered, {run.unanswered} not, worst "
        f"{run.worst:.3f} s, p99 {run.p99:.3f} s, workers {sorted(run.workers)}, flood sent "
        f"{run.sent:,} bytes, cut {run.cut} times"
    )


@pytest.mark.parametrize("name", list(FLOODS))
def test_a_flooding_connection_leaves_the_worker_answering_fresh_clients(
    serve: Launcher, name: str
) -> None:
    server, tcp_port = _start(serve)
    worker = server.workers()
    run = flood(name, server.port, FLOOD_SECONDS, tcp_port)
    assert run.latencies and not run.unanswered, _describe(run)
    assert run.worst <= BAR, _describe(run)
    assert run.workers == {str(pid) for pid in worker}, _describe(run)
    assert server.workers() == worker
    assert "Traceback" not in server.output()


@pytest.mark.parametrize(
    ("kind", "flags", "stream", "payload"),
    [
        (FrameType.PRIORITY, 0, 3, bytes(4) + b"\x10"),
        (FrameType.WINDOW_UPDATE, 0, 0, (1).to_bytes(4, "big")),
        (0xFA, 0, 0, b"flooding"),
    ],
    ids=["priority", "window-update", "unknown-type"],
)
def test_a_flood_of_frames_that_carry_nothing_ends_with_enhance_your_calm(
    serve: Launcher, kind: int, flags: int, stream: int, payload: bytes
) -> None:
    server, _ = _start(serve)
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        client.send(frame(kind, flags, stream, payload) * 5000, note="5000 frames at once")
        client.expect_connection_error(ErrorCode.ENHANCE_YOUR_CALM)
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        assert client.get("/ping").body == b"pong"


def test_a_flood_of_empty_data_frames_ends_with_enhance_your_calm(serve: Launcher) -> None:
    server, _ = _start(serve)
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream = client.new_stream()
        client.send_headers(stream, client.request_headers("POST", "/ping"), end_stream=False)
        client.send(frame(FrameType.DATA, 0, stream) * 5000, note="5000 empty DATA frames")
        client.expect_connection_error(ErrorCode.ENHANCE_YOUR_CALM)


def test_a_frame_flood_over_tls_ends_with_enhance_your_calm_and_others_are_served(
    serve: Launcher, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path)
    https = ssl.create_default_context(cafile=pki.ca)
    server = serve(
        APP,
        workers=1,
        args=["--certfile", pki.server.cert, "--keyfile", pki.server.key],
        env={"FLOOD_TCP_PORT": str(free_port())},
        tls=https,
    )
    h2 = ssl.create_default_context(cafile=pki.ca)
    h2.set_alpn_protocols(["h2"])
    with H2Client.connect(server.tcp, tls=h2) as client:
        client.handshake()
        client.send(frame(FrameType.WINDOW_UPDATE, 0, 0, (1).to_bytes(4, "big")) * 5000)
        client.expect_connection_error(ErrorCode.ENHANCE_YOUR_CALM)
    assert get(server.tcp, "/ping", tls=https).body == b"pong"
