"""`from socketify import ratelimit`: token-bucket rate limiting (socketify.middleware)."""

from __future__ import annotations

from socketify.middleware.ratelimit import middleware
from socketify.stores import MemoryStore, Store

__all__ = ["MemoryStore", "Store", "middleware"]
