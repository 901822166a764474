"""`async def` handlers, middleware and callbacks, run from the blocking-style request path.

Theory of operation. Socketify calls every handler, middleware and callback inline, in the
greenlet that serves the request or the connection. A coroutine function is recognised once,
when it is registered (`blocking`, `blocking_middleware`), and wrapped into a plain function
of the same signature. Called, the wrapper makes the coroutine and hands it to the process's
coroutine runner, which runs it to completion on an asyncio event loop and returns its result
or raises its exception, parking only the calling greenlet meanwhile. So the chain, the error
handlers and the connection code only ever see plain functions.

The runner is the IO layer's (`socketify.server.green_asyncio`: one asyncio loop per worker,
driven by gevent); the server installs it with `install_runner` before it serves, so core
never imports gevent.

An `async def` middleware gets a `next` whose call returns an awaitable: `await next()` runs
the rest of the chain in the request's own greenlet (blocking handlers further down never
stall the event loop) and resumes the middleware once it is done, with its exception if it
raised one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

__all__ = [
    "CoroutineRunner",
    "blocking",
    "blocking_middleware",
    "install_runner",
    "is_async",
    "runner",
]


class CoroutineRunner(Protocol):
    """What the IO layer provides to run coroutines from blocking code."""

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run `coroutine` to completion; park only the calling greenlet meanwhile."""

    def in_caller(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        """Inside a coroutine `run` is running: an awaitable that runs `fn` in run's caller."""


class _Installed:
    """The runner of this process; one slot, set by the server before it serves."""

    __slots__ = ("runner",)

    def __init__(self) -> None:
        self.runner: CoroutineRunner | None = None


_installed = _Installed()


def install_runner(runner: CoroutineRunner) -> None:
    """Make `runner` the one that runs this process's `async def` handlers."""
    _installed.runner = runner


def runner() -> CoroutineRunner:
    """The installed runner; RuntimeError when no server has installed one."""
    found = _installed.runner
    if found is None:
        raise RuntimeError(
            "an `async def` handler was called outside a Socketify server: serve the app"
            " (`socketify run`, `server.listen()`) or call it through socketify.testing.TestClient"
        )
    return found


def is_async(fn: Callable[..., Any]) -> bool:
    """True for an `async def` function (or async generator), also behind partial or __call__."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return False
    call = type(fn).__call__  # an instance with an `async def __call__`
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


def blocking(fn: Callable[..., Any], role: str) -> Callable[..., Any]:
    """`fn` itself, or for an `async def` function a plain function that runs it to the end.

    Raises TypeError for what is not callable and for an async generator function (there is
    no single result to wait for).
    """
    _check(fn, role)
    if not is_async(fn):
        return fn

    @functools.wraps(fn)
    def run_to_completion(*args: Any, **kwargs: Any) -> Any:
        return runner().run(fn(*args, **kwargs))

    return run_to_completion


def blocking_middleware(middleware: Callable[..., Any], role: str) -> Callable[..., Any]:
    """Like `blocking`, for a `(req, res, next)` middleware: its `next()` is awaitable."""
    _check(middleware, role)
    if not is_async(middleware):
        return middleware

    @functools.wraps(middleware)
    def run_middleware(req: Any, res: Any, next: Callable[[], None]) -> Any:
        running = runner()
        return running.run(middleware(req, res, lambda: running.in_caller(next)))

    return run_middleware


def _check(fn: Callable[..., Any], role: str) -> None:
    if not callable(fn):
        raise TypeError(f"{role} must be callable, got {fn!r}")
    target = fn.func if isinstance(fn, functools.partial) else fn
    if inspect.isasyncgenfunction(target) or inspect.isasyncgenfunction(type(target).__call__):
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise TypeError(
            f"{role} {name} is an async generator function: write it as `async def` that"
            " returns (or a plain `def`); to stream an answer, send it with res.stream()"
        )
