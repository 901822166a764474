"""`body_limit(n)`: a per-route or per-group body size cap, stricter than `max_body_size`.

The limit is checked from Content-Length before a byte of the body is read (the connection
reads a body only when the app asks for it), so an oversized upload is refused at once, and
a client that sent `Expect: 100-continue` never gets its `100 Continue`. A chunked body is
counted as it streams and refused by the piece that crosses the limit. Either way the answer
is 413 `Payload Too Large` with `Connection: close`: the rest of the body is never read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from socketify.core.chain import Hooked, hooked

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["body_limit"]


def body_limit(max_bytes: int) -> Hooked:
    """Middleware: answer 413 for a request body over `max_bytes` bytes."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"body_limit needs a byte count >= 0, got {max_bytes!r}")

    def body_limit_middleware(req: Request, res: Response) -> bool:
        req.limit_body(max_bytes)  # raises HTTPError(413), which the server answers
        return True

    return hooked(body_limit_middleware)
