"""socketify.py's helpers that Socketify does not provide: each call says what to use instead."""

from __future__ import annotations

from typing import Any

from socketify.socketify_py.http import unsupported

__all__ = ["MiddlewareRouter", "middleware", "sendfile"]


def sendfile(*args: Any, **kwargs: Any) -> Any:
    """Not supported: serve files with `app.static(route, directory)` or res.response.send_file."""
    raise unsupported(
        "socketify.sendfile",
        "serve a directory with app.static(route, directory), or one file with"
        " res.response.send_file(path) (ranges, ETag and sendfile included)",
    )


def middleware(*args: Any, **kwargs: Any) -> Any:
    """Not supported: use Socketify middleware, `app.use(fn)` with `fn(req, res, next)`."""
    raise unsupported(
        "socketify.middleware",
        "write a Socketify middleware fn(req, res, next) and add it with app.use(fn)",
    )


class MiddlewareRouter:
    """Not supported: use Socketify middleware (`app.use`) and groups (`app.group`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise unsupported(
            "socketify.MiddlewareRouter",
            "add Socketify middleware fn(req, res, next) with app.use(fn), or per prefix with"
            " app.group(prefix).use(fn)",
        )
