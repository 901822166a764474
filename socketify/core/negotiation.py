"""Content negotiation shared by compression, static files and CORS: Accept-Encoding and Vary.

`accepted_encodings` reads q-values properly (RFC 9110 §12.5.3): `gzip;q=0` refuses gzip, `*`
covers what is not named, and the order of preference is by q, then by the server's own order.
`add_vary` appends a token to Vary without duplicating it and without replacing what other
middleware put there; tokens are compared whole, never as substrings.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from socketify.core.response import Response

__all__ = ["add_vary", "choose_encoding"]


@lru_cache(maxsize=256)
def _parse(header: str) -> tuple[dict[str, float], float | None]:
    """{coding: q} for the codings named in `header`, and the q of `*` (None if absent)."""
    qualities: dict[str, float] = {}
    star: float | None = None
    for item in header.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = max(0.0, min(1.0, float(value.strip())))
                except ValueError:
                    q = 0.0  # an unreadable weight is no consent
        if coding == "x-gzip":
            coding = "gzip"  # RFC 9110 §8.4.1.3: an alias
        if coding == "*":
            star = q
        else:
            qualities[coding] = max(q, qualities.get(coding, 0.0))
    return qualities, star


def choose_encoding(accept_encoding: str, offered: tuple[str, ...]) -> str | None:
    """The best of `offered` (server preference order) the client accepts, or None."""
    if not accept_encoding:
        return None
    qualities, star = _parse(accept_encoding)
    best: str | None = None
    best_q = 0.0
    for coding in offered:
        q = qualities.get(coding, star if star is not None else 0.0)
        if q > best_q:
            best, best_q = coding, q
    return best


def add_vary(res: Response, token: str) -> None:
    """Add `token` to the response's Vary header unless it (or `*`) is already there."""
    current = res.get_header("vary")
    if not current:
        res.set_header("Vary", token)
        return
    present = {part.strip().lower() for part in current.split(",")}
    if token.lower() not in present and "*" not in present:
        res.set_header("Vary", f"{current}, {token}")
