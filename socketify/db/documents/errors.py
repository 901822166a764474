"""Errors of the document store."""

from __future__ import annotations

__all__ = ["DocumentError", "DuplicateKeyError", "InvalidQuery"]


class DocumentError(Exception):
    """A document operation that cannot be done as asked."""


class InvalidQuery(DocumentError, ValueError):
    """A filter, sort, path or change the store does not understand."""


class DuplicateKeyError(DocumentError):
    """An insert or update would give two documents the same value of a unique field."""

    def __init__(self, field: str, message: str | None = None) -> None:
        super().__init__(message or f"a document with this {field} already exists")
        self.field = field
