"""Shared pieces of the RFC 9110 grammar."""

from __future__ import annotations

import re

__all__ = ["TOKEN"]

# RFC 9110 §5.6.2: header names, methods, cookie names and transfer codings are tokens.
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
