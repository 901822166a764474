"""Fixtures for the worker tests (the helpers live in workers_harness)."""

from __future__ import annotations

from workers_harness import launch

__all__ = ["launch"]
