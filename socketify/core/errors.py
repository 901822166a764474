"""Exceptions that carry an HTTP answer."""

from __future__ import annotations

from collections.abc import Mapping


class HTTPError(Exception):
    """Raise anywhere in a request to answer with `status` and a plain-text `message`."""

    def __init__(
        self, status: int, message: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(status, message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})

    def __str__(self) -> str:
        return f"{self.status} {self.message or ''}".rstrip()
