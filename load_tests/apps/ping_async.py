"""/ping as a plain `def` and as an `async def`, for load_tests/async_overhead.py.

Both answer the same bytes as load_tests/apps/ping.py's /ping; `awaited` runs its handler on the
worker's asyncio loop (socketify.server.green_asyncio), `blocking` inline in the request's
greenlet. `awaited_sleep` awaits `asyncio.sleep(0)` once, so its coroutine really parks on the
loop and comes back, the path of a handler that awaits I/O.
"""

from __future__ import annotations

import asyncio

from socketify import Request, Response, Server


def _ping(req: Request, res: Response) -> None:
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


async def _async_ping(req: Request, res: Response) -> None:
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


async def _async_ping_after_sleep(req: Request, res: Response) -> None:
    await asyncio.sleep(0)
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


blocking = Server()
blocking.get("/ping", _ping)

awaited = Server()
awaited.get("/ping", _async_ping)

awaited_sleep = Server()
awaited_sleep.get("/ping", _async_ping_after_sleep)
