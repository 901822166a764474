"""Typed configuration from the environment and `.env` files.

`Config.load()` is the usual entry point: a snapshot of the environment, then `.env` merged
under it, so a variable set in the environment beats the same key in the file. Values are
strings; the typed getters parse them strictly and answer None rather than guessing.

The `.env` dialect is deliberately small: one `KEY=VALUE` per line, `#` comment lines, an
optional leading `export `, values trimmed, an unquoted value's ` #...` tail dropped as a
comment, one layer of matching quotes removed. There are no escape sequences, no multi-line
values and no `${VAR}` expansion. python-dotenv was considered and not used: it decodes escape
sequences in double quotes, joins quoted values across lines and limits key characters, so the
same file would give different values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["Config", "Error", "parse_env"]

# What C's isspace() trims: Python's str.strip() would also eat Unicode spaces like U+00A0.
_BLANK = " \t\r\n\f\v"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})

# ASCII digits only: int() would also take "١٢", "1_000" and surrounding spaces.
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.ASCII | re.IGNORECASE,
)

# A quoted value followed by an inline comment: "a b" # note
_QUOTED_WITH_COMMENT = re.compile(r"""(["'])(.*)\1[ \t]+#.*""", re.DOTALL)


class Error(LookupError):
    """A required key is missing (or, for `require_int`, not an integer)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"missing required config key '{key}'")
        self.key = key


def _unquote(value: str) -> str:
    """Remove one layer of matching single or double quotes."""
    if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
        return value[1:-1]
    match = _QUOTED_WITH_COMMENT.fullmatch(value)
    if match is not None:
        return match.group(2)
    return value


def parse_env(text: str) -> dict[str, str]:
    """Parse `.env` text into a dict (later lines win over earlier ones for the same key)."""
    values: dict[str, str] = {}
    for raw in text.split("\n"):  # not splitlines(): \v, \f and U+2028 are not line ends here
        line = raw.strip(_BLANK)  # also drops the \r of CRLF
        if not line or line.startswith("#"):
            continue
        if line[:7].lower() == "export ":
            line = line[7:].strip(_BLANK)
        key, sep, value = line.partition("=")
        key = key.strip(_BLANK)
        if not sep or not key:
            continue
        value = value.strip(_BLANK)
        if value[:1] not in ("'", '"'):
            comment = value.find(" #")
            if comment != -1:
                value = value[:comment].rstrip(_BLANK)
        values[key] = _unquote(value)
    return values


class Config:
    """String settings with typed getters; build with `load()`, `from_env()` or `from_file()`."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values: dict[str, str] = dict(values or {})

    # -- building -------------------------------------------------------------------------

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        """A snapshot of the environment (later changes to it are not seen)."""
        return cls(os.environ if environ is None else environ)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Config:
        """The settings of one `.env` file; a missing file gives an empty Config."""
        return cls().merge_file(path, overrides=True)

    @classmethod
    def load(
        cls, env_file: str | os.PathLike[str] = ".env", environ: Mapping[str, str] | None = None
    ) -> Config:
        """The environment, plus the keys of `env_file` that the environment does not set."""
        return cls.from_env(environ).merge_file(env_file)

    def merge_file(self, path: str | os.PathLike[str], overrides: bool = False) -> Config:
        """Add the keys of the `.env` file at `path`; existing keys win unless `overrides`.

        A missing file adds nothing. Any other read error (a directory, no permission) is
        raised: a `.env` that exists but cannot be read is a deployment mistake to surface.
        """
        try:
            # utf-8-sig: an editor's byte-order mark must not become part of the first key.
            text = Path(path).read_text(encoding="utf-8-sig", errors="replace")
        except FileNotFoundError:
            return self
        for key, value in parse_env(text).items():
            if overrides or key not in self._values:
                self._values[key] = value
        return self

    def set(self, key: str, value: str) -> Config:
        """Set `key` to `value` (replacing any value)."""
        self._values[key] = value
        return self

    # -- reading --------------------------------------------------------------------------

    def contains(self, key: str) -> bool:
        """True when `key` is set (even to "")."""
        return key in self._values

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def all(self) -> dict[str, str]:
        """A copy of every key and value."""
        return dict(self._values)

    def get(self, key: str) -> str | None:
        """The value of `key`, or None."""
        return self._values.get(key)

    def get_or(self, key: str, fallback: str) -> str:
        """The value of `key`, or `fallback`."""
        return self._values.get(key, fallback)

    def get_int(self, key: str) -> int | None:
        """`key` as a base-10 integer; None when unset or not entirely an integer."""
        value = self._values.get(key)
        if value is None or _INT.fullmatch(value) is None:
            return None
        return int(value)

    def get_float(self, key: str) -> float | None:
        """`key` as a float; None when unset or not entirely a number."""
        value = self._values.get(key)
        if value is None or _FLOAT.fullmatch(value) is None:
            return None
        return float(value)

    def get_bool(self, key: str) -> bool | None:
        """`1/true/yes/on` → True, `0/false/no/off/""` → False (any case), else None."""
        value = self._values.get(key)
        if value is None:
            return None
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        return None

    def require(self, key: str) -> str:
        """The value of `key`; raises `Error` when it is not set."""
        value = self._values.get(key)
        if value is None:
            raise Error(key)
        return value

    def require_int(self, key: str) -> int:
        """`key` as an integer; raises `Error` when unset or not an integer."""
        value = self.get_int(key)
        if value is None:
            raise Error(key)
        return value

    def __repr__(self) -> str:
        # Keys only: values are often secrets and reprs end up in logs.
        return f"<Config keys={sorted(self._values)!r}>"
