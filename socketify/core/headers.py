"""Multi-valued mappings for query strings, forms and headers.

`MultiDict` keeps every value of a repeated key and answers `d[k]` with the last one (what a
form or query user means), `getall(k)` with all of them. `Headers` is the case-insensitive
variant used for headers, where `h[k]` joins repeated values with ", " (RFC 9110 §5.3);
`Request.headers` and `Response.headers` hand out read-only ones (middleware changes a
request's headers with `req.set_header`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from urllib.parse import quote

__all__ = ["Headers", "MultiDict", "content_disposition"]


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
            raise TypeError(
                "these headers are read-only: change a request's with req.set_header(name,"
                " value), a response's with res.set_header(name, value)"
            )

    def __repr__(self) -> str:
        return f"Headers({[(k, v) for k, vs in self._data.items() for v in vs]!r})"


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
