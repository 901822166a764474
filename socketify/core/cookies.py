"""Cookie header parsing and Set-Cookie line building (RFC 6265).

Parsing is lenient, as browsers send what they were given: pairs without `=` or with an empty
name are skipped, one pair of surrounding double quotes is stripped, the last duplicate wins.
Building is strict: a name must be an RFC 6265 token and no part may contain CR, LF, NUL, `;`
or `,` — those would let a value inject attributes or split the response.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from socketify.protocol.http11.grammar import TOKEN
from socketify.protocol.http11.serializer import http_date

__all__ = ["build_set_cookie", "expired_cookie", "parse_cookie_header"]

# RFC 9110 token: visible ASCII except separators.
# Control characters (except none: even TAB is odd in a cookie) and the two delimiters.
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f;,]")
_SAME_SITE = {"lax": "Lax", "strict": "Strict", "none": "None"}
_EPOCH = "Thu, 01 Jan 1970 00:00:00 GMT"


def parse_cookie_header(header: str) -> dict[str, str]:
    """Parse a `Cookie:` header value into {name: value}."""
    cookies: dict[str, str] = {}
    for pair in header.split(";"):
        name, eq, value = pair.partition("=")
        if not eq:
            continue
        name = name.strip()
        if not name:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            value = value[1:-1]
        cookies[name] = value
    return cookies


def _check(what: str, text: str) -> str:
    if _FORBIDDEN.search(text):
        raise ValueError(f"cookie {what} must not contain control characters, ';' or ','")
    return text


def _expires_text(expires: datetime | float | int) -> str:
    if isinstance(expires, datetime):
        if expires.tzinfo is None:
            # A naive datetime is taken as UTC, not local time: servers rarely run in a
            # meaningful local zone and an hour's skew would make cookies expire early.
            expires = expires.replace(tzinfo=UTC)
        return http_date(expires.timestamp())
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        raise TypeError("expires must be a datetime or Unix seconds")
    return http_date(expires)


def build_set_cookie(
    name: str,
    value: str,
    *,
    max_age: int | timedelta | None = None,
    expires: datetime | float | None = None,
    path: str | None = "/",
    domain: str | None = None,
    secure: bool = False,
    http_only: bool = False,
    same_site: str | None = None,
) -> str:
    """Return one Set-Cookie value: `name=value; Path; Domain; Max-Age; Expires; Secure; ...`."""
    if not isinstance(name, str) or not TOKEN.fullmatch(name):
        raise ValueError(f"invalid cookie name {name!r}: must be an RFC 6265 token")
    parts = [f"{name}={_check('value', value)}"]
    if path:
        parts.append(f"Path={_check('path', path)}")
    if domain:
        parts.append(f"Domain={_check('domain', domain)}")
    if max_age is not None:
        seconds = int(max_age.total_seconds()) if isinstance(max_age, timedelta) else int(max_age)
        parts.append(f"Max-Age={seconds}")
    if expires is not None:
        parts.append(f"Expires={_expires_text(expires)}")
    if secure:
        parts.append("Secure")
    if http_only:
        parts.append("HttpOnly")
    if same_site is not None:
        canonical = _SAME_SITE.get(same_site.lower())
        if canonical is None:
            raise ValueError(f"same_site must be Lax, Strict or None, got {same_site!r}")
        parts.append(f"SameSite={canonical}")
    return "; ".join(parts)


def expired_cookie(name: str, path: str | None = "/", domain: str | None = None) -> str:
    """Return a Set-Cookie value that deletes `name` (empty, Max-Age=0, Expires in 1970)."""
    line = build_set_cookie(name, "", path=path, domain=domain, max_age=0)
    return f"{line}; Expires={_EPOCH}"
