"""What an HTTP/2 client did, as `Http2ServerConnection.receive_data` reports it.

Each event is an immutable value naming its stream; the owner (a socket greenlet, or a test)
acts on them in order. They carry only what the server needs, in the terms the rest of the
server already speaks (`RequestHead`).
"""

from __future__ import annotations

from dataclasses import dataclass

from socketify.protocol.http.heads import RequestHead

__all__ = [
    "BodyData",
    "ConnectionTerminated",
    "Event",
    "PeerGoingAway",
    "RequestOpened",
    "StreamEnded",
    "StreamReset",
    "WindowOpened",
]


@dataclass(frozen=True, slots=True)
class RequestOpened:
    """A request's header section arrived on a new stream; body events may follow."""

    stream_id: int
    head: RequestHead
    ended: bool  # the request has no body: a `StreamEnded` follows right away


@dataclass(frozen=True, slots=True)
class BodyData:
    """A piece of a request body; `flow_length` (padding included) is what `consumed` acks."""

    stream_id: int
    data: bytes
    flow_length: int


@dataclass(frozen=True, slots=True)
class StreamEnded:
    """The client finished sending on this stream, with its trailer fields if it sent any."""

    stream_id: int
    trailers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class StreamReset:
    """The stream is over: the client reset it, or we refused it (`by_peer` False)."""

    stream_id: int
    error_code: int
    by_peer: bool = True


@dataclass(frozen=True, slots=True)
class WindowOpened:
    """The client granted more send window: to one stream, or to all (`stream_id` 0)."""

    stream_id: int


@dataclass(frozen=True, slots=True)
class PeerGoingAway:
    """The client sent GOAWAY: it opens no more streams; answer the open ones, then close."""


@dataclass(frozen=True, slots=True)
class ConnectionTerminated:
    """The connection is over: we sent GOAWAY (`by_peer` False), or the client ended it.

    After our own GOAWAY for bad input the owner flushes `data_to_send()` and closes.
    """

    error_code: int
    last_stream_id: int
    by_peer: bool
    detail: str = ""


Event = (
    RequestOpened
    | BodyData
    | StreamEnded
    | StreamReset
    | WindowOpened
    | PeerGoingAway
    | ConnectionTerminated
)
