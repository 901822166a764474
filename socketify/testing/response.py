"""`TestResponse`: a response as a client sees it, parsed from the bytes the server wrote."""

from __future__ import annotations

from typing import Any

import orjson

from socketify.core.headers import Headers

__all__ = ["TestResponse"]


class TestResponse:
    """A response as a client sees it: status, headers, body, and the trailers of a chunked one."""

    __test__ = False  # not a pytest test class

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        _, code, self.reason = [*lines[0].split(" ", 2), ""][:3]
        self.status = int(code)
        self.headers = Headers(
            (name, value.strip()) for name, _, value in (line.partition(":") for line in lines[1:])
        )
        # The fields after a chunked body (empty for other bodies), as `headers` holds them.
        self.trailers = Headers()
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            self.body, self.trailers = _dechunk(rest)
        else:
            self.body = rest

    @property
    def status_code(self) -> int:
        """Alias of `status`, as in requests."""
        return self.status

    @property
    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return orjson.loads(self.body)

    def __repr__(self) -> str:
        return f"<TestResponse {self.status} {len(self.body)} bytes>"


def _dechunk(data: bytes) -> tuple[bytes, Headers]:
    """The body of a chunked message and its trailer fields."""
    body = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        body += data[:size]
        data = data[size + 2 :]
    section = data.partition(b"\r\n\r\n")[0].decode("latin-1")
    lines = [line.partition(":") for line in section.split("\r\n") if line]
    trailers = Headers(((name, value.strip()) for name, _, value in lines))
    return bytes(body), trailers
