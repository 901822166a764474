"""TCP services through the real `socketify run` command, with real client sockets."""

from __future__ import annotations

import signal
import socket
import ssl
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.pki import Pki, make_pki
from tests.support.sd_notify import NotifyListener
from tests.support.serve import Launcher, ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`socketify run examples.tcp_echo:service --workers 2`, shared by the module."""
    with Launcher(tmp_path_factory.mktemp("echo")) as launcher:
        yield launcher("examples.tcp_echo:service", workers=2)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A throwaway CA with server and client certificates."""
    return make_pki(tmp_path_factory.mktemp("pki"))


def connect(server: ServerProcess, timeout: float = 5.0) -> socket.socket:
    """A blocking client socket to the server."""
    return socket.create_connection(server.tcp, timeout=timeout)


def read_line(sock: socket.socket) -> bytes:
    """Bytes up to and including the next newline (b"" if the server closed first)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            return line
        line += chunk
    return line


def read_to_close(sock: socket.socket) -> bytes:
    """Everything until the server closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_the_start_line_names_a_tcp_address(echo_server: ServerProcess) -> None:
    assert echo_server.wait_listening() == f"tcp://127.0.0.1:{echo_server.port}"


def test_every_line_comes_back(echo_server: ServerProcess) -> None:
    with connect(echo_server) as sock:
        sock.sendall(b"hello\nwor")
        assert read_line(sock) == b"hello\n"
        sock.sendall(b"ld\r\n")
        assert read_line(sock) == b"world\r\n"


def test_many_clients_at_once(echo_server: ServerProcess) -> None:
    def converse(number: int) -> list[bytes]:
        with connect(echo_server) as sock:
            replies = []
            for turn in range(20):
                sock.sendall(f"client {number} turn {turn}\n".encode())
                replies.append(read_line(sock))
            return replies

    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(converse, range(100)))
    for number, replies in enumerate(results):
        assert replies == [f"client {number} turn {turn}\n".encode() for turn in range(20)]


def test_a_line_over_the_bound_gets_an_error_and_the_connection_closes(
    echo_server: ServerProcess,
) -> None:
    with connect(echo_server) as sock:
        sock.sendall(b"ok\n")
        assert read_line(sock) == b"ok\n"
        sock.sendall(b"x" * 5000 + b"\n")
        assert read_to_close(sock) == b"error: line longer than 1024 bytes\n"
    with connect(echo_server) as sock:  # the server carries on
        sock.sendall(b"still here\n")
        assert read_line(sock) == b"still here\n"


def test_a_client_that_closes_mid_line_gets_nothing_and_breaks_nothing(
    echo_server: ServerProcess,
) -> None:
    with connect(echo_server) as sock:
        sock.sendall(b"no newline")
        sock.shutdown(socket.SHUT_WR)
        assert read_to_close(sock) == b"no newline"  # the last line, unterminated
    with connect(echo_server) as sock:
        sock.sendall(b"next\n")
        assert read_line(sock) == b"next\n"


def test_both_workers_serve(echo_server: ServerProcess) -> None:
    assert len(echo_server.workers()) == 2


def test_an_idle_connection_is_closed(serve: Launcher) -> None:
    server = serve("tests.tcp.services:idle")
    with connect(server) as sock:
        sock.sendall(b"a\n")
        assert read_line(sock) == b"a\n"
        started = time.monotonic()
        assert read_to_close(sock) == b""  # idle_timeout=0.5 closes us
        assert 0.3 < time.monotonic() - started < 3.0


def test_a_busy_connection_is_not_idle(serve: Launcher) -> None:
    server = serve("tests.tcp.services:idle")
    with connect(server) as sock:
        for turn in range(8):  # 1.6 s in all, each gap under the 0.5 s idle timeout
            time.sleep(0.2)
            sock.sendall(f"{turn}\n".encode())
            assert read_line(sock) == f"{turn}\n".encode()


def test_the_connection_cap_makes_the_next_client_wait(serve: Launcher) -> None:
    server = serve("tests.tcp.services:capped")  # max_connections=1, one worker
    first = connect(server)
    first.sendall(b"first\n")
    assert read_line(first) == b"first\n"
    with connect(server, timeout=0.5) as second:  # the kernel completes the handshake...
        second.sendall(b"second\n")
        with pytest.raises(TimeoutError):  # ...but it is not served while the first is open
            second.recv(10)
        first.close()
        second.settimeout(5)
        assert read_line(second) == b"second\n"


def test_a_handler_that_raises_is_logged_and_the_server_carries_on(serve: Launcher) -> None:
    server = serve("tests.tcp.services:crash")
    with connect(server) as sock:
        sock.sendall(b"boom\n")
        assert read_to_close(sock) == b""
    with connect(server) as sock:
        sock.sendall(b"calm\n")
        assert read_line(sock) == b"fine\n"
    assert "the handler failed on purpose" in server.output()


def test_length_prefixed_frames(serve: Launcher) -> None:
    from socketify.tcp import pack_frame

    server = serve("tests.tcp.services:framed")
    with connect(server) as sock:
        sock.sendall(pack_frame(b"abc") + pack_frame(b"hello")[:5])
        assert sock.recv(7) == pack_frame(b"cba")
        sock.sendall(b"ello")
        assert sock.recv(9) == pack_frame(b"olleh")
        sock.sendall((5000).to_bytes(4, "big"))  # over max_size: closed without a reply
        assert read_to_close(sock) == b""


