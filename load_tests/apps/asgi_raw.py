"""Raw ASGI /ping for uvicorn: no framework, the same body and Content-Type as ours."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Message = dict[str, Any]

BODY = b'{"ok":true}'
PING_START: Message = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"), (b"content-length", b"11")],
}
PING_BODY: Message = {"type": "http.response.body", "body": BODY}
NOT_FOUND_START: Message = {
    "type": "http.response.start",
    "status": 404,
    "headers": [(b"content-length", b"0")],
}
EMPTY_BODY: Message = {"type": "http.response.body", "body": b""}


async def app(
    scope: Message,
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    """Answer GET /ping with {"ok":true}; 404 elsewhere; acknowledge lifespan events."""
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]  # "lifespan.startup" or "lifespan.shutdown"
            await send({"type": f"{kind}.complete"})
            if kind == "lifespan.shutdown":
                return
    if scope["path"] == "/ping":
        await send(PING_START)
        await send(PING_BODY)
    else:
        await send(NOT_FOUND_START)
        await send(EMPTY_BODY)
