"""Shared pieces of the RFC 9110 and RFC 9112 grammar."""

from __future__ import annotations

import re

__all__ = ["CHUNK_EXTENSIONS", "FIELD_VALUE", "TOKEN"]

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED_STRING = r'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x20-\x7e\x80-\xff])*"'

# RFC 9110 §5.6.2: header names, methods, cookie names and transfer codings are tokens.
TOKEN = re.compile(_TOKEN)
# RFC 9110 §5.5 field-value: visible ASCII, SP, HTAB and obs-text; no control characters.
FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
# RFC 9112 §7.1.1: what may follow a chunk size, `;name` or `;name=value` (a token or a
# quoted string) each, with optional ("bad") whitespace around `;` and `=` only.
CHUNK_EXTENSIONS = re.compile(
    rf"(?:[ \t]*;[ \t]*{_TOKEN}(?:[ \t]*=[ \t]*(?:{_TOKEN}|{_QUOTED_STRING}))?)+"
)
