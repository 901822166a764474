"""Which modules the optional compiled build compiles, and which of them this install runs compiled.

The same source serves both builds: `setup.py` hands `HOT_MODULES` to mypyc when a wheel is
built (an editable install and `SOCKETIFY_COMPILE=0` stay pure Python), and an extension
module found next to a `.py` file wins at import time. This module imports only the standard
library, so `setup.py` can read the list without importing the package.
"""

from __future__ import annotations

import importlib
import importlib.machinery

__all__ = ["HOT_MODULES", "compiled_modules"]

# The modules a /ping request spends most of its user-space time in, found by profiling the
# worker: the serve loop of a connection, the HTTP/1.1 parser and serializer with the field
# checks and the Date clock they share with HTTP/2, the glue between them and the request and
# response objects, those objects and the middleware chain, and the application's request path
# (`Dispatcher`) with the router (and host routers) it looks routes up in. A compiled function
# checks its arguments against its hints, so the public ones here say everything their callers
# may pass.
# The classes apps subclass (`Application`, `Router`) say so with `mypyc_attr`.
HOT_MODULES: tuple[str, ...] = (
    "socketify/core/application.py",
    "socketify/core/chain.py",
    "socketify/core/dispatch.py",
    "socketify/core/headers.py",
    "socketify/core/hosts.py",
    "socketify/core/request.py",
    "socketify/core/response.py",
    "socketify/core/routing.py",
    "socketify/protocol/http/dates.py",
    "socketify/protocol/http/fields.py",
    "socketify/protocol/http/grammar.py",
    "socketify/protocol/http/heads.py",
    "socketify/protocol/http/status.py",
    "socketify/protocol/http11/chunked.py",
    "socketify/protocol/http11/connection.py",
    "socketify/protocol/http11/events.py",
    "socketify/protocol/http11/grammar.py",
    "socketify/protocol/http11/parser.py",
    "socketify/protocol/http11/serializer.py",
    "socketify/protocol/http11/status.py",
    "socketify/protocol/http11/target.py",
    "socketify/server/connection.py",
    "socketify/server/exchange.py",
    "socketify/server/service.py",
    "workers/supervise/context.py",
)


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def compiled_modules() -> list[str]:
    """The dotted names of the hot modules this interpreter imported from compiled code."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    names = []
    for path in HOT_MODULES:
        name = _module_name(path)
        origin = getattr(importlib.import_module(name), "__file__", None) or ""
        if origin.endswith(suffixes):
            names.append(name)
    return names
