"""Socket activation with the real `systemd-socket-activate`: the inherited socket is served by
every worker (no SO_REUSEPORT copies), and a restart of the service queues clients instead of
refusing them, because the activator's side keeps the socket open."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.processes import child_pids, is_alive
from tests.support.raw_client import Reader, WireResponse, connect, get, request_bytes
from tests.support.serve import PYTHON_ENV, SOCKETIFY, Launcher, ServerProcess
from tests.support.services import require_program
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

KEEPER = str(Path(__file__).with_name("keeper.py"))
APP = "tests.integration.apps.systemd_app:server"
Starter = Callable[[list[str], list[str]], ServerProcess]  # (activator options, command)


@pytest.fixture
def activate(serve: Launcher) -> Starter:
    """`activate(options, command)`: `systemd-socket-activate -l 127.0.0.1:PORT OPTIONS
    COMMAND` in its own process group, stopped (and checked) with the test's servers.

    The activator binds, waits for the first connection, then execs COMMAND (same pid) with
    the socket as fd 3 and LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES set. It passes COMMAND only
    the variables named with -E.
    """
    program = require_program("systemd-socket-activate", "systemd")
    passed = [arg for name in PYTHON_ENV for arg in ("-E", name)]

    def start(options: list[str], command: list[str]) -> ServerProcess:
        port = free_port()
        argv = [program, "-l", f"127.0.0.1:{port}", *passed, *options, *command]
        activated = serve.spawn(argv, ("127.0.0.1", port))
        activated.wait_output("Listening on", timeout=10)
        return activated

    return start


def socket_inodes(pid: int) -> set[str]:
    """`socket:[inode]` targets of the open descriptors of `pid`."""
    found = set()
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(entry)
            if target.startswith("socket:"):
                found.add(target)
    return found


def listening_tcp_sockets(port: int) -> int:
    """How many TCP sockets listen on `port` (IPv4 and IPv6), from /proc/net."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state = fields[1], fields[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count


def first_get(port: int, target: str) -> WireResponse:
    """The GET whose connection makes the activator start the server."""
    return get(("127.0.0.1", port), target, timeout=20)


def test_activated_server_answers_the_first_client_on_one_socket_shared_by_all_workers(
    activate: Starter,
) -> None:
    unused = free_port()
    run = [SOCKETIFY, "run", APP, "--workers", "2"]
    server = activate(["--fdname=web"], [*run, "--bind", f"127.0.0.1:{unused}"])
    # The activator execs socketify in place: the master keeps the activator's pid.
    assert first_get(server.port, "/ping").body == b"pong"
    wait_for(lambda: "listening on" in server.output(), 15, message="the master's start line")
    assert "using the sockets passed by systemd (web); --bind is ignored" in server.output()
    assert f"listening on http://127.0.0.1:{server.port} " in server.output()

    # One listening socket for the port: the inherited one, held by the master and every
    # worker (no SO_REUSEPORT socket per worker as with --bind), and nothing on --bind's port.
    inherited = os.readlink(f"/proc/{server.pid}/fd/3")
    workers = child_pids(server.pid)
    assert len(workers) == 2
    assert all(inherited in socket_inodes(pid) for pid in workers)
    assert listening_tcp_sockets(server.port) == 1
    assert listening_tcp_sockets(unused) == 0
    # The LISTEN_* variables were the master's; workers and their children never see them.
    assert get(("127.0.0.1", server.port), "/env/LISTEN_FDS").body == b"-"

    # A reload hands the same socket to the new generation.
    os.kill(server.pid, signal.SIGHUP)
    wait_for(lambda: "reload complete" in server.output(), 15, message="the reload")
    wait_for(lambda: not set(workers) & set(child_pids(server.pid)), 10, message="old workers")
    assert all(inherited in socket_inodes(pid) for pid in child_pids(server.pid))
    assert listening_tcp_sockets(server.port) == 1


def test_client_connecting_while_the_service_restarts_is_served_by_the_next_one(
    activate: Starter,
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "service.pid"
    run = [SOCKETIFY, "run", APP, "--workers", "2"]
    # The keeper plays systemd after activation: it holds the socket and restarts the
    # service one second after it exits (Restart=always, RestartSec=1).
    keeper = activate([], [sys.executable, KEEPER, str(pidfile), "1.0", "--", *run])
    _, first_master = first_get(keeper.port, "/pid").body.decode().split()
    assert int(first_master) == int(pidfile.read_text())

    os.kill(int(first_master), signal.SIGTERM)
    wait_for(lambda: not is_alive(int(first_master)), 10, message="the first server to exit")
    # No server runs now; the kernel still completes the handshake on the keeper's socket.
    with connect(("127.0.0.1", keeper.port), timeout=20) as sock:
        sock.sendall(request_bytes("GET", "/pid", [("Connection", "close")]))
        connected_while_down = int(pidfile.read_text()) == int(first_master)
        started = time.monotonic()
        response = Reader(sock).read_response()
    assert connected_while_down
    assert response.status == 200
    _, second_master = response.body.decode().split()
    assert int(second_master) == int(pidfile.read_text()) != int(first_master)
    assert time.monotonic() - started > 0.5  # it waited for the restart, it was not refused
