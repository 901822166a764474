"""Socketify for Python: a pre-fork gevent web server and framework."""

from __future__ import annotations

from socketify.app import Server
from socketify.errors import HTTPError
from socketify.middleware.compression import CompressionOptions
from socketify.options import ServerOptions
from socketify.request import Request
from socketify.response import Response
from socketify.tls import TlsOptions

__version__ = "0.1.0"

__all__ = [
    "CompressionOptions",
    "HTTPError",
    "Request",
    "Response",
    "Server",
    "ServerOptions",
    "TlsOptions",
    "__version__",
]
