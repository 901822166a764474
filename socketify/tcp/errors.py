"""What a bounded read raises when the peer breaks the stream's framing."""

from __future__ import annotations

__all__ = ["FrameTooLarge", "IdleTimeout", "IncompleteRead", "LineTooLong", "StreamError"]


class StreamError(Exception):
    """The peer sent something the stream's framing rejects; the connection should close.

    Uncaught by a handler, the server logs it and closes the connection; the worker and the
    other connections carry on.
    """


class LineTooLong(StreamError):
    """A line grew past the bound before its newline arrived."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"line longer than {limit} bytes")
        self.limit = limit


class FrameTooLarge(StreamError):
    """A length prefix announced more bytes than the bound allows."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes over the {limit}-byte limit")
        self.size = size
        self.limit = limit


class IncompleteRead(StreamError, EOFError):
    """The peer closed the stream in the middle of a fixed-size read."""

    def __init__(self, partial: bytes, expected: int) -> None:
        super().__init__(f"connection closed after {len(partial)} of {expected} bytes")
        self.partial = partial
        self.expected = expected


class IdleTimeout(TimeoutError):
    """The connection saw no completed read or write for the service's `idle_timeout`."""

    def __init__(self) -> None:
        super().__init__("connection idle for too long")
