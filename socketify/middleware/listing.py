"""The HTML page of a directory listing for the static-files middleware.

Entries are sorted (directories first, then by name without case), names are
HTML-escaped and their links percent-encoded, there is a parent link below the mount root, and
what the middleware would refuse to serve — hidden names, symlinks leading out of the root,
sockets and devices — is not listed either.
"""

from __future__ import annotations

import html
import os
import stat
from urllib.parse import quote

__all__ = ["render_listing"]


def _visible(entry: os.DirEntry[str], real_root: str, allow_hidden: bool) -> str | None:
    """The entry as listed ("name/" for a directory), or None for what is not served."""
    name = entry.name
    if name.startswith(".") and not allow_hidden:
        return None
    try:
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if target != real_root and not target.startswith(real_root + os.sep):
                return None
        mode = entry.stat().st_mode  # follows a symlink that stays inside the root
    except OSError:
        return None  # a dangling link, or vanished while we looked
    if stat.S_ISDIR(mode):
        return name + "/"
    if stat.S_ISREG(mode):
        return name
    return None


def render_listing(
    directory: str, url_path: str, real_root: str, *, allow_hidden: bool, at_mount_root: bool
) -> str:
    """The listing page of `directory`, shown at `url_path` (decoded, ending with "/")."""
    names: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            shown = _visible(entry, real_root, allow_hidden)
            if shown is not None:
                names.append(shown)
    names.sort(key=lambda name: (not name.endswith("/"), name.casefold(), name))
    title = html.escape(url_path)
    rows = [] if at_mount_root else ['<li><a href="../">../</a></li>']
    rows += [
        f'<li><a href="{html.escape(quote(name), quote=True)}">{html.escape(name)}</a></li>'
        for name in names
    ]
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n"
        f"<ul>\n{chr(10).join(rows)}\n</ul>\n</body></html>\n"
    )
