"""Status codes: reason phrases, and which answers never carry content.

Our own table pins the phrases of the common codes, so they do not drift with the Python version
(3.13 renamed 413 and 422); every other code takes the `http.HTTPStatus` phrase, or `Unknown`.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from types import MappingProxyType

__all__ = ["NO_BODY_STATUSES", "REASONS", "reason"]

_PINNED = {
    100: "Continue",
    101: "Switching Protocols",
    102: "Processing",
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    206: "Partial Content",
    301: "Moved Permanently",
    302: "Found",
    303: "See Other",
    304: "Not Modified",
    307: "Temporary Redirect",
    308: "Permanent Redirect",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    408: "Request Timeout",
    409: "Conflict",
    410: "Gone",
    411: "Length Required",
    413: "Payload Too Large",
    414: "URI Too Long",
    415: "Unsupported Media Type",
    416: "Range Not Satisfiable",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    505: "HTTP Version Not Supported",
}

_REASONS: dict[int, str] = {s.value: s.phrase for s in HTTPStatus}
_REASONS.update(_PINNED)
REASONS: Mapping[int, str] = MappingProxyType(_REASONS)  # every known code's phrase

# RFC 9110 §6.4.1: these never carry content, so they get no body and no Content-Length.
NO_BODY_STATUSES = frozenset({100, 101, 102, 103, 204, 304})


def reason(code: int) -> str:
    """Return the reason phrase for `code`, or `Unknown`."""
    return _REASONS.get(code, "Unknown")
