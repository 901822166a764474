"""Multi-valued mappings for query strings, forms and headers, and the HTTP date format.

`MultiDict` keeps every value of a repeated key and answers `d[k]` with the last one (what a
form or query user means), `getall(k)` with all of them. `Headers` is the case-insensitive
variant used for request headers, where `h[k]` joins repeated values with ", " (RFC 9110
§5.3) and middleware may write (e.g. `X-Request-Id`).
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from urllib.parse import quote

__all__ = [
    "DateLines",
    "Headers",
    "MultiDict",
    "check_header_name",
    "check_header_value",
    "content_disposition",
    "http_date",
]


class MultiDict(Mapping[str, str]):
    """Read-only mapping of str keys to str values; `d[k]` is the last value of `k`."""

    __slots__ = ("_data",)

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        data: dict[str, list[str]] = {}
        for key, value in items:
            values = data.get(key)
            if values is None:
                data[key] = [value]
            else:
                values.append(value)
        self._data = data

    def __getitem__(self, key: str) -> str:
        return self._data[key][-1]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def getall(self, key: str) -> list[str]:
        """Return every value of `key` in arrival order (empty list when absent)."""
        return list(self._data.get(key, ()))

    def multi_items(self) -> list[tuple[str, str]]:
        """Return all (key, value) pairs, repeated keys included."""
        return [(k, v) for k, values in self._data.items() for v in values]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.multi_items()!r})"


class Headers(MutableMapping[str, str]):
    """Case-insensitive header mapping; repeated fields read back joined with ", "."""

    __slots__ = ("_data", "_readonly")

    def __init__(self, items: Iterable[tuple[str, str]] = (), *, readonly: bool = False) -> None:
        data: dict[str, list[str]] = {}
        for name, value in items:
            key = name.lower()
            values = data.get(key)
            if values is None:
                data[key] = [value]
            else:
                values.append(value)
        self._data = data
        self._readonly = readonly

    def __getitem__(self, name: str) -> str:
        values = self._data[name.lower()]
        return values[0] if len(values) == 1 else ", ".join(values)

    def __setitem__(self, name: str, value: str) -> None:
        self._check_writable()
        self._data[name.lower()] = [value]

    def __delitem__(self, name: str) -> None:
        self._check_writable()
        del self._data[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._data

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        """Return the (joined) value of `name`, or `default`."""
        values = self._data.get(name.lower())
        if values is None:
            return default
        return values[0] if len(values) == 1 else ", ".join(values)

    def getall(self, name: str) -> list[str]:
        """Return each field line's value for `name` separately, in wire order."""
        return list(self._data.get(name.lower(), ()))

    def add(self, name: str, value: str) -> None:
        """Append one more value for `name`."""
        self._check_writable()
        self._data.setdefault(name.lower(), []).append(value)

    def _check_writable(self) -> None:
        if self._readonly:
            raise TypeError("these headers are read-only; use the Response methods")

    def __repr__(self) -> str:
        return f"Headers({[(k, v) for k, vs in self._data.items() for v in vs]!r})"


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(timestamp: float | None = None) -> str:
    """Format a Unix time (default: now) as an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`."""
    t = time.gmtime(time.time() if timestamp is None else timestamp)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


class DateLines:
    """The `Date:` and `Server:` lines of a response head, formatted at most once a second."""

    __slots__ = ("lines", "until")

    def __init__(self) -> None:
        self.until = 0.0
        self.lines = ""

    def get(self) -> str:
        """Return both lines, CRLF-terminated, for the current second."""
        now = time.time()
        if now >= self.until:  # PERF: one float compare per response, no int() call
            self.lines = f"Date: {http_date(now)}\r\nServer: socketify\r\n"
            self.until = int(now) + 1
        return self.lines


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# PERF: common names skip the token regex and the lower() call.
_KNOWN_NAMES = {
    name: name.lower()
    for name in (
        "Content-Type", "content-type", "Cache-Control", "Location", "Vary", "ETag",
        "Last-Modified", "Content-Encoding", "Content-Disposition", "Content-Range",
        "Accept-Ranges", "Access-Control-Allow-Origin", "X-Request-Id", "Set-Cookie",
        "Connection", "Date", "Server", "Content-Length", "Transfer-Encoding",
    )
}  # fmt: skip


def check_header_name(name: str) -> str:
    """Return `name` lower-cased; ValueError unless it is an RFC 9110 token."""
    lower = _KNOWN_NAMES.get(name)
    if lower is None:
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValueError(f"invalid header name {name!r}")
        lower = name.lower()
    return lower


def check_header_value(value: object) -> str:
    """Return `value` as text; ValueError on CR, LF, NUL (response splitting) or non-latin-1."""
    text = value if type(value) is str else str(value)
    if "\r" in text or "\n" in text or "\x00" in text:
        raise ValueError("header values must not contain CR, LF or NUL")
    if not text.isascii():
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError("header values must be latin-1; percent-encode the rest") from None
    return text


def content_disposition(filename: str) -> str:
    """`attachment; filename="..."` with an ASCII fallback and RFC 6266 filename* if needed."""
    filename = "".join(c for c in filename if c.isprintable())
    # NFKD turns "résumé" into "resume" for clients that only read the plain parameter.
    ascii_name = unicodedata.normalize("NFKD", filename).encode("ascii", "ignore").decode()
    ascii_name = ascii_name.replace("\\", "\\\\").replace('"', '\\"') or "download"
    value = f'attachment; filename="{ascii_name}"'
    if not filename.isascii():
        value += "; filename*=UTF-8''" + quote(filename, safe="!#$&+.^_`|~-")
    return value
