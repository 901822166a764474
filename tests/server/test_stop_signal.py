"""`StopSignal`: subscribers hear a graceful stop once, each in a greenlet of its own."""

from __future__ import annotations

import gevent

from socketify.server.stop_signal import StopSignal


def test_every_subscriber_hears_the_stop_once_even_if_one_blocks_or_fails() -> None:
    signal = StopSignal()
    heard: list[str] = []

    def slow() -> None:
        gevent.sleep(0.05)
        heard.append("slow")

    def failing() -> None:
        raise RuntimeError("a callback that fails must not stop the others")

    signal.subscribe(slow)
    signal.subscribe(failing)
    signal.subscribe(lambda: heard.append("quick"))
    assert not signal.is_set
    signal.set()
    signal.set()  # a second stop request changes nothing
    assert signal.is_set
    gevent.sleep(0.2)
    assert heard == ["quick", "slow"]


def test_an_unsubscribed_callback_is_not_called() -> None:
    signal = StopSignal()
    heard: list[str] = []
    unsubscribe = signal.subscribe(lambda: heard.append("gone"))
    signal.subscribe(lambda: heard.append("kept"))
    unsubscribe()
    signal.set()
    gevent.sleep(0.05)
    assert heard == ["kept"]


def test_a_subscriber_that_comes_after_the_stop_hears_it_at_once() -> None:
    signal = StopSignal()
    signal.set()
    heard: list[str] = []
    signal.subscribe(lambda: heard.append("late"))
    gevent.sleep(0)
    assert heard == ["late"]


def test_wait_returns_when_the_stop_begins_or_the_timeout_passes() -> None:
    signal = StopSignal()
    assert signal.wait(0.01) is False
    gevent.spawn_later(0.02, signal.set)
    assert signal.wait(5.0) is True
