"""Parser events and the values they carry."""

from __future__ import annotations

from typing import Final

from socketify.protocol.http.heads import RequestHead

__all__ = ["CLOSED", "END_OF_MESSAGE", "NEED_DATA", "ParseError", "RequestHead", "Sentinel"]


class Sentinel:
    """A named event marker; compared by identity."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA: Final = Sentinel("NEED_DATA")
END_OF_MESSAGE: Final = Sentinel("END_OF_MESSAGE")
CLOSED: Final = Sentinel("CLOSED")


class ParseError(Exception):
    """The client sent something we must refuse; answer `status` and close."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail

    def __repr__(self) -> str:
        return f"ParseError({self.status}, {self.detail!r})"
