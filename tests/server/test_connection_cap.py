"""`max_connections` over real sockets: past the cap, clients wait in the kernel backlog
instead of being accepted and starved, and are served as soon as a slot frees up."""

from __future__ import annotations

import os
import resource
import select
import time
from pathlib import Path

import pytest

from tests.support.raw_client import Reader, connect, get, request_bytes
from tests.support.serve import Launcher
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

CAP = 5  # tests.support.apps.basic:capped


def test_connection_past_max_connections_waits_until_one_closes(serve: Launcher) -> None:
    server = serve("tests.support.apps.basic:capped")
    pid = get(server.address, "/pid").body
    held = [connect(server.address) for _ in range(CAP)]
    try:
        readers = [Reader(sock) for sock in held]
        for sock, reader in zip(held, readers, strict=True):
            sock.sendall(request_bytes("GET", "/ping"))
            assert reader.read_response().body == b"pong"
        extra = connect(server.address)  # the kernel completes the handshake...
        with extra:
            extra.sendall(request_bytes("GET", "/ping"))
            readable, _, _ = select.select([extra], [], [], 0.8)
            assert not readable, "the connection past the cap was served"  # ...nobody accepts
            held.pop().close()
            readable, _, _ = select.select([extra], [], [], 3)
            assert readable, "the waiting connection was not served after a slot freed up"
            assert Reader(extra).read_response().body == b"pong"
            # The connections that were held all along still work.
            for sock, reader in zip(held, readers, strict=False):
                sock.sendall(request_bytes("GET", "/ping"))
                assert reader.read_response().body == b"pong"
    finally:
        for sock in held:
            sock.close()
    assert get(server.address, "/pid").body == pid  # same worker: nothing crashed


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_worker_out_of_file_descriptors_pauses_accepting_instead_of_spinning(
    serve: Launcher,
) -> None:
    # accept() failing with EMFILE must pause accepting, not busy-loop a level-triggered listener.
    server = serve("tests.support.apps.basic:server")
    (worker,) = server.workers()
    resource.prlimit(worker, resource.RLIMIT_NOFILE, (48, 48))
    held = []
    try:
        for _ in range(80):  # more than the worker can hold: the rest wait in the backlog
            sock = connect(server.address)
            sock.sendall(request_bytes("GET", "/ping"))
            held.append(sock)
        time.sleep(0.3)
        cpu_before = _cpu_seconds(worker)
        time.sleep(1.0)  # the idle timeout (2 s) has not freed anything yet
        assert _cpu_seconds(worker) - cpu_before < 0.5, "the worker spins on accept()"
        answered = sum(1 for sock in held if select.select([sock], [], [], 0)[0])
        assert 10 < answered < 80
    finally:
        for sock in held:
            sock.close()
    # Once descriptors are free again, new clients are served by the same worker.
    wait_for(
        lambda: get(server.address, "/pid").body == str(worker).encode(),
        5,
        message="the worker to serve again",
    )
    assert "pausing accepts" in server.output()
