"""The error a socketify.py call that Socketify cannot provide raises."""

from __future__ import annotations

__all__ = ["unsupported"]


def unsupported(name: str, instead: str) -> NotImplementedError:
    """The error raised by a socketify.py call Socketify does not provide."""
    return NotImplementedError(
        f"{name} is part of socketify.py's API that Socketify does not provide: {instead}"
        " (see docs/guide/socketify-py.md)"
    )
