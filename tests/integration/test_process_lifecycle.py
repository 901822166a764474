"""The pre-fork master under the real CLI: graceful TERM (in-flight requests finish), HUP reload
under load, a killed worker, TTIN/TTOU."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.processes import is_alive
from tests.support.raw_client import Reader, connect, get, request_bytes
from tests.support.serve import Launcher, ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(90)

GRACEFUL = 3.0  # --graceful-timeout given to the servers below


class Load(threading.Thread):
    """Requests `target` on a fresh connection, back to back, until stopped."""

    def __init__(self, server: ServerProcess, target: str) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.target = target
        self.bodies: Counter[bytes] = Counter()
        self.failures: list[str] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                res = get(self.server.address, self.target, timeout=5)
                if res.status != 200:
                    self.failures.append(f"status {res.status}")
                self.bodies[res.body] += 1
            except (OSError, EOFError, AssertionError) as exc:
                self.failures.append(repr(exc))

    def finish(self) -> None:
        self._stop_event.set()
        self.join(10)

    @property
    def count(self) -> int:
        return sum(self.bodies.values())


def test_term_lets_the_in_flight_request_finish_refuses_new_clients_and_exits_0(
    serve: Launcher,
) -> None:
    server = serve("tests.support.apps.basic:relaxed", args=["--graceful-timeout", str(GRACEFUL)])
    idle = connect(server.address)  # a keep-alive connection with nothing in flight
    idle_reader = Reader(idle)
    idle.sendall(request_bytes("GET", "/ping"))
    assert idle_reader.read_response().status == 200
    with connect(server.address, timeout=GRACEFUL + 2) as busy:
        busy.sendall(request_bytes("GET", "/sleep?s=1.5"))
        time.sleep(0.3)  # the handler is sleeping now
        stop_began = time.monotonic()
        server.signal(signal.SIGTERM)

        def refused() -> bool:
            try:
                connect(server.address, timeout=1).close()
            except (ConnectionRefusedError, ConnectionResetError):
                # Reset: the connect landed in the backlog just before the listener closed.
                return True
            return False

        wait_for(refused, 1.0, message="new connections to be refused")
        # The idle keep-alive connection is closed after a short grace (a request may have
        # been on the wire), not held for the whole graceful_timeout.
        assert idle_reader.at_eof(timeout=GRACEFUL - 1.0)
        assert time.monotonic() - stop_began < GRACEFUL - 0.5
        idle.close()
        res = Reader(busy).read_response()
        assert (res.status, res.body) == (200, b"slept 1.5")
        assert res.header("connection") == "close"
    assert refused(), "a connection was accepted after the stop began"
    status = server.wait_exit(GRACEFUL + 1.0)
    assert status == 0, server.output()
    assert time.monotonic() - stop_began < GRACEFUL + 1.0


def _write_payload(directory: Path, version: str) -> None:
    path = directory / "reload_payload.py"
    tmp = directory / "reload_payload.tmp"
    tmp.write_text(f"VERSION = {version!r}\n")
    os.replace(tmp, path)  # atomic: a worker booting right now never sees a half file


def _reloads_done(server: ServerProcess, count: int) -> bool:
    return server.output().count("reload complete") >= count


def _serves_only(server: ServerProcess, body: bytes, attempts: int = 10) -> bool:
    return all(get(server.address, "/version").body == body for _ in range(attempts))


def test_two_hups_under_load_lose_no_request_and_serve_the_changed_module(
    serve: Launcher, tmp_path: Path
) -> None:
    payload_dir = tmp_path / "payload"
    payload_dir.mkdir()
    _write_payload(payload_dir, "v1")
    server = serve(
        "tests.integration.apps.reloadable:server",
        workers=2,
        args=["--graceful-timeout", str(GRACEFUL)],
        env={"PYTHONPATH": str(payload_dir)},
    )
    first_workers = set(server.workers())
    assert len(first_workers) == 2
    load = Load(server, "/version")
    load.start()
    try:
        for number, version in ((1, "v2"), (2, "v3")):
            time.sleep(0.3)
            _write_payload(payload_dir, version)
            server.signal(signal.SIGHUP)
            wait_for(
                functools.partial(_reloads_done, server, number),
                15,
                message=f"reload {number} to complete",
            )
            wait_for(
                functools.partial(_serves_only, server, version.encode()),
                5,
                message=f"{version} to be served",
            )
        time.sleep(0.3)
    finally:
        load.finish()
    assert load.failures == [], load.failures[:5]
    assert load.count > 50, "the load thread barely ran"
    assert set(load.bodies) <= {b"v1", b"v2", b"v3"}
    assert load.bodies[b"v3"] > 0
    # The old generations are gone: two workers, none of the first ones.
    wait_for(lambda: len(server.workers()) == 2, GRACEFUL + 3, message="old workers to exit")
    assert not first_workers & set(server.workers())


def test_worker_killed_with_sigkill_is_respawned_and_the_port_keeps_serving(
    serve: Launcher,
) -> None:
    server = serve("tests.support.apps.basic:server", workers=2)
    before = server.workers()
    assert len(before) == 2
    victim = before[0]
    load = Load(server, "/pid")
    load.start()
    try:
        time.sleep(0.2)
        os.kill(victim, signal.SIGKILL)
        # Right after the kill, new connections are still served (by the other worker, or
        # queued on the dead worker's socket, which the master keeps, until the respawn).
        for _ in range(20):
            assert get(server.address, "/pid", timeout=5).status == 200
        wait_for(
            lambda: len(server.workers()) == 2 and victim not in server.workers(),
            5,
            message="the killed worker to be replaced",
        )
        replacement = (set(server.workers()) - set(before)).pop()
        wait_for(
            lambda: get(server.address, "/pid").body == str(replacement).encode(),
            5,
            message="the replacement to serve",
        )
        time.sleep(0.2)
    finally:
        load.finish()
    # At most the one request the dead worker held at the instant of the kill is lost.
    assert len(load.failures) <= 1, load.failures
    assert load.count > 20
    assert "exited unexpectedly (signal SIGKILL)" in server.output()


def _serving_pids(server: ServerProcess, attempts: int = 60) -> set[int]:
    return {int(get(server.address, "/pid").body) for _ in range(attempts)}


def test_ttin_adds_a_worker_and_ttou_removes_one(serve: Launcher) -> None:
    server = serve(
        "tests.support.apps.basic:server", workers=1, args=["--graceful-timeout", str(GRACEFUL)]
    )
    (first,) = server.workers()
    server.signal(signal.SIGTTIN)
    wait_for(lambda: len(server.workers()) == 2, 10, message="a second worker")
    (added,) = set(server.workers()) - {first}
    # The new worker accepts too (the kernel spreads fresh connections over both sockets).
    wait_for(lambda: added in _serving_pids(server), 10, message="the new worker to serve")
    server.signal(signal.SIGTTOU)
    wait_for(lambda: server.workers() == [first], GRACEFUL + 3, message="back to one worker")
    assert _serving_pids(server, 20) == {first}
    server.signal(signal.SIGTTOU)  # never below one worker
    time.sleep(0.5)
    assert server.workers() == [first]
    assert get(server.address, "/ping").body == b"pong"


def test_hup_with_code_that_fails_to_import_keeps_the_old_workers_serving(
    serve: Launcher, tmp_path: Path
) -> None:
    payload_dir = tmp_path / "payload"
    payload_dir.mkdir()
    _write_payload(payload_dir, "v1")
    server = serve(
        "tests.integration.apps.reloadable:server",
        workers=2,
        args=["--graceful-timeout", str(GRACEFUL)],
        env={"PYTHONPATH": str(payload_dir)},
    )
    workers = set(server.workers())
    (payload_dir / "reload_payload.py").write_text("VERSION = (\n")  # a SyntaxError
    server.signal(signal.SIGHUP)
    wait_for(lambda: "reload failed" in server.output(), 10, message="the reload to fail")
    assert "SyntaxError" in server.output()
    time.sleep(0.5)
    assert set(server.workers()) == workers
    assert {get(server.address, "/version").body for _ in range(20)} == {b"v1"}
    # Fixing the code and reloading again works.
    _write_payload(payload_dir, "v2")
    server.signal(signal.SIGHUP)
    wait_for(lambda: "reload complete" in server.output(), 10, message="the second reload")
    wait_for(
        functools.partial(_serves_only, server, b"v2"),
        GRACEFUL + 2,
        message="v2 to be served everywhere",
    )


def test_master_killed_with_sigkill_takes_its_workers_and_the_port_with_it(serve: Launcher) -> None:
    # No orphan worker may keep a port open after the master dies.
    server = serve("tests.support.apps.basic:server", workers=2)
    workers = server.workers()
    assert len(workers) == 2
    server.signal(signal.SIGKILL)
    assert server.wait_exit(5) == -signal.SIGKILL

    def gone() -> bool:
        return not any(is_alive(pid) for pid in workers)

    wait_for(gone, 5, message="the orphaned workers to exit")
    with pytest.raises(ConnectionRefusedError):
        connect(server.address, timeout=1)


def test_max_requests_recycles_workers_without_failing_a_request(serve: Launcher) -> None:
    server = serve("tests.support.apps.basic:server", workers=1, args=["--max-requests", "20"])
    (first,) = server.workers()
    load = Load(server, "/pid")
    load.start()
    try:
        wait_for(lambda: first not in server.workers(), 10, message="the worker to be recycled")
        wait_for(lambda: len(load.bodies) >= 2, 5, message="a second worker to answer")
    finally:
        load.finish()
    assert load.failures == [], load.failures[:5]
    assert str(first).encode() in load.bodies


def test_worker_whose_hub_is_blocked_past_timeout_is_replaced(serve: Launcher) -> None:
    # --timeout 2 (not less): on a loaded 2-core machine a healthy worker may miss a beat.
    server = serve("tests.support.apps.basic:server", workers=1, args=["--timeout", "2"])
    (frozen,) = server.workers()
    with connect(server.address, timeout=15) as sock:
        sock.sendall(request_bytes("GET", "/block?s=12"))
        wait_for(
            lambda: frozen not in server.workers() and server.workers(),
            8,
            message="the frozen worker to be replaced",
        )
        # The client of the frozen worker sees its connection end, not a 12 s hang.
        assert Reader(sock).at_eof(timeout=3), server.output()
    assert f"pid {frozen}" in server.output() and "silent for" in server.output()
    try:
        wait_for(lambda: get(server.address, "/ping").body == b"pong", 5, message="serving again")
    except (OSError, AssertionError) as exc:
        raise AssertionError(f"not serving again: {exc!r}\n{server.output()}") from exc


def test_worker_whose_app_import_outlasts_the_timeout_is_not_killed_while_booting(
    serve: Launcher,
) -> None:
    # The heartbeat cannot run while the app is imported; booting gets its own allowance.
    server = serve(
        "tests.support.apps.slow_boot:server",
        workers=1,
        args=["--timeout", "1"],
        env={"SLOW_BOOT_SECONDS": "2.5"},
    )
    (booted,) = server.workers()
    assert get(server.address, "/ping").body == f"pong {booted}".encode()
    time.sleep(1.5)  # past the timeout again: a ready worker that beats is left alone
    assert server.workers() == [booted]
    assert "silent for" not in server.output(), server.output()


def test_graceful_timeout_of_the_apps_server_bounds_the_drain_under_socketify_run(
    serve: Launcher,
) -> None:
    server = serve("tests.support.apps.basic:relaxed")  # Server(graceful_timeout=3.0), no CLI flag
    with connect(server.address, timeout=10) as sock:
        sock.sendall(request_bytes("GET", "/sleep?s=5"))
        time.sleep(0.3)
        server.signal(signal.SIGTERM)
        assert server.wait_exit(GRACEFUL + 1.5) is not None, "the drain outlived graceful_timeout"


def test_quit_stops_at_once_cutting_in_flight_requests(serve: Launcher) -> None:
    server = serve("tests.support.apps.basic:relaxed", args=["--graceful-timeout", "30"])
    with connect(server.address, timeout=10) as sock:
        sock.sendall(request_bytes("GET", "/sleep?s=8"))
        time.sleep(0.3)
        started = time.monotonic()
        server.signal(signal.SIGQUIT)
        assert Reader(sock).at_eof(timeout=4)  # cut, not drained for 30 s
    status = server.wait_exit(4)
    assert status == 0, server.output()
    assert time.monotonic() - started < 4


def test_usr1_reopens_the_error_log_file(serve: Launcher, tmp_path: Path) -> None:
    log = tmp_path / "error.log"
    server = serve("tests.support.apps.basic:server", workers=2, args=["--error-log", str(log)])
    get(server.address, "/boom")
    wait_for(lambda: "secret detail" in log.read_text(), 5, message="the first error logged")
    rotated = tmp_path / "error.log.1"
    os.rename(log, rotated)  # what logrotate does
    server.signal(signal.SIGUSR1)
    wait_for(log.exists, 5, message="the log file to be reopened")
    time.sleep(0.3)  # the workers reopen theirs on the forwarded signal
    for _ in range(6):  # reach both workers
        get(server.address, "/boom")
    wait_for(lambda: "secret detail" in log.read_text(), 5, message="errors in the new file")
    assert rotated.read_text().count("unhandled exception") == 1
