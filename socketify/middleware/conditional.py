"""Validators, conditional requests and byte ranges for file responses (RFC 9110 §13, §14).

Everything here is pure: it reads request headers and a file's size and mtime, and returns a
decision for the static-files middleware to act on. The headers come as `req.headers`, the
request's mapping (which honours what middleware changed): built once, it answers the half
dozen lookups a file answer needs with dict accesses instead of a scan of the list each.

- ETags are strong, `"<size hex>-<mtime_ns hex>"`: a write within the same second still
  changes them (whole seconds or a weak tag would make If-Range useless).
- Preconditions are evaluated in the order of RFC 9110 §13.2.2: If-Match, else
  If-Unmodified-Since (412); then If-None-Match — a list, `*`, weak comparison — else
  If-Modified-Since, which is ignored when If-None-Match is present (304).
- `If-Range` allows the range only for an exact strong ETag or the exact Last-Modified date.
- `Range`: one `bytes=` range is served as 206; several are answered 200 with the whole file;
  an unknown unit is ignored (200); a bytes range that cannot be satisfied or parsed is 416.
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from socketify.protocol.http11 import http_date

if TYPE_CHECKING:
    from socketify.core.headers import Headers

__all__ = [
    "UNSATISFIABLE",
    "etag_for",
    "if_range_allows",
    "last_modified_text",
    "parse_http_date",
    "parse_range",
    "preconditions",
]


class _Unsatisfiable:
    def __repr__(self) -> str:
        return "UNSATISFIABLE"


UNSATISFIABLE: Final = _Unsatisfiable()


def etag_for(size: int, mtime_ns: int) -> str:
    """The strong ETag of a file version: size and mtime in nanoseconds, in hex."""
    return f'"{size:x}-{mtime_ns:x}"'


@lru_cache(maxsize=1024)
def last_modified_text(mtime: int) -> str:
    """The Last-Modified value for an mtime in whole seconds (cached: files rarely change)."""
    return http_date(mtime)


@lru_cache(maxsize=256)
def parse_http_date(text: str) -> int | None:
    """An HTTP date (IMF-fixdate, RFC 850 or asctime) as Unix seconds, or None if invalid."""
    try:
        parsed = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        return None  # RFC 9110 dates are always GMT; a zone-less one is not an HTTP date
    return int(parsed.timestamp())


def _tags(header: str) -> list[str]:
    return [tag.strip() for tag in header.split(",") if tag.strip()]


def _opaque(tag: str) -> str:
    return tag[2:] if tag.startswith("W/") else tag


def preconditions(method: str, headers: Headers, etag: str | None, mtime: int | None) -> int | None:
    """412 or 304 when a precondition decides the answer, None to serve normally."""
    if_match = headers.get("if-match")
    if if_match:
        # Strong comparison: a weak tag never matches, `*` matches any current file.
        tags = _tags(if_match)
        if "*" not in tags and (etag is None or etag not in tags):
            return 412
    elif mtime is not None:
        unmodified_since = headers.get("if-unmodified-since")
        if unmodified_since:
            date = parse_http_date(unmodified_since)
            if date is not None and mtime > date:
                return 412
    if_none_match = headers.get("if-none-match")
    if if_none_match:
        tags = _tags(if_none_match)
        if "*" in tags or (etag is not None and _opaque(etag) in map(_opaque, tags)):
            return 304 if method in ("GET", "HEAD") else 412
        return None  # RFC 9110 §13.1.3: If-Modified-Since is ignored now
    if mtime is not None and method in ("GET", "HEAD"):
        modified_since = headers.get("if-modified-since")
        if modified_since:
            date = parse_http_date(modified_since)
            if date is not None and mtime <= date:
                return 304
    return None


def if_range_allows(headers: Headers, etag: str | None, mtime: int | None) -> bool:
    """False when an If-Range validator no longer matches (send the whole file instead)."""
    value = (headers.get("if-range") or "").strip()
    if not value:
        return True
    if value.startswith(('"', "W/")):
        return etag is not None and not value.startswith("W/") and value == etag
    date = parse_http_date(value)
    return date is not None and mtime is not None and date == mtime


def parse_range(header: str, size: int) -> tuple[int, int] | _Unsatisfiable | None:
    """(first, last) byte to send for a Range header; None to send everything; or 416."""
    unit, eq, spec = header.partition("=")
    if not eq or unit.strip().lower() != "bytes":
        return None  # unknown unit (or no unit at all): ignore the header
    spec = spec.strip()
    if "," in spec:
        return None  # several ranges: the whole file is a valid, simpler answer
    first_text, dash, last_text = spec.partition("-")
    first_text, last_text = first_text.strip(), last_text.strip()
    if not dash or not (first_text or last_text):
        return UNSATISFIABLE
    if (first_text and not _is_number(first_text)) or (last_text and not _is_number(last_text)):
        return UNSATISFIABLE
    if not first_text:  # suffix: the last N bytes
        count = _number(last_text)
        if count == 0 or size == 0:
            return UNSATISFIABLE
        return max(0, size - count), size - 1
    first = _number(first_text)
    if first >= size:
        return UNSATISFIABLE
    if not last_text:
        return first, size - 1
    last = _number(last_text)
    if last < first:
        return UNSATISFIABLE
    return first, min(last, size - 1)


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()  # "²".isdigit() is True, int("²") fails


def _number(text: str) -> int:
    # int() refuses over 4300 digits; any byte position past 10**18 is "beyond the end" anyway.
    return int(text) if len(text) <= 18 else 10**18
