"""Hub rooms over the Redis bus: two `socketify run` masters ("hosts") share rooms and sizes."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from websockets.sync.client import ClientConnection, connect

from tests.support.serve import Launcher, ServerProcess
from tests.support.services import require_module, require_service
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(90)
URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def two_hosts(serve: Launcher) -> tuple[ServerProcess, ServerProcess]:
    require_service("Redis", "127.0.0.1", 6379)
    require_module("redis", "pip install 'socketify-gevent[redis]'")
    env = {"SOCKETIFY_STATE_URL": URL}
    hosts = [serve("tests.realtime.realtime_app:server", env=env, wait=False) for _ in range(2)]
    first, second = (host.wait_serving() for host in hosts)  # their boots overlap
    return first, second


def _join(stack: contextlib.ExitStack, live: ServerProcess, room: str) -> ClientConnection:
    target = f"ws://127.0.0.1:{live.port}/pulse/join?room={room}"
    ws = stack.enter_context(connect(target, open_timeout=5))
    assert str(ws.recv(timeout=5)).startswith("pid:")
    return ws


def _size(ws: ClientConnection) -> int:
    ws.send("size")
    reply = str(ws.recv(timeout=5))
    while not reply.startswith("size:"):
        reply = str(ws.recv(timeout=5))
    return int(reply.split(":")[1])


def test_rooms_sizes_and_broadcasts_span_two_hosts_through_redis(
    two_hosts: tuple[ServerProcess, ServerProcess],
) -> None:
    room = uuid.uuid4().hex
    with contextlib.ExitStack() as stack:
        on_first = [_join(stack, two_hosts[0], room) for _ in range(2)]
        on_second = [_join(stack, two_hosts[1], room) for _ in range(3)]
        wait_for(lambda: {_size(on_first[0]), _size(on_second[0])} == {5}, 5, message="sizes")
        messages = [f"r{n}" for n in range(20)]
        for text in messages:
            on_second[0].send(text)
        for ws in on_first + on_second:
            assert [ws.recv(timeout=5) for _ in messages] == messages


def test_members_leaving_together_leave_cleanly_and_room_size_counts_only_the_living(
    two_hosts: tuple[ServerProcess, ServerProcess],
) -> None:
    room = uuid.uuid4().hex
    with contextlib.ExitStack() as stack:
        observer = _join(stack, two_hosts[1], room)
        for round_ in range(3):
            leaving = [_join(stack, two_hosts[0], room) for _ in range(8)]
            wait_for(lambda: _size(observer) == 9, 5, message=f"round {round_}: all joined")
            sockets = [ws.socket for ws in leaving]
            for sock in sockets:  # all at once: no close handshake, the server sees EOF
                sock.close()
            wait_for(lambda: _size(observer) == 1, 5, message=f"round {round_}: all left")
        # The room still works on the host they left: a newcomer there counts and hears.
        newcomer = _join(stack, two_hosts[0], room)
        wait_for(lambda: _size(newcomer) == 2, 5, message="the newcomer counts")
        observer.send("hello")
        assert newcomer.recv(timeout=5) == "hello"
    for host in two_hosts:
        assert "KeyError" not in host.output() and "Traceback" not in host.output()
