"""A WSGI app that imports mysqlclient (MySQLdb), the one driver gevent cannot make wait
cooperatively: starting it should log one warning, however many workers there are."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import MySQLdb  # noqa: F401  (imported as an app using it would)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """pong."""
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"pong\n"]
