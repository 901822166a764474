"""`async def` handlers beside blocking ones: awaited timers, waits gathered, async middleware.

    socketify run examples.async_handlers:server --bind 127.0.0.1:8080 --workers 1
    curl 'localhost:8080/wait?ms=500'            # {"waited_ms":500}
    for i in 1 2 3 4 5; do curl -s 'localhost:8080/wait?ms=1000' & done; wait
                                                 # about 1 s in all, on one worker
    curl localhost:8080/parallel                 # three 200 ms waits at once: ~200 ms, not 600
    curl -i localhost:8080/                      # Server-Timing, set by the async middleware

A coroutine handler runs as a Task on the worker's asyncio loop, which gevent drives: while it
awaits, the worker serves other requests, blocking-style ones included, so five requests that
each wait a second on one worker all finish after about a second. `/parallel` awaits three
waits at once with `asyncio.gather`. The `timing` middleware is `async def` too: its `next()`
returns an awaitable, and the code after `await next()` runs once the rest of the chain is done.
Nothing is shared between requests.

Guide: docs/guide/async.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from socketify import Request, Response, Server

MAX_WAIT_MS = 5000
PARALLEL_WAITS_MS = (200, 200, 200)

server = Server()


async def timing(req: Request, res: Response, next: Callable[[], Awaitable[None]]) -> None:
    """Add `Server-Timing: app;dur=<ms>` to every answer."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    await next()
    res.set_header("Server-Timing", f"app;dur={1000 * (loop.time() - started):.1f}")


server.use(timing)


@server.get("/")
def index(req: Request, res: Response) -> None:
    res.send("Try /wait?ms=500 and /parallel.\n")


@server.get("/wait")
async def wait(req: Request, res: Response) -> None:
    text = req.query.get("ms", "100")
    if not text.isdigit() or int(text) > MAX_WAIT_MS:
        res.json_error(422, f"ms is a whole number of milliseconds up to {MAX_WAIT_MS}")
        return
    await asyncio.sleep(int(text) / 1000)
    res.json({"waited_ms": int(text)})


@server.get("/parallel")
async def parallel(req: Request, res: Response) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(*(asyncio.sleep(ms / 1000) for ms in PARALLEL_WAITS_MS))
    elapsed_ms = round(1000 * (loop.time() - started))
    res.json({"waits_ms": list(PARALLEL_WAITS_MS), "elapsed_ms": elapsed_ms})


if __name__ == "__main__":
    server.listen(8080, host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
