"""`wait_for`: poll a condition until it holds or a deadline passes, then fail the test."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.05,
    message: str = "the condition",
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Poll `predicate()` until it returns a truthy value, and return it.

    Raises AssertionError (failing the test) after `timeout` seconds; the predicate is always
    tried once more at the deadline, so a slow machine never fails a test that just made it.
    `sleep=gevent.sleep` lets the greenlets of this process (an in-process server) run
    between tries.
    """
    deadline = time.monotonic() + timeout
    while True:
        last_try = time.monotonic() >= deadline
        value = predicate()
        if value:
            return value
        if last_try:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        sleep(interval)
