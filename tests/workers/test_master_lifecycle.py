"""Master start-up, addresses and stopping, against a real master process."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import weakref
from pathlib import Path

import pytest

from tests.support.ports import needs_ipv6
from tests.support.processes import is_alive
from tests.support.raw_client import WireResponse, get
from tests.support.wait import wait_for
from tests.workers.master_process import StartMaster
from workers.supervise.context import WorkerContext
from workers.supervise.master import Master, MasterConfig
from workers.supervise.sockets import BindError

pytestmark = pytest.mark.slow


@pytest.mark.timeout(20)
def test_start_returns_once_every_worker_is_ready_on_a_resolved_port(launch: StartMaster) -> None:
    master = launch("--workers", "2", "--bind", "127.0.0.1:0")
    host, port = master.report["addresses"][0]
    assert host == "127.0.0.1" and port > 0
    assert sorted(master.report["workers"]) == master.workers()
    assert len(master.workers()) == 2
    # Readiness means serving: the very first request after start succeeds.
    assert master.get("/").text == "ok"
    pids = {int(master.get("/pid").text) for _ in range(30)}
    assert pids <= set(master.workers())
    assert not master.report.get("gevent_in_master")


@needs_ipv6
@pytest.mark.timeout(20)
def test_ipv6_loopback_bind_serves(launch: StartMaster) -> None:
    master = launch("--bind", "[::1]:0")
    host, port = master.report["addresses"][0]
    assert host == "::1"
    assert get(("::1", port), "/").text == "ok"


@pytest.mark.timeout(20)
def test_unix_socket_bind_serves_and_is_removed_on_stop(
    launch: StartMaster, tmp_path: Path
) -> None:
    path = tmp_path / "app.sock"
    master = launch("--workers", "2", "--bind", f"unix:{path}")
    assert master.report["addresses"] == [str(path)]
    assert get(str(path), "/version").text == "v1"
    master.signal(signal.SIGTERM)
    assert master.wait_exit(10) == 0
    assert not path.exists()


@pytest.mark.timeout(20)
def test_term_lets_an_in_flight_request_finish(launch: StartMaster) -> None:
    master = launch("--workers", "1", "--graceful-timeout", "5")
    result: dict[str, WireResponse | Exception] = {}

    def slow_request() -> None:
        try:
            result["response"] = master.get("/slow?secs=1.5", timeout=10)
        except Exception as exc:
            result["response"] = exc

    client = threading.Thread(target=slow_request)
    client.start()
    time.sleep(0.4)  # the request is being handled
    workers = master.workers()
    started = time.monotonic()
    master.signal(signal.SIGTERM)

    def refuses_new_connections() -> bool:
        try:
            master.get("/", timeout=1)
        except (ConnectionRefusedError, ConnectionResetError):
            # Reset: the connect landed in the backlog just before the listener closed.
            return True
        return False

    # Stopped accepting at once, while the slow request is still being served.
    wait_for(refuses_new_connections, timeout=0.8)
    assert client.is_alive()
    client.join(10)
    response = result["response"]
    assert isinstance(response, WireResponse), response
    assert response.text == "slow done"
    assert master.wait_exit(10) == 0
    assert time.monotonic() - started < 4
    assert not any(pid in workers for pid in master.workers())
    with pytest.raises(ConnectionRefusedError):
        master.get("/")


@pytest.mark.timeout(20)
def test_quit_stops_at_once_dropping_in_flight_requests(launch: StartMaster) -> None:
    master = launch("--workers", "1", "--graceful-timeout", "10")
    result: dict[str, object] = {}

    def slow_request() -> None:
        try:
            result["response"] = master.get("/slow?secs=8", timeout=15)
        except Exception as exc:
            result["response"] = exc

    client = threading.Thread(target=slow_request)
    client.start()
    time.sleep(0.4)
    started = time.monotonic()
    master.signal(signal.SIGQUIT)
    assert master.wait_exit(5) == 0
    assert time.monotonic() - started < 3
    client.join(5)
    assert isinstance(result["response"], (OSError, EOFError))  # cut off, not answered


@pytest.mark.timeout(20)
def test_worker_import_error_stops_the_master_with_a_clear_message(launch: StartMaster) -> None:
    started = time.monotonic()
    master = launch("--workers", "2", version="boom", wait_ready=False)
    code = master.wait_exit(10)
    assert code == 3
    assert time.monotonic() - started < 8
    stderr = master.stderr()
    assert "ImportError: fake_app refuses to import" in stderr
    assert "worker failed to boot; see the traceback above" in stderr
    assert stderr.count("Traceback (most recent call last)") <= 2  # no respawn loop
    assert master.workers() == []


def idle_target(ctx: WorkerContext) -> None:
    ctx.ready()
    ctx.wait_stop()


@pytest.mark.timeout(20)
def test_in_process_master_is_stopped_from_another_thread() -> None:
    config = MasterConfig(binds=["127.0.0.1:0"], workers=2, graceful_timeout=2, timeout=5)
    master = Master(config, idle_target)
    master.start()
    workers = master.worker_pids
    try:
        assert len(workers) == 2 and master.worker_count == 2
        assert all(is_alive(pid) for pid in workers)
        (address,) = master.addresses
        assert isinstance(address, tuple)
        host, port = address
        with socket.create_connection((host, port), timeout=2):
            pass  # the kernel queues it on a slot socket: the port is open
        threading.Timer(0.2, master.stop).start()
        assert master.wait() == 0
    finally:
        for pid in workers:
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not any(is_alive(pid) for pid in workers)
    assert master.worker_pids == []


@pytest.mark.timeout(10)
def test_start_raises_bind_error_before_forking_anything() -> None:
    hangup = signal.getsignal(signal.SIGHUP)  # SIG_IGN under nohup, the default otherwise
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        master = Master(MasterConfig(binds=[f"127.0.0.1:{port}"], workers=2), lambda ctx: None)
        with pytest.raises(BindError, match="Address already in use"):
            master.start()
    assert master.worker_pids == []
    # The handlers it installed were put back.
    assert signal.getsignal(signal.SIGHUP) == hangup


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        MasterConfig(binds=[])
    with pytest.raises(TypeError):
        MasterConfig(binds="127.0.0.1:80")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        MasterConfig(binds=[":80"], workers=0)
    with pytest.raises(ValueError):
        MasterConfig(binds=[":80"], graceful_timeout=-1)
    assert MasterConfig(binds=[":80"]).worker_count >= 1


@pytest.mark.timeout(20)
def test_term_while_workers_boot_stops_cleanly(launch: StartMaster) -> None:
    master = launch("--workers", "2", wait_ready=False)
    workers = master.wait_workers(lambda pids: len(pids) == 2, timeout=10)
    master.signal(signal.SIGTERM)  # most likely while the workers still import gevent
    assert master.wait_exit(10) == 0
    wait_for(lambda: not any(is_alive(pid) for pid in workers), timeout=5)
    assert "Traceback" not in master.stderr()


class _Referent:
    """Something a weak proxy can point at."""


@pytest.mark.timeout(20)
def test_workers_boot_in_a_parent_holding_dead_weak_proxies() -> None:
    # gevent's patching walks every object looking for locks; a proxy whose referent is gone
    # raises ReferenceError on isinstance(). A big parent (--preload, a test run) has some.
    referent = _Referent()
    dead = weakref.proxy(referent)
    del referent
    config = MasterConfig(binds=["127.0.0.1:0"], workers=1, graceful_timeout=2, timeout=5)
    master = Master(config, idle_target)
    master.start()  # raises BootError if the worker could not patch
    try:
        assert len(master.worker_pids) == 1
    finally:
        master.stop()
        assert master.wait() == 0
    assert type(dead) in weakref.ProxyTypes  # still referenced while the worker booted
