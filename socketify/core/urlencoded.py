"""`application/x-www-form-urlencoded`, the syntax of query strings and simple form bodies."""

from __future__ import annotations

from urllib.parse import unquote_plus

from socketify.core.headers import MultiDict

__all__ = ["parse_query"]


def parse_query(query_string: str) -> MultiDict:
    """Parse `a=1&b=2`: `+` is a space, %XX decoded, empty keys dropped, missing value ""."""
    pairs: list[tuple[str, str]] = []
    for part in query_string.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        key = _unquote_plus(key)
        if key:
            pairs.append((key, _unquote_plus(value)))
    return MultiDict(pairs)


def _unquote_plus(text: str) -> str:
    if "%" in text or "+" in text:  # most keys and values need no decoding at all
        return unquote_plus(text)  # keeps malformed escapes as raw text
    return text
