"""`socketify_bytes_total` against the real `socketify run`: what the workers report moved on
their sockets, compared with what a relay between the clients and the server carried."""

from __future__ import annotations

import os
import signal
import socket
import ssl
from pathlib import Path

import pytest

from tests.support.pki import self_signed
from tests.support.ports import free_port
from tests.support.prometheus import sample, scrape
from tests.support.raw_client import Address, Reader, connect, request_bytes
from tests.support.raw_h2 import H2Client
from tests.support.raw_websocket import BINARY, CLOSE, RawWebSocket, client_frame, close_frame
from tests.support.relay import CountingRelay
from tests.support.serve import Launcher
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(120)

APP = "tests.metrics.bytes_app"
BYTES = "socketify_bytes_total"


def wire_totals(metrics: Address) -> tuple[float, float]:
    """(in, out) of socketify_bytes_total, summed over the workers."""
    samples = scrape(metrics)
    return (
        sample(samples, BYTES, direction="in") or 0.0,
        sample(samples, BYTES, direction="out") or 0.0,
    )


def read_to_eof(sock: socket.socket) -> bytes:
    """Everything the server still sends, up to its close."""
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def end_cleanly(sock: socket.socket) -> bytes:
    """Half-close our side, then read until the server closes too (its FIN follows ours)."""
    sock.shutdown(socket.SHUT_WR)
    return read_to_eof(sock)


def http1_keep_alive(address: Address, uploads: list[int], downloads: list[int]) -> None:
    """Several uploads and downloads over one HTTP/1.1 connection."""
    with connect(address, timeout=10) as sock:
        reader = Reader(sock)
        for size in uploads:
            sock.sendall(request_bytes("POST", "/upload", body=b"u" * size))
            assert reader.read_response().body == str(size).encode()
        for size in downloads:
            sock.sendall(request_bytes("GET", f"/download?size={size}"))
            assert len(reader.read_response().body) == size
        assert end_cleanly(sock) == b""


def test_bytes_match_what_crossed_the_wire_on_every_protocol(serve: Launcher) -> None:
    metrics = ("127.0.0.1", free_port())
    tcp_port = free_port()
    server = serve(
        f"{APP}:site",
        workers=2,
        args=("--metrics-bind", f"{metrics[0]}:{metrics[1]}"),
        env={"BYTES_TCP_BIND": f"127.0.0.1:{tcp_port}"},
    )
    start_in, start_out = wire_totals(metrics)
    uploads, downloads = [300_000, 70_000, 5], [500_000, 1_000, 250_000]
    payload_in = payload_out = 0
    with CountingRelay(server.tcp) as http, CountingRelay(("127.0.0.1", tcp_port)) as tcp:
        # HTTP/1.1: keep-alive connections (spread over both workers), then one closed by us.
        for _ in range(4):
            http1_keep_alive(http.address, uploads, downloads)
            payload_in += sum(uploads)
            payload_out += sum(downloads)
        with connect(http.address) as sock:
            sock.sendall(request_bytes("GET", "/download?size=9000", [("Connection", "close")]))
            assert read_to_eof(sock).endswith(b"d" * 9000)
            payload_out += 9000

        # HTTP/2 over cleartext (the preface).
        with H2Client.connect(http.address, timeout=10) as h2:
            h2.handshake()
            stream = h2.request("POST", "/upload", body=b"h" * 150_000)
            assert h2.response(stream).body == b"150000"
            assert len(h2.get("/download?size=400000").body) == 400_000
            end_cleanly(h2.sock)
            payload_in += 150_000
            payload_out += 400_000

        # An event stream, open until we leave.
        with connect(http.address, timeout=10) as sock:
            sock.sendall(request_bytes("GET", "/events?count=50"))
            received = bytearray()
            while received.count(b"event: tick") < 50:
                received += sock.recv(65536)
            end_cleanly(sock)
            payload_out += 50 * 1000

        # A WebSocket echo, closed with the close handshake.
        with RawWebSocket(http.address[1], "/echo", timeout=10) as ws:
            for size in (20_000, 125, 70_000):
                ws.send(client_frame(BINARY, b"w" * size))
                assert ws.recv_message() == (BINARY, b"w" * size)
                payload_in += size
                payload_out += size
            ws.send(close_frame(1000))
            assert ws.expect_close().opcode == CLOSE
            assert ws.at_eof()

        # The TCP service's echo.
        with socket.create_connection(tcp.address, timeout=10) as sock:
            sock.sendall(b"t" * 600_000)
            sock.shutdown(socket.SHUT_WR)
            assert read_to_eof(sock) == b"t" * 600_000
            payload_in += 600_000
            payload_out += 600_000

        http.wait_idle()
        tcp.wait_idle()
        # Each connection's last count is taken before the server closes it, so once the
        # relay saw every close, the totals are final.
        got_in, got_out = wire_totals(metrics)
        connections = http.connections + tcp.connections
        sent_up, sent_down = http.upstream + tcp.upstream, http.downstream + tcp.downstream

    got_in, got_out = got_in - start_in, got_out - start_out
    assert payload_in < sent_up and payload_out < sent_down
    # In: our FIN takes one byte of the server's count where it came before the server's close.
    assert sent_up <= got_in <= sent_up + connections
    assert got_out == sent_down


