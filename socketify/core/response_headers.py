"""Response header names and lines: the checks `Response` runs once per name, and `HeaderLine`.

Theory of operation. A response header is kept as a `HeaderLine`, (lower-case name, name as
given, value, `Name: value\r\n`), so serializing is concatenation. `Response.set_header`
checks name and value on every call (a name only the first time: checked names are
remembered); `header_line()` does the same checks once for a header a middleware sets on
every request, which then costs `Response.put_line`/`add_line` no checks at all. The headers a
`Response` keeps apart are listed here too: the framing headers are ours alone, Date, Server
and Connection replace ours, Content-Type has its own slot.
"""

from __future__ import annotations

from socketify.protocol.http11.serializer import (
    LOWER_HEADER_NAMES,
    check_header_name,
    check_header_value,
)

__all__ = [
    "CHECKED_NAMES",
    "FRAMING",
    "KEPT_APART",
    "REPLACED",
    "HeaderLine",
    "check_name",
    "header_line",
]

FRAMING = frozenset({"content-length", "transfer-encoding"})
REPLACED = frozenset({"date", "server", "connection"})
KEPT_APART = FRAMING | REPLACED  # what `Response._special` handles
# PERF: header names are nearly always literals in the app's code, so each distinct name is
# checked against the token grammar once, then found in this dict (bounded: a name made from
# request data would be checked every time past the bound, never wrongly accepted).
CHECKED_NAMES: dict[str, str] = dict(LOWER_HEADER_NAMES)
CHECKED_NAMES_MAX = 1024

# One header of a response: (lower-case name, name as given, value, `Name: value\r\n`).
HeaderLine = tuple[str, str, str, str]


def header_line(name: str, value: str) -> HeaderLine:
    """A checked `HeaderLine` for `Response.put_line`/`add_line` (ValueError if invalid).

    Content-Type, the framing headers, Date, Server and Connection are refused: the
    Response keeps those apart (use `set_header`).
    """
    lower = check_name(name)
    value = check_header_value(value)
    if lower == "content-type" or lower in KEPT_APART:
        raise ValueError(f"{name} cannot be a header line; use set_header")
    return (lower, name, value, f"{name}: {value}\r\n")


def check_name(name: str) -> str:
    """`check_header_name`, remembering the names that passed."""
    lower = check_header_name(name)
    if len(CHECKED_NAMES) < CHECKED_NAMES_MAX:
        CHECKED_NAMES[name] = lower
    return lower
