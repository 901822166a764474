"""Shared pieces of the RFC 9110 grammar."""

from __future__ import annotations

import re

__all__ = ["FIELD_VALUE", "TOKEN"]

# RFC 9110 §5.6.2: header names, methods, cookie names and transfer codings are tokens.
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# RFC 9110 §5.5 field-value: visible ASCII, SP, HTAB and obs-text; no control characters.
FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