def test_graceful_stop_lets_a_busy_handler_finish(serve: Launcher) -> None:
    server = serve("tests.tcp.services:slow")
    with connect(server) as sock:
        sock.sendall(b"slow\n")
        time.sleep(0.2)  # the handler is asleep in its one-second answer
        server.signal(signal.SIGTERM)
        assert read_line(sock) == b"done slow\n"
        assert read_to_close(sock) == b""  # closed once the drain ends
    assert server.wait_exit(10) == 0
    with pytest.raises(OSError):
        connect(server, timeout=1).close()


def test_graceful_stop_closes_an_idle_client_after_the_graceful_timeout(serve: Launcher) -> None:
    server = serve("tests.tcp.services:slow", args=["--graceful-timeout", "0.5"])
    with connect(server) as sock:
        sock.sendall(b"hi\n")
        assert read_line(sock) == b"done hi\n"
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        assert read_to_close(sock) == b""
        assert time.monotonic() - started < 4.0
    assert server.wait_exit(10) == 0


def test_a_handler_hears_the_stop_says_goodbye_and_the_worker_exits_at_once(
    serve: Launcher,
) -> None:
    server = serve("tests.tcp.services:farewell", workers=2)
    with connect(server) as first, connect(server) as second:
        for sock in (first, second):
            assert read_line(sock) == b"hello\n"
        first.sendall(b"still here\n")
        assert read_line(first) == b"still here\n"
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        for sock in (first, second):
            assert read_line(sock) == b"bye: the server is stopping\n"
            assert read_to_close(sock) == b""
        # Far below the 30-second graceful_timeout: nothing was left to wait for.
        assert server.wait_exit(12) == 0
        assert time.monotonic() - started < 12
    assert "Traceback" not in server.output()


def test_a_handler_waiting_for_the_stop_wakes_when_a_reload_begins(serve: Launcher) -> None:
    server = serve("tests.tcp.services:watchful")
    with connect(server) as sock:
        assert read_line(sock) == b"waiting\n"
        server.signal(signal.SIGHUP)
        assert read_line(sock) == b"stop seen\n"
        assert read_to_close(sock) == b""


def test_hup_replaces_the_workers_and_keeps_serving(serve: Launcher) -> None:
    server = serve("examples.tcp_echo:service")
    before = set(server.workers())
    server.signal(signal.SIGHUP)
    wait_for(
        lambda: (now := set(server.workers())) and not now & before, 15.0, message="new workers"
    )
    with connect(server) as sock:
        sock.sendall(b"after hup\n")
        assert read_line(sock) == b"after hup\n"


def test_tls_with_the_certificate_from_the_command_line(serve: Launcher, pki: Pki) -> None:
    args = ["--certfile", pki.server.cert, "--keyfile", pki.server.key]
    server = serve("tests.tcp.services:whoami", args=args)
    assert server.wait_listening().startswith("tls://")
    context = ssl.create_default_context(cafile=pki.ca)
    with connect(server) as raw, context.wrap_socket(raw, server_hostname="localhost") as sock:
        assert read_line(sock) == f"127.0.0.1 {sock.version()} -\n".encode()


def test_mutual_tls_hands_the_client_certificate_to_the_handler(serve: Launcher, pki: Pki) -> None:
    args = ["--certfile", pki.server.cert, "--keyfile", pki.server.key, "--ca-file", pki.ca]
    server = serve("tests.tcp.services:whoami", args=args)
    context = ssl.create_default_context(cafile=pki.ca)
    context.load_cert_chain(pki.client.cert, pki.client.key)
    with connect(server) as raw, context.wrap_socket(raw, server_hostname="localhost") as sock:
        version, name = read_line(sock).split()[1:]
    assert version.startswith(b"TLS") and name != b"-"
    plain = ssl.create_default_context(cafile=pki.ca)  # no client certificate: refused
    with (
        pytest.raises((ssl.SSLError, ConnectionError)),
        connect(server) as raw,
        plain.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        sock.recv(10)
        raise ConnectionError("closed without an alert")  # also a refusal


def test_an_object_that_is_no_service_is_refused() -> None:
    from tests.support.serve import run_cli

    result = run_cli("run", "tests.tcp.services:time", "--workers", "1")
    assert result.returncode == 1
    assert "neither a socketify Server, a WSGI application nor a tcp.Service" in result.stderr


def test_systemd_hears_ready_and_stopping(serve: Launcher, notify: NotifyListener) -> None:
    server = serve("examples.tcp_echo:service", workers=2, env={"NOTIFY_SOCKET": notify.path})
    ready = notify.wait_for("READY")
    assert ready["MAINPID"] == str(server.pid)
    with connect(server) as sock:
        sock.sendall(b"under systemd\n")
        assert read_line(sock) == b"under systemd\n"
    server.signal(signal.SIGTERM)
    notify.wait_for("STOPPING")
    assert server.wait_exit(10) == 0


def test_max_requests_recycles_a_worker_after_that_many_connections(serve: Launcher) -> None:
    server = serve("examples.tcp_echo:service", args=["--max-requests", "3"])
    first = set(server.workers())
    for number in range(4):
        with connect(server) as sock:
            sock.sendall(f"{number}\n".encode())
            assert read_line(sock) == f"{number}\n".encode()
    wait_for(lambda: set(server.workers()) - first, 15.0, message="a recycled worker")
    with connect(server) as sock:
        sock.sendall(b"fresh\n")
        assert read_line(sock) == b"fresh\n"
