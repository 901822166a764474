"""socketify.py's `app.loop`: futures and tasks on the worker's asyncio loop.

socketify.py's helpers reach the event loop through the App (`res.app.loop.create_future()`
in its form-data helper, `app.run_async(coroutine)`). Here each worker has one asyncio loop,
driven by gevent (`socketify.server.green_asyncio`); this face gives that loop socketify.py's
names. A plain handler that calls `run_async` is parked until the coroutine ends, so its
answer is the one the coroutine writes, as it would be in socketify.py once the task ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from socketify.core.coroutines import runner

__all__ = ["Loop"]


class Loop:
    """The worker's asyncio loop, with socketify.py's names for what its helpers use."""

    __slots__ = ()

    def create_future(self) -> asyncio.Future[Any]:
        """A future of the running loop (call it from an `async def` handler)."""
        return asyncio.get_running_loop().create_future()

    def create_task(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Schedule `coroutine` as a task of the running loop."""
        return asyncio.get_running_loop().create_task(coroutine)

    def run_async(self, coroutine: Coroutine[Any, Any, Any], response: Any = None) -> Any:
        """From an `async def` handler, schedule `coroutine` (a task; `response`'s answer
        waits for it); elsewhere run it to its end and return its result."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return runner().run(coroutine)
        task = loop.create_task(coroutine)
        return response.keep(task) if response is not None else task
