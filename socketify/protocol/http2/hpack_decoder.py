"""The HPACK decoder h2 uses for us: its errors and the Content-Length field in server terms.

h2 decodes every header block with the `hpack.Decoder` it keeps as `H2Connection.decoder`;
`ServerDecoder` takes its place and differs in two ways.

A block HPACK cannot decode leaves the connection's dynamic table unknown: that is a
connection error of type COMPRESSION_ERROR (RFC 9113 §4.3), where h2 would answer every
decoding failure with PROTOCOL_ERROR. The decoder raises h2's own ProtocolError, with the right
code, which h2 lets through to its GOAWAY.

h2 checks a request body against its Content-Length and fails the whole connection when they
differ, where RFC 9113 §8.1.1 makes that the request's own error, a stream error. So the field
reaches h2 under a name it never looks for, `CONTENT_LENGTH`, which `messages.py` reads back;
the connection compares the body with it. A client's field of that very name, malformed as
any upper-case name is, is renamed so that it still reads as malformed.
"""

from __future__ import annotations

from typing import Any, cast

import h2.exceptions
from h2.errors import ErrorCodes
from hpack import Decoder
from hpack.exceptions import HPACKError, OversizedHeaderListError

__all__ = ["CONTENT_LENGTH", "CompressionError", "ServerDecoder"]

CONTENT_LENGTH = b"Content-Length"  # "content-length" as h2 gets it
_CLIENTS_CONTENT_LENGTH = b"CONTENT-LENGTH"  # a client's own "Content-Length": still malformed


class CompressionError(h2.exceptions.ProtocolError):
    """A header block HPACK cannot decode: the connection's compression state is lost."""

    error_code = ErrorCodes.COMPRESSION_ERROR


class ServerDecoder(Decoder):
    """`hpack.Decoder` with COMPRESSION_ERROR for bad blocks and Content-Length kept from h2."""

    def decode(self, data: bytes, raw: bool = False) -> Any:
        """The header list of one block, as `hpack.Decoder.decode` gives it."""
        try:
            # hpack makes a list, which is changed in place here rather than copied.
            headers = cast("list[Any]", super().decode(data, raw))
        except OversizedHeaderListError:
            raise  # h2 makes this one a denial-of-service error (ENHANCE_YOUR_CALM)
        except (HPACKError, IndexError, TypeError, UnicodeDecodeError) as exc:
            raise CompressionError(f"undecodable header block: {exc}") from exc
        for index, (name, value) in enumerate(headers):
            if name == b"content-length":
                headers[index] = (CONTENT_LENGTH, value)
            elif name == CONTENT_LENGTH:
                headers[index] = (_CLIENTS_CONTENT_LENGTH, value)
        return headers
