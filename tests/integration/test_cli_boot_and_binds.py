"""`socketify run` start-up as users meet it: boot failures, bind specs (port 0, IPv6, Unix
sockets), in-process mode; and the rest of the command line."""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid
from pathlib import Path

import pytest

from tests.support.ports import free_port, needs_ipv6
from tests.support.raw_client import Reader, connect, get, request_bytes
from tests.support.serve import Launcher, run_cli
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)


# -- boot failures ----------------------------------------------------------------------------


def test_app_raising_import_error_stops_the_master_with_the_traceback_and_no_respawn_loop(
    serve: Launcher,
) -> None:
    server = serve("tests.integration.apps.broken:server", workers=2, wait=False)
    started = time.monotonic()
    status = server.wait_exit(10)
    assert status is not None, "the master kept running (respawn loop?)"
    assert time.monotonic() - started < 5
    assert status != 0
    output = server.output()
    assert "ModuleNotFoundError: No module named 'a_module_that_does_not_exist'" in output
    assert 'apps/broken.py", line' in output  # the traceback points at the user's line
    # One boot attempt per worker at most: no respawns.
    assert output.count("Traceback (most recent call last)") <= 2
    assert "error: the app failed to import; see the traceback above" in output


def test_app_path_naming_a_missing_module_gives_a_one_line_error_and_exit_1() -> None:
    result = run_cli("run", "no_such_module_here:server", "--bind", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    error, hint = result.stderr.strip().splitlines()
    assert error == (
        "error: cannot load app 'no_such_module_here:server': no module named 'no_such_module_here'"
    )
    assert hint.startswith("hint: ")
    assert "Traceback" not in result.stderr


def test_app_path_naming_a_missing_attribute_gives_a_one_line_error_and_exit_1() -> None:
    result = run_cli(
        "run", "tests.support.apps.basic:no_such_attr", "--bind", f"127.0.0.1:{free_port()}"
    )
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 2, result.stderr  # the error and a hint


def test_port_in_use_gives_failed_to_bind_and_exit_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("run", "tests.support.apps.basic:server", "--bind", f"127.0.0.1:{port}")
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: failed to bind 127.0.0.1:{port}")
    assert "Address already in use" in result.stderr
    assert "Traceback" not in result.stderr


# -- binds ------------------------------------------------------------------------------------


def test_port_0_is_resolved_and_announced_in_the_startup_line(serve: Launcher) -> None:
    server = serve(bind="127.0.0.1:0", workers=2, wait=False)
    announced = server.wait_listening()
    assert announced.startswith("http://127.0.0.1:")
    port = int(announced.rsplit(":", 1)[1])
    assert port != 0
    server.address = ("127.0.0.1", port)
    # Both workers listen on the one resolved port.
    pids = {get(server.address, "/pid").body for _ in range(40)}
    assert len(pids) == 2


@needs_ipv6
def test_ipv6_loopback_bind_serves_over_ipv6(serve: Launcher) -> None:
    port = free_port("::1")
    server = serve(bind=f"[::1]:{port}")
    with connect(("::1", port)) as sock:
        assert sock.family == socket.AF_INET6
        sock.sendall(request_bytes("GET", "/ping"))
        assert Reader(sock).read_response().body == b"pong"
    assert server.wait_listening() == f"http://[::1]:{port}"


def test_unix_socket_bind_serves_and_its_file_is_removed_on_stop(serve: Launcher) -> None:
    path = f"/tmp/socketify-test-{uuid.uuid4().hex[:12]}.sock"
    server = serve(bind=f"unix:{path}", workers=2)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(path)
            sock.sendall(request_bytes("GET", "/ping") * 2)
            reader = Reader(sock)
            assert [reader.read_response().body for _ in range(2)] == [b"pong", b"pong"]
        assert server.wait_listening() == f"unix:{path}"
        assert server.stop() == []
        assert server.proc.returncode == 0
        assert not os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)


def test_workers_0_serves_in_the_master_process_and_stops_on_term(serve: Launcher) -> None:
    server = serve(workers=0)
    assert get(server.address, "/pid").body == str(server.pid).encode()
    assert server.workers() == []
    server.wait_listening()
    assert "in-process" in server.output()
    # Same behaviour as with workers: a refusal closes, keep-alive works, errors are 500.
    with connect(server.address) as sock:
        reader = Reader(sock)
        sock.sendall(request_bytes("GET", "/boom") + request_bytes("GET", "/ping"))
        assert [reader.read_response().status for _ in range(2)] == [500, 200]
    # TERM drains an in-flight request here too.
    with connect(server.address) as busy:
        busy.sendall(request_bytes("GET", "/sleep?s=0.6"))
        time.sleep(0.2)
        server.signal(signal.SIGTERM)
        res = Reader(busy).read_response()
        assert (res.status, res.header("connection")) == (200, "close")
    assert server.wait_exit(5) == 0


def test_master_process_never_loads_gevent(serve: Launcher) -> None:
    # Forking a process that holds gevent's hub or threads is unsafe, so the master never loads it.
    server = serve(workers=1)
    maps = Path(f"/proc/{server.pid}/maps").read_text()
    assert "gevent" not in maps and "greenlet" not in maps
    (worker,) = server.workers()
    assert "gevent" in Path(f"/proc/{worker}/maps").read_text()  # the check can see it


