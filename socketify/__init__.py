"""Socketify for Python: a pre-fork gevent web server and framework."""

from __future__ import annotations

from socketify.app import Server
from socketify.errors import HTTPError
from socketify.options import ServerOptions
from socketify.request import Request
from socketify.response import Response

__version__ = "0.1.0"

__all__ = ["HTTPError", "Request", "Response", "Server", "ServerOptions", "__version__"]
