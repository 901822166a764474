"""`request_id()`: one id per request, in the request, the response and the access log.

An incoming `X-Request-Id` (a proxy's, or the caller's for tracing) is reused when it is 1-128
visible ASCII characters; anything else — too long, spaces, control or non-ASCII characters —
is replaced by a fresh id, so a client cannot inject line breaks or fake fields into logs
through it. Fresh ids are 16 lowercase hex characters: 64 random bits from the
`random` module, which CPython reseeds in every forked worker (ids are for correlation, not
secrets; `os.urandom` would cost a system call per request), made 256 at a time.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from socketify.core.chain import Hooked, hooked
from socketify.protocol.http11 import check_header_name

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["request_id"]

_WELL_FORMED = re.compile(r"[\x21-\x7e]{1,128}")


def request_id(
    header: str = "X-Request-Id",
    *,
    trust_incoming: bool = True,
    generate: Callable[[], str] | None = None,
) -> Hooked:
    """Middleware: reuse a well-formed incoming id (unless told not to) or make one.

    The id is set on the request too, so the handler and later middleware read it with
    `req.header(header)`.
    """
    lower = check_header_name(header)  # a bad name fails here, not on the first request
    fullmatch = _WELL_FORMED.fullmatch
    make = generate or _fresh_id

    def request_id_middleware(req: Request, res: Response) -> bool:
        rid = req.header(lower) if trust_incoming else ""
        if not rid or fullmatch(rid) is None:
            rid = make()
            req.set_header(header, rid)
        res.set_header(header, rid)
        return True

    return hooked(request_id_middleware)


_bits = random.getrandbits
_IDS_MADE = 256  # fresh ids made at a time
_ids: list[str] = []  # made, not yet given out
_take_id = _ids.pop


def _fresh_id() -> str:
    """A fresh id, from a new lot when the last one is used up.

    PERF: one `getrandbits` call, hex conversion and split make a lot of ids at C speed, so
    a request takes one with a `pop` instead of three conversions of its own.
    """
    if not _ids:
        lot = _bits(64 * _IDS_MADE).to_bytes(8 * _IDS_MADE).hex(" ", 8)
        _ids.extend(lot.split())
    return _ids.pop()


# A child must not give out the ids its parent had made (the parent would give them too);
# CPython reseeds `random` in the child, so its lots differ.
os.register_at_fork(after_in_child=_ids.clear)
