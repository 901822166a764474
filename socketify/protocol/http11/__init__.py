"""HTTP/1.1, sans-IO: bytes in, events out; responses in, bytes out. Imports only the stdlib.

Request heads, header fields, the Date clock, status phrases and trailer rules are HTTP's,
shared with HTTP/2 (`socketify.protocol.http`); they are re-exported here for callers that
speak HTTP/1.1.
"""

from __future__ import annotations

from socketify.protocol.http.trailers import (
    FORBIDDEN_TRAILERS,
    is_forbidden_trailer,
    trailer_field,
)
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
    HeaderField,
    check_header_name,
    check_header_value,
    encode_chunk,
    error_response,
    header_field,
    http_date,
    serialize_head,
)
from socketify.protocol.http11.status import NO_BODY_STATUSES, reason, status_line

__all__ = [
    "CLOSED",
    "CONTINUE",
    "END_OF_MESSAGE",
    "FORBIDDEN_TRAILERS",
    "NEED_DATA",
    "NO_BODY_STATUSES",
    "DateLines",
    "Framing",
    "HeaderField",
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
    "header_field",
    "http_date",
    "is_forbidden_trailer",
    "reason",
    "serialize_head",
    "status_line",
    "trailer_field",
]
