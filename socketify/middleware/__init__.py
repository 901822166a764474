"""Middleware built-ins, all of the one shape `(req, res, next)`.

`request_id()` and `body_limit(n)` are here; the others live in their modules and are also
reachable from the top level: `socketify.logging`, `socketify.cors`, `socketify.ratelimit`,
`socketify.static_files`. Compression is a server option (`Server(compression=...)`), with
its settings in `CompressionOptions`.
"""

from __future__ import annotations

from socketify.core.compression import CompressionOptions
from socketify.middleware.limits import body_limit
from socketify.middleware.proxy import client_ip
from socketify.middleware.request_ids import request_id

__all__ = ["CompressionOptions", "body_limit", "client_ip", "request_id"]
