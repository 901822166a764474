"""`wsgi.file_wrapper`: a file the app returns as its body, which the server may sendfile.

An app (Flask's `send_file`, Django's `FileResponse`) returns `FileWrapper(file, block_size)`
instead of iterating the file itself. When the file is a regular file that still has a path
on disk, the answer becomes a file range sent with sendfile from where the file is positioned;
anything else (a pipe, a BytesIO) is read block by block like any iterable.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import Any

__all__ = ["FileWrapper", "file_range"]


class FileWrapper:
    """Iterates `filelike` in `block_size` pieces; `close()` closes it."""

    __slots__ = ("block_size", "filelike")

    def __init__(self, filelike: Any, block_size: int = 8192) -> None:
        self.filelike = filelike
        self.block_size = block_size if block_size > 0 else 8192

    def __iter__(self) -> Iterator[bytes]:
        read = self.filelike.read
        while data := read(self.block_size):
            yield data

    def close(self) -> None:
        """Close the file (PEP 3333: the wrapper's close is the file's)."""
        close = getattr(self.filelike, "close", None)
        if close is not None:
            close()


def file_range(wrapper: FileWrapper) -> tuple[str, int, int] | None:
    """(path, offset, bytes left) for a wrapped regular file still at its path; else None.

    The path must still name the very file that is open (same device and inode), so a file
    replaced on disk since it was opened is streamed from the open file instead.
    """
    filelike = wrapper.filelike
    path = getattr(filelike, "name", None)
    if not isinstance(path, str) or not hasattr(filelike, "fileno"):
        return None
    try:
        opened = os.fstat(filelike.fileno())
        on_disk = os.stat(path)
        offset = filelike.tell()
    except (OSError, ValueError, AttributeError):
        return None
    if not stat.S_ISREG(opened.st_mode):
        return None
    if (opened.st_dev, opened.st_ino) != (on_disk.st_dev, on_disk.st_ino):
        return None
    return path, offset, max(opened.st_size - offset, 0)
