"""Content types by file extension (`.js` is `text/javascript`, as RFC 9239 says)."""

from __future__ import annotations

__all__ = ["DEFAULT_TYPE", "guess_type"]

DEFAULT_TYPE = "application/octet-stream"

_UTF8 = "; charset=utf-8"

# Textual types carry a charset so browsers never guess one.
_TYPES: dict[str, str] = {
    "html": "text/html" + _UTF8,
    "htm": "text/html" + _UTF8,
    "css": "text/css" + _UTF8,
    "js": "text/javascript" + _UTF8,
    "mjs": "text/javascript" + _UTF8,
    "json": "application/json" + _UTF8,
    "map": "application/json" + _UTF8,
    "xml": "application/xml" + _UTF8,
    "wasm": "application/wasm",
    "txt": "text/plain" + _UTF8,
    "md": "text/markdown" + _UTF8,
    "csv": "text/csv" + _UTF8,
    "svg": "image/svg+xml",
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "ico": "image/x-icon",
    "avif": "image/avif",
    "bmp": "image/bmp",
    "mp3": "audio/mpeg",
    "ogg": "audio/ogg",
    "wav": "audio/wav",
    "mp4": "video/mp4",
    "webm": "video/webm",
    "woff": "font/woff",
    "woff2": "font/woff2",
    "ttf": "font/ttf",
    "otf": "font/otf",
    "eot": "application/vnd.ms-fontobject",
    "pdf": "application/pdf",
    "zip": "application/zip",
    "gz": "application/gzip",
    "tar": "application/x-tar",
}


def guess_type(path: str) -> str:
    """Return the Content-Type for `path` by its extension (case-insensitive)."""
    name = path.rpartition("/")[2]
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        # No extension, or a dotfile such as ".env" whose whole name is the "extension".
        return DEFAULT_TYPE
    return _TYPES.get(ext.lower(), DEFAULT_TYPE)
