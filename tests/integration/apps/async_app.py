"""`async def` handlers, middleware and WebSocket callbacks, for test_async_live.py.

`/sleep?s=` awaits asyncio.sleep; `/fetch` awaits httpx.AsyncClient against the URL in
`?url=` (the test's own local server); `/block` and `/offloaded` pin where blocking code runs;
`/boom` and `/missing` raise; the async middleware stamps every answer after `await next()`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from socketify import HTTPError, Request, Response, Server

# trio, when installed, cannot be imported once gevent has patched `select` (its import needs
# select.epoll), and httpcore imports it when it can: an ImportError makes httpcore skip it.
sys.modules.setdefault("trio", None)  # type: ignore[arg-type]

import httpx  # noqa: E402

server = Server()


async def stamp(req: Request, res: Response, next: Any) -> None:
    started = time.monotonic()
    if req.header("x-deny"):
        res.status(403).send("denied by async middleware\n")
        return
    await next()
    res.set_header("X-Async-Middleware", f"{1000 * (time.monotonic() - started):.1f}ms")


server.use(stamp)


@server.get("/sleep")
async def sleep(req: Request, res: Response) -> None:
    seconds = float(req.query.get("s", "0.1"))
    await asyncio.sleep(seconds)
    res.json({"slept": seconds, "pid": os.getpid()})


@server.get("/fetch")
async def fetch(req: Request, res: Response) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        answer = await client.get(req.query["url"])
    res.json({"status": answer.status_code, "body": answer.text})


class _Pool:
    """This worker's asyncpg pool, made on first use on the worker's event loop."""

    def __init__(self) -> None:
        self.pool: Any = None

    async def get(self) -> Any:
        if self.pool is None:
            import asyncpg

            dsn = os.environ.get("ASYNC_APP_PG", "postgres://postgres@127.0.0.1:5432/test")
            self.pool = await asyncpg.create_pool(dsn, min_size=1, max_size=20)
        return self.pool


_pg = _Pool()


@server.get("/pg")
async def pg(req: Request, res: Response) -> None:
    pool = await _pg.get()
    seconds = float(req.query.get("s", "0"))
    value = await pool.fetchval("SELECT $1::int + 1 FROM pg_sleep($2)", 41, seconds)
    res.json({"value": value})


@server.get("/sync")
def sync(req: Request, res: Response) -> None:
    time.sleep(float(req.query.get("s", "0")))  # parks only this request's greenlet
    res.send("sync\n")


@server.get("/offloaded")
async def offloaded(req: Request, res: Response) -> None:
    # A blocking call moved off the event loop: under gevent, to_thread runs it in a greenlet.
    await asyncio.to_thread(time.sleep, float(req.query.get("s", "0.2")))
    res.send("offloaded\n")


@server.get("/boom")
async def boom(req: Request, res: Response) -> None:
    await asyncio.sleep(0)
    raise RuntimeError("async failure")


@server.get("/missing")
async def missing(req: Request, res: Response) -> None:
    await asyncio.sleep(0)
    raise HTTPError(404, "nothing here")


@server.get("/read-body")
def read_body_route(req: Request, res: Response) -> None:
    res.send(req.body)


@server.post("/echo")
async def echo(req: Request, res: Response) -> None:
    await asyncio.sleep(0)
    res.json({"length": len(req.body)})


async def on_message(ws: Any, message: str | bytes, is_binary: bool) -> None:
    await asyncio.sleep(0.01)
    if is_binary:
        ws.send_binary(message)
    else:
        ws.send_text(f"async echo: {message}")


server.ws("/ws", message=on_message)


# A server whose requests time out quickly: the timed-out Task is cancelled.
timed = Server(request_timeout=0.3)
cancelled: list[str] = []


@timed.get("/hang")
async def hang(req: Request, res: Response) -> None:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        cancelled.append(req.query.get("id", ""))
        raise
    res.send("too late\n")


@timed.get("/cancelled")
def show_cancelled(req: Request, res: Response) -> None:
    res.json(cancelled)
