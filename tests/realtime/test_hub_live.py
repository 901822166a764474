"""Hub rooms across `socketify run --workers 2`: sizes counted everywhere, kill -9 included."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import urllib.request
import uuid

import orjson
import pytest
from websockets.sync.client import ClientConnection, connect

from tests.realtime.realtime_client import SseClient
from tests.support.serve import Launcher, ServerProcess
from tests.support.wait import wait_for

APP = "tests.realtime.realtime_app:server"


def _ws(live: ServerProcess, target: str) -> ClientConnection:
    return connect(f"ws://127.0.0.1:{live.port}{target}", open_timeout=5)


def _members_on_both_workers(
    live: ServerProcess, stack: contextlib.ExitStack, room: str, per_worker: int = 2
) -> dict[int, list[ClientConnection]]:
    """Connections joined to `room`, at least `per_worker` on each of the two workers."""
    by_pid: dict[int, list[ClientConnection]] = {}
    for _ in range(80):
        ws = stack.enter_context(_ws(live, f"/pulse/join?room={room}"))
        pid = int(str(ws.recv(timeout=5)).removeprefix("pid:"))
        by_pid.setdefault(pid, []).append(ws)
        if len(by_pid) == 2 and all(len(v) >= per_worker for v in by_pid.values()):
            return by_pid
    raise AssertionError(f"connections spread as { ({p: len(v) for p, v in by_pid.items()}) }")


def _sizes(ws: ClientConnection) -> tuple[int, int]:
    """(room size over all workers, members on this connection's worker)."""
    ws.send("size")
    reply = str(ws.recv(timeout=5))
    while not reply.startswith("size:"):  # a broadcast that was still on its way
        reply = str(ws.recv(timeout=5))
    total, local = reply.removeprefix("size:").split(":")
    return int(total), int(local)


def test_room_size_counts_the_members_of_both_workers_on_both_workers(live: ServerProcess) -> None:
    room = uuid.uuid4().hex
    with contextlib.ExitStack() as stack:
        by_pid = _members_on_both_workers(live, stack, room)
        total = sum(len(v) for v in by_pid.values())
        for members in by_pid.values():
            wait_for(lambda ws=members[0]: _sizes(ws)[0] == total, 5)  # type: ignore[misc]
            assert _sizes(members[0]) == (total, len(members))
        leaving = next(iter(by_pid.values()))[-1]
        leaving.send("leave")
        assert leaving.recv(timeout=5) == "left"
        for members in by_pid.values():
            wait_for(lambda ws=members[0]: _sizes(ws)[0] == total - 1, 5)  # type: ignore[misc]


def test_broadcasts_with_exclude_reach_every_other_member_once_and_in_order(
    live: ServerProcess,
) -> None:
    room = uuid.uuid4().hex
    with contextlib.ExitStack() as stack:
        by_pid = _members_on_both_workers(live, stack, room)
        everyone = [ws for members in by_pid.values() for ws in members]
        sender = everyone[0]
        messages = [f"x:{n}" for n in range(50)]
        for text in messages:
            sender.send(text)
        for ws in everyone[1:]:
            assert [ws.recv(timeout=5) for _ in messages] == messages
        for ws in everyone:
            with pytest.raises(TimeoutError):
                ws.recv(timeout=0.2)  # nothing twice, and nothing back to the sender


@pytest.fixture
def own_live(serve: Launcher) -> ServerProcess:
    """A server of our own: this test kills one of its workers."""
    return serve(APP, workers=2)


def test_the_members_of_a_worker_killed_with_sigkill_stop_counting(own_live: ServerProcess) -> None:
    room = uuid.uuid4().hex
    with contextlib.ExitStack() as stack:
        by_pid = _members_on_both_workers(own_live, stack, room, per_worker=2)
        victim, survivor = sorted(by_pid, key=lambda pid: len(by_pid[pid]))
        watcher = by_pid[survivor][0]
        total = sum(len(v) for v in by_pid.values())
        wait_for(lambda: _sizes(watcher)[0] == total, 5)
        os.kill(victim, signal.SIGKILL)
        started = time.monotonic()
        wait_for(lambda: _sizes(watcher)[0] == len(by_pid[survivor]), 10)
        assert time.monotonic() - started < 8  # the lease is 4 s
        # The replacement worker learns the survivor's members from its snapshot.
        newcomer = None
        alive = len(by_pid[survivor])
        for _ in range(80):
            ws = stack.enter_context(_ws(own_live, f"/pulse/join?room={room}"))
            alive += 1  # wherever it landed, it joined the room
            if int(str(ws.recv(timeout=5)).removeprefix("pid:")) not in by_pid:
                newcomer = ws
                break
        assert newcomer is not None, "no connection reached the replacement worker"
        expected = alive
        wait_for(lambda: _sizes(newcomer)[0] == expected, 5)
        wait_for(lambda: _sizes(watcher)[0] == expected, 5)


def test_sse_room_size_counts_streams_on_both_workers(live: ServerProcess) -> None:
    room = uuid.uuid4().hex
    streams: list[SseClient] = []
    pids: set[str] = set()
    try:
        while len(pids) < 2 and len(streams) < 60:
            stream = SseClient(live.port, f"/watch?room={room}")
            streams.append(stream)
            pids.add(stream.next_data_event().data[0])
        assert len(pids) == 2
        answered: dict[int, int] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (
            len(answered) < 2 or set(answered.values()) != {len(streams)}
        ):
            with urllib.request.urlopen(f"{live.url}/sse/size?room={room}", timeout=5) as reply:
                body = orjson.loads(reply.read())
            answered[body["pid"]] = body["size"]
        assert len(answered) == 2 and set(answered.values()) == {len(streams)}
    finally:
        for stream in streams:
            stream.close()


def test_hubs_built_in_the_master_with_preload_span_the_workers_after_the_fork(
    serve: Launcher,
) -> None:
    live = serve(APP, workers=2, args=("--preload",))
    with contextlib.ExitStack() as stack:
        room = uuid.uuid4().hex
        by_pid = _members_on_both_workers(live, stack, room, per_worker=1)
        everyone = [ws for members in by_pid.values() for ws in members]
        for ws in everyone:
            wait_for(lambda ws=ws: _sizes(ws)[0] == len(everyone), 5)  # type: ignore[misc]
        everyone[0].send("over the bus")
        for ws in everyone:
            assert ws.recv(timeout=5) == "over the bus"


def test_a_broadcast_bigger_than_one_bus_record_reaches_both_workers_whole(
    live: ServerProcess,
) -> None:
    room = uuid.uuid4().hex
    big = os.urandom((1 << 20) - 64)  # a 1 MiB message: the bus carries at most 1 MiB - 1 KiB
    with contextlib.ExitStack() as stack:
        by_pid = _members_on_both_workers(live, stack, room, per_worker=1)
        everyone = [ws for members in by_pid.values() for ws in members]
        everyone[0].send(big)
        everyone[0].send("after the big one")
        for ws in everyone:
            assert ws.recv(timeout=10) == big
            assert ws.recv(timeout=5) == "after the big one"
