"""Socketify for Python: a pre-fork gevent web server and framework.

The application object and its option types are imported here; the feature modules users
reach as `from socketify import sse, pulse, sessions, static_files, cors, ratelimit, logging`
are imported on first use, so `import socketify` stays small and never imports gevent.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from socketify.app import Server
from socketify.core.compression import CompressionOptions
from socketify.core.errors import HTTPError
from socketify.core.options import ServerOptions
from socketify.core.request import Request
from socketify.core.response import Response
from socketify.core.tls_options import TlsOptions

if TYPE_CHECKING:
    from socketify.middleware import access_log as logging
    from socketify.middleware import cors, ratelimit, static_files
    from socketify.realtime import pulse, sse
    from socketify.state import sessions

__version__ = "0.1.0"

# The feature modules behind the short names of the public API.
_FEATURES = {
    "cors": "socketify.middleware.cors",
    "logging": "socketify.middleware.access_log",
    "pulse": "socketify.realtime.pulse",
    "ratelimit": "socketify.middleware.ratelimit",
    "sessions": "socketify.state.sessions",
    "sse": "socketify.realtime.sse",
    "static_files": "socketify.middleware.static_files",
}

__all__ = [
    "CompressionOptions",
    "HTTPError",
    "Request",
    "Response",
    "Server",
    "ServerOptions",
    "TlsOptions",
    "__version__",
    "cors",
    "logging",
    "pulse",
    "ratelimit",
    "sessions",
    "sse",
    "static_files",
]


# socketify.py's API (`from socketify import App, AppOptions, OpCode`), imported on first use.
# Its `middleware` helper is not among them: `socketify.middleware`, our middleware package,
# is callable as that helper.
_SOCKETIFY_PY = {
    "App",
    "AppExtension",
    "AppListenOptions",
    "AppOptions",
    "AppRequest",
    "AppResponse",
    "CompressOptions",
    "DecoratorRouter",
    "Loop",
    "MiddlewareRouter",
    "OpCode",
    "SendStatus",
    "WebSocket",
    "sendfile",
}


def __getattr__(name: str) -> Any:
    """Import a feature module the first time its short name is used."""
    if name in _SOCKETIFY_PY:
        value = getattr(importlib.import_module("socketify.socketify_py"), name)
        globals()[name] = value
        return value
    module_name = _FEATURES.get(name)
    if module_name is None:
        raise AttributeError(f"module 'socketify' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    globals()[name] = module
    return module
