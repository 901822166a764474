"""An asyncio event loop inside a gevent worker, for `async def` handlers and callbacks.

Theory of operation. Each process gets one asyncio loop, made on first use (so in the worker,
after the fork) and run forever by one greenlet. The loop is the standard library's
`SelectorEventLoop`; only its selector is ours (`GreenSelector`): every registered file
descriptor has a gevent io watcher, and `select` waits on a gevent `Event` that the watchers,
the timeout and `wake()` set. While asyncio waits for sockets or timers the loop's greenlet
parks in gevent's hub like any other, and the rest of the worker (connections, blocking
handlers) runs meanwhile; asyncio libraries (httpx.AsyncClient, asyncpg, ...) and blocking
code share one process and one thread.

`GreenRunner.run(coro)` is what a request greenlet calls: the coroutine becomes a Task on the
loop, the selector is woken (an Event, not a write to the loop's self-pipe: both sides are on
this thread), and the greenlet parks until the Task is done, then returns its result or raises
its exception. Killed while it waits (a request deadline, an immediate stop), it cancels the
Task. `in_caller(fn)` lets the coroutine hand a plain function back to that parked greenlet,
which runs it and resolves an asyncio future with the outcome: `await next()` in an
`async def` middleware, so the blocking rest of the chain never runs on the loop's greenlet.

What the loop cannot undo: a blocking call made *inside* a coroutine (`time.sleep`, a green
database driver) parks the loop's greenlet, so every coroutine of this worker waits for it;
blocking handlers do not. Such calls belong in a plain `def`, or in
`await asyncio.to_thread(fn)`, whose "thread" is a greenlet once gevent has patched threading.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import selectors
from asyncio.events import _get_running_loop, _set_running_loop
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any

import gevent
from gevent.event import Event
from gevent.hub import get_hub

from socketify.core.coroutines import install_runner

__all__ = ["GreenRunner", "GreenSelector", "install"]


class _KeyMap(Mapping[Any, selectors.SelectorKey]):
    """The selector's registered keys, looked up by file object or descriptor."""

    def __init__(self, by_fd: dict[int, selectors.SelectorKey]) -> None:
        self.by_fd = by_fd

    def __getitem__(self, fileobj: Any) -> selectors.SelectorKey:
        return self.by_fd[_descriptor(fileobj)]

    def __iter__(self) -> Iterator[int]:
        return iter(self.by_fd)

    def __len__(self) -> int:
        return len(self.by_fd)


class GreenSelector(selectors.BaseSelector):
    """A `selectors` implementation whose `select` parks the greenlet, not the process."""

    def __init__(self) -> None:
        self.keys: dict[int, selectors.SelectorKey] = {}
        self.watchers: dict[int, Any] = {}
        self.ready: dict[int, int] = {}  # fd -> the events seen since the last select
        self.woken = Event()
        self.io = get_hub().loop.io

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        """Watch `fileobj` for `events` (EVENT_READ | EVENT_WRITE)."""
        if not events or events & ~(selectors.EVENT_READ | selectors.EVENT_WRITE):
            raise ValueError(f"invalid events: {events!r}")
        fd = _descriptor(fileobj)
        if fd in self.keys:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")
        key = selectors.SelectorKey(fileobj, fd, events, data)
        # libev's READ and WRITE bits are the selectors module's EVENT_READ and EVENT_WRITE.
        watcher = self.io(fd, events)
        watcher.start(self.on_io, fd, pass_events=True)
        self.keys[fd] = key
        self.watchers[fd] = watcher
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        """Stop watching `fileobj`."""
        fd = _descriptor(fileobj)
        key = self.keys.pop(fd)
        watcher = self.watchers.pop(fd)
        watcher.stop()
        watcher.close()
        self.ready.pop(fd, None)
        return key

    def on_io(self, events: int, fd: int) -> None:
        """The hub saw `events` on `fd`: note them and wake `select`."""
        self.ready[fd] = self.ready.get(fd, 0) | events
        self.woken.set()

    def wake(self) -> None:
        """Make the current or next `select` return at once (new work for the loop)."""
        self.woken.set()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """The ready keys, waiting cooperatively up to `timeout` for one (None: no limit)."""
        if not self.ready and (timeout is None or timeout > 0):
            # asyncio keeps one running loop per thread, and every greenlet of the worker
            # shares this thread: while the loop is parked here the others run, and they
            # would all see it as theirs (`asyncio.run()` in a plain handler would refuse
            # to start). So the loop steps aside while it waits. The two functions are the
            # ones asyncio.events exports for loop implementations.
            running = _get_running_loop()
            _set_running_loop(None)
            try:
                self.woken.wait(timeout)
            finally:
                _set_running_loop(running)
        self.woken.clear()
        ready, self.ready = self.ready, {}
        found = []
        for fd, events in ready.items():
            key = self.keys.get(fd)
            if key is not None and events & key.events:
                found.append((key, events & key.events))
        return found

    def close(self) -> None:
        """Stop every watcher."""
        for watcher in self.watchers.values():
            watcher.stop()
            watcher.close()
        self.watchers.clear()
        self.keys.clear()
        self.ready.clear()

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        """The registered keys."""
        return _KeyMap(self.keys)


