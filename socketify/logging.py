"""`from socketify import logging`: the access-log middleware (see socketify.middleware.access_log).

This module shadows nothing: every module of the package imports the standard library with
absolute imports, so `import logging` inside socketify is still the stdlib's.
"""

from __future__ import annotations

from socketify.middleware.access_log import ACCESS_LOGGER, FORMATS, middleware

__all__ = ["ACCESS_LOGGER", "FORMATS", "middleware"]
