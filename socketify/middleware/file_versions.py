"""What the static-files middleware knows about one version of a file, kept per path.

Theory of operation. Answering for a file needs its Content-Type, strong ETag, Last-Modified
text and which precompressed siblings (`.br`, `.gz`) exist. None of that changes while the
file does not, so it is worked out once per version and kept per path (bounded; one cache per
middleware in each worker process). A version is what `lstat` reports — device, inode, size
and mtime in nanoseconds — and the middleware calls `lstat` on every request anyway for path
safety: a cached entry is used only when that fresh identity equals the one it was built
from, so an edited, replaced or truncated file is never described by stale headers.

Only the *existence* of siblings is remembered, for at most `SIBLINGS_TTL` seconds: a `.gz`
written next to a file is offered at most a second later, and one that is removed is noticed
when it is served, because the sibling chosen for an answer is always stat-ed afresh.
"""

from __future__ import annotations

import os
import stat
import time

from socketify.core.mime import guess_type
from socketify.middleware.conditional import etag_for, last_modified_text

__all__ = ["SIBLINGS", "SIBLINGS_TTL", "SUFFIXES", "FileVersion", "FileVersions"]

# (content coding, file suffix), in the server's order of preference: br is smaller.
SIBLINGS = (("br", ".br"), ("gzip", ".gz"))
SUFFIXES = dict(SIBLINGS)
SIBLINGS_TTL = 1.0
_DEFAULT_LIMIT = 1024


class FileVersion:
    """The response facts of one file version (see the module doc)."""

    __slots__ = (
        "content_type",
        "etag",
        "identity",
        "last_modified",
        "mtime",
        "path",
        "siblings",
        "siblings_checked",
        "size",
    )

    def __init__(self, path: str, info: os.stat_result, identity: tuple[int, ...]) -> None:
        self.path = path
        self.identity = identity
        self.size = info.st_size
        self.mtime = int(info.st_mtime)
        self.content_type = guess_type(path)
        self.etag = etag_for(info.st_size, info.st_mtime_ns)
        self.last_modified = last_modified_text(self.mtime)
        self.siblings: tuple[str, ...] = ()  # content codings with a regular sibling file
        self.siblings_checked = -SIBLINGS_TTL  # monotonic time of the last look; never yet


class FileVersions:
    """path -> FileVersion, valid while the file's identity is unchanged; bounded in size."""

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = _DEFAULT_LIMIT) -> None:
        self._entries: dict[str, FileVersion] = {}
        self._limit = limit

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, path: str, info: os.stat_result) -> FileVersion:
        """The facts for `path` as `info` (a fresh stat of it) describes it."""
        identity = (info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns)
        entry = self._entries.get(path)
        if entry is None or entry.identity != identity:
            entries = self._entries
            if entry is None and len(entries) >= self._limit:
                del entries[next(iter(entries))]  # the oldest insertion: cheap and good enough
            entry = entries[path] = FileVersion(path, info, identity)
        return entry

    def siblings(self, entry: FileVersion) -> tuple[str, ...]:
        """The content codings that have a precompressed sibling of `entry` (cached ~1 s)."""
        now = time.monotonic()
        if now - entry.siblings_checked >= SIBLINGS_TTL:
            found = []
            for coding, suffix in SIBLINGS:
                try:
                    info = os.stat(entry.path + suffix)
                except (OSError, ValueError):
                    continue
                if stat.S_ISREG(info.st_mode):
                    found.append(coding)
            entry.siblings = tuple(found)
            entry.siblings_checked = now
        return entry.siblings

    def forget_siblings(self, entry: FileVersion) -> None:
        """Look for siblings again on the next request (one was found missing)."""
        entry.siblings_checked = -SIBLINGS_TTL