def test_bytes_over_tls_count_the_records(serve: Launcher, tmp_path: Path) -> None:
    metrics = ("127.0.0.1", free_port())
    pair = self_signed(tmp_path, "server", ["127.0.0.1"])
    context = ssl.create_default_context(cafile=pair.cert)
    server = serve(
        f"{APP}:web",
        workers=1,
        args=(
            "--metrics-bind",
            f"{metrics[0]}:{metrics[1]}",
            "--certfile",
            pair.cert,
            "--keyfile",
            pair.key,
        ),
        tls=context,
    )
    tcp_metrics = ("127.0.0.1", free_port())
    tcp_server = serve(
        f"{APP}:echo_service",
        workers=1,
        args=(
            "--metrics-bind",
            f"{tcp_metrics[0]}:{tcp_metrics[1]}",
            "--certfile",
            pair.cert,
            "--keyfile",
            pair.key,
        ),
    )
    start_in, start_out = wire_totals(metrics)
    h2_context = ssl.create_default_context(cafile=pair.cert)
    h2_context.set_alpn_protocols(["h2"])
    with CountingRelay(tcp_server.tcp) as relay:
        # A TCP service over TLS: the socket the handshake wraps is the one counted.
        with connect(relay.address, timeout=10, tls=context) as sock:
            sock.sendall(b"t" * 100_000)
            received = bytearray()
            while len(received) < 100_000:
                received += sock.recv(65536)
            assert received == b"t" * 100_000
            end_cleanly(sock)  # our FIN (no close_notify), then what the server still says
        relay.wait_idle()
        got_in, got_out = wire_totals(tcp_metrics)
    assert relay.upstream > 100_000 and relay.downstream > 100_000
    assert relay.upstream <= got_in <= relay.upstream + relay.connections
    assert got_out == relay.downstream

    with CountingRelay(server.tcp) as relay:
        with connect(relay.address, timeout=10, tls=context, server_hostname="127.0.0.1") as sock:
            reader = Reader(sock)
            sock.sendall(request_bytes("POST", "/upload", body=b"u" * 200_000))
            assert reader.read_response().body == b"200000"
            sock.sendall(request_bytes("GET", "/download?size=300000", [("Connection", "close")]))
            assert len(reader.read_response().body) == 300_000
            assert reader.at_eof()  # after the server's close_notify
        with H2Client.connect(relay.address, timeout=10, tls=h2_context) as h2:
            h2.handshake()
            assert len(h2.get("/download?size=100000").body) == 100_000
            h2.sock.shutdown(socket.SHUT_WR)
            read_to_eof(h2.sock)
        relay.wait_idle()
        got_in, got_out = wire_totals(metrics)

    got_in, got_out = got_in - start_in, got_out - start_out
    assert relay.upstream > 200_000 and relay.downstream > 400_000
    assert relay.upstream <= got_in <= relay.upstream + relay.connections
    assert got_out == relay.downstream


def test_a_killed_worker_keeps_the_bytes_counted_before_it_died(serve: Launcher) -> None:
    metrics = ("127.0.0.1", free_port())
    server = serve(f"{APP}:web", workers=1, args=("--metrics-bind", f"{metrics[0]}:{metrics[1]}"))
    (victim,) = server.workers()
    with connect(server.tcp, timeout=10) as sock:
        sock.sendall(request_bytes("GET", "/download?size=2000000"))
        assert len(Reader(sock).read_response().body) == 2_000_000
        # Still open: only the once-a-second sample counts it.
        wait_for(
            lambda: wire_totals(metrics)[1] > 2_000_000,
            timeout=10,
            message="the open connection's bytes to be sampled",
        )
        before = wire_totals(metrics)
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda: server.workers() not in ([], [victim]),
            timeout=20,
            message="the master to replace the killed worker",
        )
    after = wire_totals(metrics)
    assert after[0] >= before[0] and after[1] >= before[1]
