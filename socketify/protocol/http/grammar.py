"""Shared pieces of the HTTP grammar (RFC 9110): tokens and field values."""

from __future__ import annotations

import re

__all__ = ["FIELD_VALUE", "QUOTED_STRING_PATTERN", "TOKEN", "TOKEN_PATTERN"]

TOKEN_PATTERN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
QUOTED_STRING_PATTERN = r'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x20-\x7e\x80-\xff])*"'

# RFC 9110 §5.6.2: header names, methods, cookie names and transfer codings are tokens.
TOKEN = re.compile(TOKEN_PATTERN)
# RFC 9110 §5.5 field-value: visible ASCII, SP, HTAB and obs-text; no control characters.
FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
