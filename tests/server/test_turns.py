"""`server.turns`: a greenlet that never waits still lets the worker poll its sockets.

In-process, on gevent's loop: a busy greenlet stands for a connection whose input is always
there. Checking its turn between pieces of work must let a socket that became readable, and
a timer that came due (the worker's heartbeat), be served long before the busy work ends.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import gevent
import pytest
from gevent.socket import wait_read

from socketify.server.turns import TURN_SECONDS, Turn, pass_turn

pytestmark = pytest.mark.timeout(30)

BUSY_SECONDS = 0.6
# Work between two checks: about what one 64 KiB read of pipelined requests costs. (gevent's
# sleep(0) runs fifty such pieces before its loop polls: that is what made floods starve.)
PIECE_SECONDS = 0.01


def busy(check: Callable[[], None]) -> float:
    """Work without waiting for BUSY_SECONDS, calling `check()` after every piece of it."""
    started = time.monotonic()
    while time.monotonic() - started < BUSY_SECONDS:
        spin_until = time.monotonic() + PIECE_SECONDS
        while time.monotonic() < spin_until:
            pass
        check()
    return time.monotonic()


def test_a_readable_socket_is_served_while_a_busy_greenlet_checks_its_turn() -> None:
    left, right = socket.socketpair()
    served: list[float] = []

    def reader() -> None:
        wait_read(left.fileno())
        served.append(time.monotonic())

    waiting = gevent.spawn(reader)
    gevent.sleep(0.01)  # the reader waits on its socket
    right.send(b"x")
    ended = busy(Turn().check)
    waiting.join(1)
    left.close()
    right.close()
    assert served and served[0] < ended - BUSY_SECONDS / 2


def test_a_timer_comes_due_while_a_busy_greenlet_checks_its_turn() -> None:
    beats: list[float] = []
    heartbeat = gevent.spawn_later(0.05, lambda: beats.append(time.monotonic()))
    ended = busy(Turn().check)
    heartbeat.join(1)
    assert beats and beats[0] < ended - BUSY_SECONDS / 2


def test_a_turn_is_passed_only_after_turn_seconds_without_a_poll() -> None:
    loop = gevent.get_hub().loop
    turn = Turn()
    turn.check()
    first = loop.iteration
    turn.check()  # at once again: well within the turn
    assert loop.iteration == first
    time.sleep(TURN_SECONDS * 1.5)  # a blocking pause counts as work: the loop never polled
    turn.check()
    assert loop.iteration > first


def test_pass_turn_goes_through_the_loops_poll() -> None:
    loop = gevent.get_hub().loop
    before = loop.iteration
    pass_turn()
    assert loop.iteration > before
