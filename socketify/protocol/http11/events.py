"""Parser events and the values they carry."""

from __future__ import annotations

from typing import Final

__all__ = ["CLOSED", "END_OF_MESSAGE", "NEED_DATA", "ParseError", "RequestHead"]


class _Sentinel:
    """A named event marker; compared by identity."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA: Final = _Sentinel("NEED_DATA")
END_OF_MESSAGE: Final = _Sentinel("END_OF_MESSAGE")
CLOSED: Final = _Sentinel("CLOSED")


class ParseError(Exception):
    """The client sent something we must refuse; answer `status` and close."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail

    def __repr__(self) -> str:
        return f"ParseError({self.status}, {self.detail!r})"


class RequestHead:
    """The request line and header section of one request, validated.

    A value, never changed once parsed: the parser hands the same object to every request
    whose head is byte-for-byte identical (see the head cache in `parser`).
    """

    __slots__ = (
        "_by_name",
        "_headers",
        "_raw_headers",
        "chunked",
        "content_length",
        "expect_continue",
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
        headers: list[tuple[str, str]] | None = None,
        content_length: int | None = None,
        chunked: bool = False,
        keep_alive: bool = True,
        expect_continue: bool = False,
        raw_headers: str = "",
    ) -> None:
        self.method = method  # "GET", case-sensitive
        self.target = target  # exactly as sent
        self.path = path  # still percent-encoded, no query; from absolute-form too
        self.query_string = query_string  # without "?"
        self.version = version  # "HTTP/1.1" or "HTTP/1.0"
        self._headers = headers
        self._raw_headers = raw_headers  # validated header lines joined by CRLF
        self._by_name: dict[str, str] | None = None  # see by_name()
        self.content_length = content_length
        self.chunked = chunked
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue

    @property
    def headers(self) -> list[tuple[str, str]]:
        """[(lower-case name, value)] in wire order, split on first use; shared, never mutate."""
        headers = self._headers
        if headers is None:
            raw = self._raw_headers
            fields = [line.partition(":") for line in raw.split("\r\n")] if raw else []
            headers = [(name.lower(), value.strip(" \t")) for name, _, value in fields]
            self._headers = headers
        return headers

    def by_name(self) -> dict[str, str]:
        """{lower-case name: value, repeats joined with ", "}, built on first use; shared.

        PERF: the head is shared by every request whose head is identical (a keep-alive
        client repeats its headers), so header lookups of those requests are one dict get.
        """
        by_name = self._by_name
        if by_name is None:
            by_name = {}
            for name, value in self.headers:
                seen = by_name.get(name)
                by_name[name] = value if seen is None else f"{seen}, {value}"
            self._by_name = by_name
        return by_name

    @property
    def has_body(self) -> bool:
        """Whether body events follow this head."""
        return self.chunked or bool(self.content_length)

    def __repr__(self) -> str:
        return f"<RequestHead {self.method} {self.target} {self.version}>"
