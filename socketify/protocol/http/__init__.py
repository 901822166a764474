"""What HTTP/1.1 and HTTP/2 share, sans-IO: request heads, header fields, the Date clock,
trailer rules. `http11/` and `http2/` keep only their wire formats. Imports only the stdlib."""

from __future__ import annotations

from socketify.protocol.http.dates import DATE_CLOCK, SERVER_NAME, DateLines, http_date
from socketify.protocol.http.fields import (
    LOWER_HEADER_NAMES,
    HeaderField,
    check_header_name,
    check_header_value,
    header_field,
)
from socketify.protocol.http.heads import RequestHead
from socketify.protocol.http.trailers import (
    FORBIDDEN_TRAILERS,
    is_forbidden_trailer,
    trailer_field,
)

__all__ = [
    "DATE_CLOCK",
    "FORBIDDEN_TRAILERS",
    "LOWER_HEADER_NAMES",
    "SERVER_NAME",
    "DateLines",
    "HeaderField",
    "RequestHead",
    "check_header_name",
    "check_header_value",
    "header_field",
    "http_date",
    "is_forbidden_trailer",
    "trailer_field",
]
