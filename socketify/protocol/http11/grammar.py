"""HTTP/1.1's own piece of grammar (RFC 9112): chunk extensions; the rest is `protocol.http`."""

from __future__ import annotations

import re

from socketify.protocol.http.grammar import FIELD_VALUE, QUOTED_STRING_PATTERN, TOKEN, TOKEN_PATTERN

__all__ = ["CHUNK_EXTENSIONS", "FIELD_VALUE", "TOKEN"]

# RFC 9112 §7.1.1: what may follow a chunk size, `;name` or `;name=value` (a token or a
# quoted string) each, with optional ("bad") whitespace around `;` and `=` only.
_PARAMETER_VALUE = rf"(?:{TOKEN_PATTERN}|{QUOTED_STRING_PATTERN})"
CHUNK_EXTENSIONS = re.compile(
    rf"(?:[ \t]*;[ \t]*{TOKEN_PATTERN}(?:[ \t]*=[ \t]*{_PARAMETER_VALUE})?)+"
)
