"""Which fields may travel in a trailer section, the same rule for HTTP/1.1 and HTTP/2.

A trailer section follows the body: the chunked coding's last chunk in HTTP/1.1, a final
HEADERS frame in HTTP/2. Fields that steer how a message is framed, routed, authenticated or
interpreted must be known before the body, so a recipient never takes them from a trailer
(RFC 9110 section 6.5.1 lists the kinds). Here that rule is one set of names:

- a request's trailer fields with one of these names are dropped (the rest of the request
  is served; the handler never sees them), on both protocols alike;
- a response's trailer with one of these names is refused with ValueError when it is set
  (`trailer_field`), so the mistake shows in the handler that made it.

Each protocol also refuses what its own framing makes malformed: a trailer line that is no
field at all in HTTP/1.1 (400), a pseudo-header or connection-specific field in HTTP/2 (the
stream is reset). Sizes are bounded like a header section (`max_header_size`).
"""

from __future__ import annotations

from socketify.protocol.http.fields import HeaderField, header_field

__all__ = ["FORBIDDEN_TRAILERS", "is_forbidden_trailer", "trailer_field"]

# Lower-case names a trailer section must not carry (any `content-*` name is refused too,
# except the digests that exist to be computed after the content: see is_forbidden_trailer).
FORBIDDEN_TRAILERS = frozenset(
    {
        # framing and the connection
        "transfer-encoding", "content-length", "trailer", "te", "connection", "keep-alive",
        "upgrade", "proxy-connection",
        # routing and request modifiers
        "host", "cache-control", "expect", "max-forwards", "pragma", "range", "if-match",
        "if-none-match", "if-modified-since", "if-unmodified-since", "if-range",
        # authentication and state
        "authorization", "proxy-authorization", "www-authenticate", "proxy-authenticate",
        "authentication-info", "proxy-authentication-info", "cookie", "set-cookie",
        # response control data
        "age", "date", "expires", "location", "retry-after", "vary", "warning",
    }
)  # fmt: skip
# `content-*` fields describe the content and must come first; these describe a digest of it,
# which a sender can only know once the content is out.
_CONTENT_DIGESTS = frozenset({"content-digest", "content-md5"})


def is_forbidden_trailer(lower_name: str) -> bool:
    """Whether a field named `lower_name` (lower-case) must not be taken from a trailer."""
    if lower_name in FORBIDDEN_TRAILERS:
        return True
    return lower_name.startswith("content-") and lower_name not in _CONTENT_DIGESTS


def trailer_field(name: str, value: str) -> HeaderField:
    """The checked field for a response trailer; ValueError for a name a trailer must not use.

    Checked as a header field is (no CR, LF or NUL: nothing can split the message), and
    refused when the name is one of `FORBIDDEN_TRAILERS` or another `content-*` field.
    """
    field = header_field(name, value)
    if is_forbidden_trailer(field[0]):
        raise ValueError(f"{name} must not be sent as a trailer field")
    return field
