"""What Socketify accepts as a handler, middleware or callback: plain blocking-style callables.

A handler runs inline in its connection's greenlet, with the standard library monkey-patched,
so blocking I/O parks only that greenlet. An `async def` function called that way returns a
coroutine that nobody awaits: the request would end with an empty 200 and a warning. Such
functions are therefore refused when they are registered, with a message that says what to do.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["require_blocking"]


def require_blocking(fn: Callable[..., Any], role: str) -> None:
    """Raise TypeError unless `fn` is callable and not an `async def` (or async generator)."""
    if not callable(fn):
        raise TypeError(f"{role} must be callable, got {fn!r}")
    if _is_async(fn):
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise TypeError(
            f"{role} {name} is an `async def` function, which Socketify cannot run: handlers,"
            " middleware and callbacks are called inline in the connection's greenlet, so"
            " write it as a plain `def` (blocking I/O such as sockets, time.sleep or database"
            " drivers written in Python only parks that greenlet), or call the asyncio code"
            " from it through a thread or process of its own"
        )


def _is_async(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return False
    call = type(fn).__call__  # an instance with an `async def __call__`
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)
