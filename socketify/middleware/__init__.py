"""Middleware built-ins, all of the one shape `(req, res, next)`.

`request_id()` and `body_limit(n)` are here; the others live in their modules and are also
reachable from the top level: `socketify.logging`, `socketify.cors`, `socketify.ratelimit`,
`socketify.static_files`. Compression is a server option (`Server(compression=...)`), with
its settings in `CompressionOptions`.

The package is also callable: `middleware(auth, home)` is socketify.py's composition helper
(`socketify.socketify_py.chain.middleware`). socketify.py's code imports it as
`from socketify import middleware`, the name of this package, so the one name serves both.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from socketify.core.compression import CompressionOptions
from socketify.middleware.limits import body_limit
from socketify.middleware.proxy import client_ip
from socketify.middleware.request_ids import request_id

__all__ = ["CompressionOptions", "body_limit", "client_ip", "request_id"]


class _CallableModule(types.ModuleType):
    """This package, which is also socketify.py's `middleware(*functions)` helper."""

    def __call__(self, *functions: Callable[..., Any]) -> Callable[..., Any]:
        from socketify.socketify_py.chain import middleware

        return middleware(*functions)


# A module's class may be replaced by a subclass of ModuleType (the way Python documents
# for customising a module's behaviour); only __call__ is added.
sys.modules[__name__].__class__ = _CallableModule
