"""Socketify for Python: a pre-fork gevent web server and framework."""

from __future__ import annotations

from socketify.errors import HTTPError

__version__ = "0.1.0"

__all__ = ["HTTPError", "__version__"]
