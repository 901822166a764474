"""A request's head, whichever protocol carried it: the request line and header fields."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

__all__ = ["RequestHead"]


class RequestHead:
    """The request line and header section of one request, validated; an immutable value.

    Every field is set when the head is made and never changed afterwards, so the parser may
    hand the same head to identical requests (its head cache) without connections sharing
    anything they could change. Per-request changes live on the `Request` instead.
    """

    __slots__ = (
        "chunked",
        "content_length",
        "expect_continue",
        "headers",
        "keep_alive",
        "method",
        "names",
        "path",
        "query_string",
        "target",
        "version",
    )

    def __init__(
        self,
        method: str,
        target: str,
        path: str,
        query_string: str,
        version: str,
        headers: Iterable[tuple[str, str]] = (),
        content_length: int | None = None,
        chunked: bool = False,
        keep_alive: bool = True,
        expect_continue: bool = False,
    ) -> None:
        self.method = method  # "GET", case-sensitive
        self.target = target  # exactly as sent
        self.path = path  # still percent-encoded, no query; from absolute-form too
        self.query_string = query_string  # without "?"
        self.version = version  # "HTTP/1.1" or "HTTP/1.0"
        # ((lower-case name, value), ...) in wire order
        self.headers: tuple[tuple[str, str], ...] = tuple(headers)
        names: dict[str, str] = {}
        for name, value in self.headers:
            seen = names.get(name)
            names[name] = value if seen is None else f"{seen}, {value}"
        # {lower-case name: value}, repeated fields joined with ", "
        self.names: Mapping[str, str] = MappingProxyType(names)
        self.content_length = content_length
        self.chunked = chunked
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue

    @property
    def has_body(self) -> bool:
        """Whether body events follow this head."""
        return self.chunked or bool(self.content_length)

    def __repr__(self) -> str:
        return f"<RequestHead {self.method} {self.target} {self.version}>"
