"""socketify.py's `AppRequest`: getters over Socketify's Request.

socketify.py (and uWebSockets under it) hands a handler `(res, req)`; the request is read
through getters (`get_header`, `get_query`, `get_parameter`...). In uWebSockets the request
lives only until the handler's first `await`, hence `preserve()`; a Socketify Request stays
readable for the whole handler, so here it is a no-op. `set_yield(True)` declines the
request: `socketify.socketify_py.handlers` then passes it to the next matching route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from socketify.core.request import Request

__all__ = ["AppRequest", "as_text"]


def as_text(value: str | bytes) -> str:
    """A header name or value given as bytes or str, as str (bytes are Latin-1, as on the wire)."""
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


class AppRequest:
    """socketify.py's request: getters over a Socketify `Request` (`.request`)."""

    __slots__ = ("request", "yielding")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.yielding = False

    def get_url(self) -> str:
        """The path as sent, without the query string."""
        return self.request.raw_path

    def get_full_url(self) -> str:
        """The path and query string as sent."""
        return self.request.raw_target

    def get_method(self) -> str:
        """The method, as sent (upper case for the usual ones)."""
        return self.request.method

    def get_header(self, lower_case_header: str | bytes) -> str | None:
        """The value of one header (joined if repeated), or None."""
        name = as_text(lower_case_header).lower()
        return self.request.headers.get(name)

    def get_headers(self) -> dict[str, str]:
        """Every header, by lower-case name."""
        return dict(self.request.headers.items())

    def for_each_header(self, handler: Callable[[str, str], Any]) -> None:
        """Call `handler(name, value)` for each header field, in the order sent."""
        for name, value in self.request.header_fields():
            handler(name, value)

    def get_query(self, key: str | bytes) -> str | None:
        """The first value of query parameter `key`, decoded, or None."""
        values = self.request.query.getall(as_text(key))
        return values[0] if values else None

    def get_queries(self) -> dict[str, list[str]]:
        """The query string parsed: every name with its list of values."""
        return parse_qs(self.request.query_string, keep_blank_values=True)

    def get_parameter(self, index: int) -> str | None:
        """The route parameter at `index` (`:name` segments in pattern order), or None."""
        values = self.get_parameters()
        return values[index] if 0 <= index < len(values) else None

    def get_parameters(self) -> list[str]:
        """The route parameters in pattern order (a bare `*` wildcard is not one)."""
        return [value for name, value in self.request.params.items() if name != "*"]

    def get_cookie(self, name: str) -> str | None:
        """The value of cookie `name`, or None."""
        return self.request.cookies.get(name)

    def preserve(self) -> AppRequest:
        """A no-op: a Socketify request stays readable for the whole handler, async or not."""
        return self

    def get_yield(self) -> bool:
        """True when the handler declined the request (`set_yield(True)`)."""
        return self.yielding

    def set_yield(self, has_yield: bool | int) -> None:
        """Decline the request: unless answered, the next matching route gets it."""
        self.yielding = bool(has_yield)

    def is_ancient(self) -> bool:
        """True for an HTTP/1.0 request."""
        return self.request.http_version == "1.0"