# -- the rest of the command line -------------------------------------------------------------


def test_version_prints_the_version_on_stdout() -> None:
    result = run_cli("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, "Socketify 0.1.0\n", "")


def test_info_lists_the_version_and_optional_features() -> None:
    result = run_cli("--info")
    lines = result.stdout.splitlines()
    assert result.returncode == 0
    assert lines[0] == "Socketify 0.1.0"
    # The import name is shared with socketify.py: say which distribution this one is.
    assert lines[1].startswith("Distribution: socketify-gevent (")
    *features, compiled = lines[2:]
    labels = {line.partition(":")[0] for line in features}
    assert {"TLS", "SQLite", "Postgres", "MySQL", "Mongo", "HTTP/2"} <= labels
    assert all(line.split(": ")[1] in ("yes", "no") for line in features)
    # The build: which modules are compiled, or "no (pure Python)".
    assert compiled.startswith("Compiled: ")


def test_no_arguments_print_usage_on_stderr_and_exit_2() -> None:
    result = run_cli()
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: socketify")


def test_help_goes_to_stdout_and_lists_every_command_and_option() -> None:
    result = run_cli("--help")
    assert (result.returncode, result.stderr) == (0, "")
    for command in ("socketify run APP", "socketify db", "socketify systemd-unit APP"):
        assert command in result.stdout
    # Generated from the parsers: every declared option has its line.
    for option in ("--workers N", "--bind ADDR", "--graceful-timeout S", "--run-http DIR"):
        assert f"  {option}" in result.stdout


def test_run_help_goes_to_stdout() -> None:
    result = run_cli("run", "--help")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("usage: socketify run APP [options]")
    assert "--access-log-format F" in result.stdout


def test_unknown_option_is_named_in_one_line_with_a_hint_and_exits_2() -> None:
    result = run_cli("--frobnicate")
    assert result.returncode == 2
    assert result.stderr == "error: unknown option: --frobnicate\n(see `socketify --help`)\n"


def test_unknown_run_option_exits_2() -> None:
    result = run_cli("run", "tests.support.apps.basic:server", "--frobnicate")
    assert result.returncode == 2
    assert "unknown option: --frobnicate" in result.stderr
    assert "socketify run --help" in result.stderr


def test_a_load_error_is_one_line_and_a_hint() -> None:
    result = run_cli("run", "json:nothing")
    assert result.returncode == 1
    error, hint = result.stderr.splitlines()
    assert error == (
        "error: cannot load app 'json:nothing': module 'json' has no attribute 'nothing'"
        " (it has: detect_encoding, dump, dumps, load, loads)"
    )
    assert hint.startswith("hint: APP is module, module:attribute or module:factory(args)")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory to serve, next to a file that must stay private."""
    root = tmp_path / "site"
    (root / "sub").mkdir(parents=True)
    (root / "hello.txt").write_text("hello from run-http\n")
    (root / "sub" / "inner.txt").write_text("inner\n")
    (tmp_path / "private.txt").write_text("top secret\n")
    return root


def test_run_http_serves_files_lists_directories_and_refuses_dot_dot(
    serve: Launcher, site: Path
) -> None:
    port = free_port()
    server = serve.start(
        ["--run-http", str(site), "--host", "127.0.0.1", "--port", str(port)],
        ("127.0.0.1", port),
    )
    address = server.address
    assert f"Serving {site} on http://127.0.0.1:{port}" in server.output()
    file = get(address, "/hello.txt")
    assert (file.status, file.body) == (200, b"hello from run-http\n")
    listing = get(address, "/sub/")
    assert listing.status == 200
    assert (listing.header("content-type") or "").startswith("text/html")
    assert b"inner.txt" in listing.body
    for target in ("/../private.txt", "/%2e%2e/private.txt", "/sub/..%2f..%2fprivate.txt"):
        refused = get(address, target)
        assert refused.status in (400, 403, 404), target
        assert b"top secret" not in refused.body
    assert get(address, "/missing.txt").status == 404


def test_run_http_on_a_missing_directory_exits_1(tmp_path: Path) -> None:
    result = run_cli("--run-http", str(tmp_path / "nope"), "--port", str(free_port()))
    assert result.returncode == 1
    assert result.stderr.startswith("error: not a directory:")


def test_access_log_format_flag_logs_every_request_before_app_middleware(
    serve: Launcher, tmp_path: Path
) -> None:
    log_file = tmp_path / "access.log"
    server = serve(args=["--access-log-format", "common", "--access-log", str(log_file)])
    assert get(server.address, "/ping").status == 200
    assert get(server.address, "/no-such-route").status == 404
    wait_for(lambda: "no-such-route" in log_file.read_text(), 5, message="the second line")
    # The launcher's readiness probe is logged too; our two requests come last, in order.
    lines = log_file.read_text().splitlines()[-2:]
    assert '"GET /ping HTTP/1.1" 200' in lines[0]
    assert '"GET /no-such-route HTTP/1.1" 404' in lines[1]
