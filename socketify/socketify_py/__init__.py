"""socketify.py's App API on Socketify: `from socketify import App, AppOptions, OpCode`.

Code written for socketify.py (the uWebSockets binding) runs here with its `(res, req)`
handlers, `app.ws(path, behavior)` WebSockets, topics and `listen`/`run`, served by
Socketify's pre-fork workers. What is covered and what is not: docs/guide/socketify-py.md;
a call that is not covered raises NotImplementedError naming what to use instead.
"""

from __future__ import annotations

from socketify.socketify_py.app import App, AppListenOptions, AppOptions
from socketify.socketify_py.chain import DecoratorRouter, MiddlewareRouter, middleware
from socketify.socketify_py.extensions import AppExtension
from socketify.socketify_py.files import sendfile
from socketify.socketify_py.loop import Loop
from socketify.socketify_py.request import AppRequest
from socketify.socketify_py.response import AppResponse
from socketify.socketify_py.websocket import CompressOptions, OpCode, SendStatus, WebSocket

__all__ = [
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
    "middleware",
    "sendfile",
]
