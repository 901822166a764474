"""HTTP/1.1 request parsing and response serialization, sans-IO (work in progress)."""

from __future__ import annotations


class ParseError(Exception):
    """The client sent something we must refuse; answer `status` and close."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class RequestHead:
    """The request line and header section of one request, validated."""

    __slots__ = (
        "chunked",
        "content_length",
        "expect_continue",
        "headers",
        "keep_alive",
        "method",
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
        headers: list[tuple[str, str]],
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
        self.headers = headers  # [(lower-case name, value)] in wire order
        self.content_length = content_length
        self.chunked = chunked
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue
