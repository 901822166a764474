"""Bind spec parsing and the per-slot listening sockets (in-process, real sockets)."""

from __future__ import annotations

import os
import select
import socket
import stat
from pathlib import Path

import pytest

from tests.support.ports import needs_ipv6
from workers.supervise.listeners import Listeners
from workers.supervise.sockets import (
    BindError,
    TcpAddress,
    UnixAddress,
    format_address,
    open_tcp,
    parse_bind,
)

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("127.0.0.1:8080", TcpAddress("127.0.0.1", 8080, socket.AF_INET)),
        (":8080", TcpAddress("0.0.0.0", 8080, socket.AF_INET)),
        ("8080", TcpAddress("0.0.0.0", 8080, socket.AF_INET)),
        ("0.0.0.0:0", TcpAddress("0.0.0.0", 0, socket.AF_INET)),
        ("[::1]:9000", TcpAddress("::1", 9000, socket.AF_INET6)),
        ("[::]:9000", TcpAddress("::", 9000, socket.AF_INET6)),
        ("unix:/tmp/app.sock", UnixAddress("/tmp/app.sock")),
    ],
)
def test_parse_bind_accepts_documented_forms(spec: str, expected: object) -> None:
    assert parse_bind(spec) == expected


def test_parse_bind_resolves_host_names_to_numeric_hosts() -> None:
    address = parse_bind("localhost:8080")
    assert isinstance(address, TcpAddress)
    assert address.host in ("127.0.0.1", "::1")


def test_parse_bind_makes_unix_paths_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_bind("unix:app.sock") == UnixAddress(str(tmp_path / "app.sock"))


@pytest.mark.parametrize(
    "spec", ["", "host", "127.0.0.1:", "127.0.0.1:http", ":70000", "::1:80", "[::1]", "unix:"]
)
def test_parse_bind_rejects_malformed_specs_with_a_clear_error(spec: str) -> None:
    with pytest.raises(BindError, match="invalid bind"):
        parse_bind(spec)


def test_format_address_brackets_ipv6_and_prefixes_unix() -> None:
    assert format_address(("127.0.0.1", 80)) == "127.0.0.1:80"
    assert format_address(("::1", 80)) == "[::1]:80"
    assert format_address("/tmp/x.sock") == "unix:/tmp/x.sock"


def test_bind_error_names_the_address_and_the_reason() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BindError) as info:
            Listeners([f"127.0.0.1:{port}"], slots=1)
    assert str(info.value) == f"failed to bind 127.0.0.1:{port}: Address already in use"


def test_a_second_reuseport_server_cannot_silently_share_the_port() -> None:
    first = Listeners(["127.0.0.1:0"], slots=2)
    try:
        port = first.addresses[0][1]
        with pytest.raises(BindError, match="Address already in use"):
            Listeners([f"127.0.0.1:{port}"], slots=2)
    finally:
        first.close()


def test_overlapping_binds_in_one_config_fail() -> None:
    first = Listeners(["127.0.0.1:0"], slots=1)
    port = first.addresses[0][1]
    first.close()
    with pytest.raises(BindError):
        Listeners([f"127.0.0.1:{port}", f"0.0.0.0:{port}"], slots=2)


def test_port_zero_is_resolved_once_for_every_slot() -> None:
    listeners = Listeners(["127.0.0.1:0"], slots=3, backlog=16)
    try:
        ports = {listeners.sockets_for(slot)[0].getsockname()[1] for slot in range(3)}
        assert ports == {listeners.addresses[0][1]}
        fds = {listeners.sockets_for(slot)[0].fileno() for slot in range(3)}
        assert len(fds) == 3
        for slot in range(3):
            sock = listeners.sockets_for(slot)[0]
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) == 1
            assert not sock.get_inheritable()
    finally:
        listeners.close()


def test_connections_are_spread_over_slot_sockets() -> None:
    listeners = Listeners(["127.0.0.1:0"], slots=2)
    try:
        port = listeners.addresses[0][1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
        readable, _, _ = select.select(
            [listeners.sockets_for(0)[0], listeners.sockets_for(1)[0]], [], [], 2
        )
        assert len(readable) == 2  # both slot queues received connections
        for client in clients:
            client.close()
    finally:
        listeners.close()


def test_add_and_remove_slot_keep_the_same_port() -> None:
    listeners = Listeners(["127.0.0.1:0"], slots=1)
    try:
        port = listeners.addresses[0][1]
        assert listeners.add_slot() == 1
        assert listeners.sockets_for(1)[0].getsockname()[1] == port
        removed = listeners.sockets_for(1)[0]
        listeners.remove_slot()
        assert listeners.slot_count == 1
        assert removed.fileno() == -1
        with pytest.raises(ValueError):
            listeners.remove_slot()
    finally:
        listeners.close()


def test_close_except_keeps_only_the_slot_and_shared_sockets(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    listeners = Listeners(["127.0.0.1:0", f"unix:{path}"], slots=3)
    try:
        mine = listeners.sockets_for(1)
        others = [*listeners.sockets_for(0)[:1], *listeners.sockets_for(2)[:1]]
        listeners.close_except(1)
        assert all(sock.fileno() != -1 for sock in mine)
        assert all(sock.fileno() == -1 for sock in others)
        assert os.path.exists(path)
    finally:
        listeners.close()


@needs_ipv6
def test_ipv6_any_address_is_dual_stack() -> None:
    listeners = Listeners(["[::]:0"], slots=1)
    try:
        sock = listeners.sockets_for(0)[0]
        assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0
        port = listeners.addresses[0][1]
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            conn, peer = sock.accept()
            conn.close()
        assert peer[0] == "::ffff:127.0.0.1"
    finally:
        listeners.close()


def test_unix_socket_replaces_a_stale_file_and_sets_its_mode(tmp_path: Path) -> None:
    path = str(tmp_path / "app.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()  # a crashed server leaves the file behind
    listeners = Listeners([f"unix:{path}"], slots=2, unix_mode=0o660)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o660
        assert listeners.sockets_for(0) == listeners.sockets_for(1)  # one shared socket
        assert listeners.addresses == [path]
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)
    finally:
        listeners.close()
    assert not os.path.exists(path)


def test_unix_socket_in_use_is_a_bind_error(tmp_path: Path) -> None:
    path = str(tmp_path / "app.sock")
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(path)
        live.listen()
        with pytest.raises(BindError, match=f"failed to bind unix:{path}: Address already in use"):
            Listeners([f"unix:{path}"], slots=1)
    assert os.path.exists(path)


def test_unix_path_that_is_not_a_socket_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("precious")
    with pytest.raises(BindError, match="not a socket"):
        Listeners([f"unix:{path}"], slots=1)
    assert path.read_text() == "precious"


def test_close_leaves_a_replaced_unix_socket_file_alone(tmp_path: Path) -> None:
    path = str(tmp_path / "app.sock")
    listeners = Listeners([f"unix:{path}"], slots=1)
    os.unlink(path)
    with socket.socket(socket.AF_UNIX) as other:
        other.bind(path)  # another server took the path over
        listeners.close()
        assert os.path.exists(path)


def test_open_tcp_applies_the_backlog_and_reports_failures() -> None:
    sock = open_tcp(TcpAddress("127.0.0.1", 0), backlog=7)
    sock.close()
    with pytest.raises(BindError, match=r"failed to bind 192\.0\.2\.1:80"):
        open_tcp(TcpAddress("192.0.2.1", 80))  # TEST-NET-1: not a local address
