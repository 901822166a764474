"""`from socketify import cors`: the CORS middleware (see socketify.middleware.cors)."""

from __future__ import annotations

from socketify.middleware.cors import DEFAULT_METHODS, middleware

__all__ = ["DEFAULT_METHODS", "middleware"]
