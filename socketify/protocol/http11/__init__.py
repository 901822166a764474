"""HTTP/1.1, sans-IO: bytes in, events out; responses in, bytes out. Imports only the stdlib."""

from __future__ import annotations

from socketify.protocol.http11.connection import (
    CONTINUE,
    Framing,
    LocalProtocolError,
    ServerConnection,
)
from socketify.protocol.http11.events import (
    CLOSED,
    END_OF_MESSAGE,
    NEED_DATA,
    ParseError,
    RequestHead,
    Sentinel,
)
from socketify.protocol.http11.parser import RequestParser
from socketify.protocol.http11.serializer import (
    DateLines,
    check_header_name,
    check_header_value,
    encode_chunk,
    error_response,
    http_date,
    serialize_head,
)
from socketify.protocol.http11.status import NO_BODY_STATUSES, reason, status_line

__all__ = [
    "CLOSED",
    "CONTINUE",
    "END_OF_MESSAGE",
    "NEED_DATA",
    "NO_BODY_STATUSES",
    "DateLines",
    "Framing",
    "LocalProtocolError",
    "ParseError",
    "RequestHead",
    "RequestParser",
    "Sentinel",
    "ServerConnection",
    "check_header_name",
    "check_header_value",
    "encode_chunk",
    "error_response",
    "http_date",
    "reason",
    "serialize_head",
    "status_line",
]
