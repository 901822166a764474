"""Raw WSGI /ping for gunicorn: no framework, the same body and Content-Type as ours."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

BODY = b'{"ok":true}'
PING_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Answer GET /ping with {"ok":true}; 404 elsewhere."""
    if environ["PATH_INFO"] == "/ping":
        start_response("200 OK", PING_HEADERS)
        return [BODY]
    start_response("404 Not Found", [("Content-Length", "0")])
    return [b""]
