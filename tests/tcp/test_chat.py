"""The TCP chat example across two workers, alone and beside an HTTP app on one master."""

from __future__ import annotations

import signal
import socket

import pytest

from tests.support.ports import free_port
from tests.support.raw_client import get
from tests.support.serve import Launcher
from tests.tcp.test_live import read_line

pytestmark = pytest.mark.timeout(60)


def join(address: tuple[str, int], name: str) -> socket.socket:
    """A chat client that has been welcomed and named."""
    sock = socket.create_connection(address, timeout=5)
    assert read_line(sock).startswith(b"welcome")
    sock.sendall(f"/nick {name}\n".encode())
    assert read_line(sock) == f"you are {name}\n".encode()
    return sock


def test_every_other_client_gets_each_line_whichever_worker_serves_it(serve: Launcher) -> None:
    server = serve("examples.tcp_chat:service", workers=2)
    clients = [join(server.tcp, f"user{number}") for number in range(8)]
    try:
        clients[0].sendall(b"hello everyone\n")
        for client in clients[1:]:
            assert read_line(client) == b"user0: hello everyone\n"
        clients[5].sendall(b"hi user0\n")
        assert read_line(clients[0]) == b"user5: hi user0\n"
        for sender in (clients[0], clients[5]):  # nobody hears their own lines back
            sender.settimeout(0.3)
            with pytest.raises(TimeoutError):
                sender.recv(100)
    finally:
        for client in clients:
            client.close()


def test_a_reload_tells_every_client_and_new_workers_take_them_back(serve: Launcher) -> None:
    server = serve("examples.tcp_chat:service", workers=2)
    clients = [join(server.tcp, f"user{number}") for number in range(4)]
    try:
        server.signal(signal.SIGHUP)
        for client in clients:
            assert read_line(client) == b"* the server is restarting; reconnect in a moment\n"
            assert client.recv(100) == b""
    finally:
        for client in clients:
            client.close()
    ada, bob = join(server.tcp, "ada"), join(server.tcp, "bob")
    with ada, bob:
        ada.sendall(b"back again\n")
        assert read_line(bob) == b"ada: back again\n"


def test_a_bundle_serves_http_and_the_chat_on_one_master(serve: Launcher) -> None:
    chat_port = free_port()
    server = serve("examples.tcp_chat:site", workers=2, env={"CHAT_BIND": f"127.0.0.1:{chat_port}"})
    assert f"tcp://127.0.0.1:{chat_port}" in server.output()
    response = get(server.tcp, "/")
    assert response.status == 200 and response.body == f"chat: nc 127.0.0.1 {chat_port}\n".encode()
    ada, bob = join(("127.0.0.1", chat_port), "ada"), join(("127.0.0.1", chat_port), "bob")
    with ada, bob:
        ada.sendall(b"over tcp\n")
        assert read_line(bob) == b"ada: over tcp\n"
