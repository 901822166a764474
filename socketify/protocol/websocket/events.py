"""The events a `Connection` produces, and the error it raises for misuse."""

from __future__ import annotations

from dataclasses import dataclass

from socketify.protocol.http11.events import CLOSED, NEED_DATA

__all__ = [
    "CLOSED",
    "NEED_DATA",
    "BinaryFragment",
    "BinaryMessage",
    "Close",
    "Event",
    "LocalProtocolError",
    "Ping",
    "Pong",
    "TextFragment",
    "TextMessage",
]


class LocalProtocolError(RuntimeError):
    """Our side asked for something the protocol forbids now (e.g. a send after close)."""


@dataclass(frozen=True, slots=True)
class TextMessage:
    """A complete text message, its UTF-8 already validated."""

    text: str


@dataclass(frozen=True, slots=True)
class BinaryMessage:
    """A complete binary message."""

    data: bytes


@dataclass(frozen=True, slots=True)
class TextFragment:
    """The text of one frame of a text message (only with `Connection(fragments=True)`)."""

    text: str
    first: bool
    final: bool


@dataclass(frozen=True, slots=True)
class BinaryFragment:
    """The data of one frame of a binary message (only with `Connection(fragments=True)`)."""

    data: bytes
    first: bool
    final: bool


@dataclass(frozen=True, slots=True)
class Ping:
    """The peer pinged; with auto-pong the answer is already in `data_to_send()`."""

    payload: bytes


@dataclass(frozen=True, slots=True)
class Pong:
    """The peer answered a ping (or sent an unsolicited pong)."""

    payload: bytes


@dataclass(frozen=True, slots=True)
class Close:
    """The connection is over; `code` is the one actually exchanged (see `connection`).

    The peer's code when it closed first (1005 if its close frame had none), our code when
    we closed first or failed the connection (1002/1007/1009), 1006 when no close frame was
    exchanged at all. `clean` is true when close frames went both ways. After this event,
    write what `data_to_send()` holds and close the TCP connection.
    """

    code: int
    reason: str = ""
    clean: bool = True


Event = TextMessage | BinaryMessage | TextFragment | BinaryFragment | Ping | Pong | Close