class _Waiter:
    """The parked request greenlet's side of one `run`: its wake-up and its inbox."""

    __slots__ = ("calls", "done", "event")

    def __init__(self) -> None:
        self.event = Event()
        self.calls: deque[tuple[Callable[[], Any], asyncio.Future[Any]]] = deque()
        self.done = False

    def finished(self, task: asyncio.Task[Any]) -> None:
        self.done = True
        self.event.set()


# The waiter of the `run` whose Task is running: each Task carries its own copy.
_caller: contextvars.ContextVar[_Waiter] = contextvars.ContextVar("socketify_coroutine_caller")


class GreenRunner:
    """One asyncio loop on gevent, run by one greenlet of this process."""

    def __init__(self) -> None:
        self.selector = GreenSelector()
        self.loop = asyncio.SelectorEventLoop(self.selector)
        self.greenlet = gevent.spawn(self.loop.run_forever)

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run `coroutine` as a Task on the loop; park this greenlet until it is done."""
        waiter = _Waiter()
        context = contextvars.copy_context()
        context.run(_caller.set, waiter)
        task = self.loop.create_task(coroutine, context=context)
        task.add_done_callback(waiter.finished)
        self.selector.wake()
        try:
            while not waiter.done:
                waiter.event.wait()
                waiter.event.clear()
                while waiter.calls:
                    self.answer(*waiter.calls.popleft())
        except BaseException:
            task.cancel()
            self.selector.wake()
            raise
        return task.result()

    def in_caller(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        """An awaitable that runs `fn` in the greenlet parked in `run`, with its outcome."""
        waiter = _caller.get(None)
        if waiter is None:
            raise RuntimeError("in_caller() needs a coroutine started by GreenRunner.run()")
        future = self.loop.create_future()
        waiter.calls.append((fn, future))
        waiter.event.set()
        return future

    def answer(self, fn: Callable[[], Any], future: asyncio.Future[Any]) -> None:
        """Run `fn` here and resolve `future` with what it returned or raised."""
        try:
            result = fn()
        except BaseException as exc:
            if not future.cancelled():
                future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            if not future.cancelled():
                future.set_result(result)
        self.selector.wake()


class _ProcessRunner:
    """The runner of this process, made on first use so a forked worker makes its own."""

    __slots__ = ("pid", "runner")

    def __init__(self) -> None:
        self.pid = 0
        self.runner: GreenRunner | None = None

    def current(self) -> GreenRunner:
        if self.runner is None or self.pid != os.getpid():
            self.runner = GreenRunner()
            self.pid = os.getpid()
        return self.runner

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.current().run(coroutine)

    def in_caller(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        return self.current().in_caller(fn)


_process_runner = _ProcessRunner()


def install() -> None:
    """Make this process's `async def` handlers run on its gevent-driven asyncio loop."""
    install_runner(_process_runner)


def _descriptor(fileobj: Any) -> int:
    fd = fileobj if isinstance(fileobj, int) else int(fileobj.fileno())
    if fd < 0:
        raise ValueError(f"invalid file descriptor: {fd}")
    return fd
