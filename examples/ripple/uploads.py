"""Uploaded files: stored under random names, served only to signed-in users.

    POST /api/upload              body: the file's bytes; Content-Type: its type;
                                  X-File-Name: its name (URL-encoded)
    -> 201 {"url": "/uploads/3f9c...e1.png", "name": "cat.png", "mime": "image/png", "size": 5120}

The stored name is 128 random bits and an extension chosen from the declared type (unknown
types become `.bin`, served as a download), so a name can neither be guessed nor escape the
folder, and what the browser is told the file is never comes from the uploader's file name.
A message refers to an upload by its URL; `checked_file` accepts only URLs of files that
exist here, and reads their type and size from the stored file rather than from the client.

Guide: docs/guide/bodies.md.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from examples.ripple.settings import uploads_folder

__all__ = ["MAX_UPLOAD", "TYPES", "checked_file", "path_of", "save"]

MAX_UPLOAD = 5 * 1024 * 1024
TYPES = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "audio/webm": ".weba",
    "audio/ogg": ".ogg",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
}
MIME_OF = {extension: mime for mime, extension in TYPES.items()} | {
    ".bin": "application/octet-stream"
}
STORED = re.compile(r"[0-9a-f]{32}\.[a-z]{3,4}")
PREFIX = "/uploads/"
MAX_NAME = 200

FOLDER = uploads_folder()


def save(data: bytes, content_type: str, name: str) -> dict[str, Any]:
    """Store `data`; the attachment that refers to it."""
    mime = content_type.partition(";")[0].strip().lower()
    extension = TYPES.get(mime, ".bin")
    stored = secrets.token_hex(16) + extension
    FOLDER.mkdir(parents=True, exist_ok=True)
    temporary = FOLDER / f".{stored}.part"
    temporary.write_bytes(data)
    os.replace(temporary, FOLDER / stored)  # a half-written file is never served
    shown = unquote(name).replace("/", "_").replace("\\", "_").strip()[:MAX_NAME] or stored
    return {"url": PREFIX + stored, "name": shown, "mime": MIME_OF[extension], "size": len(data)}


def path_of(stored: str) -> Path | None:
    """The file behind a stored name, or None for a name that is not one of ours."""
    if not STORED.fullmatch(stored):
        return None
    path = FOLDER / stored
    return path if path.is_file() else None


def checked_file(file: Any) -> dict[str, Any] | None:
    """The attachment a message may carry for a client's `{url, name}`, or None."""
    if not isinstance(file, dict) or not isinstance(file.get("url"), str):
        return None
    url: str = file["url"]
    path = path_of(url[len(PREFIX) :]) if url.startswith(PREFIX) else None
    if path is None:
        return None
    name = file.get("name")
    shown = name.strip()[:MAX_NAME] if isinstance(name, str) and name.strip() else path.name
    return {"url": url, "name": shown, "mime": MIME_OF[path.suffix], "size": path.stat().st_size}
