"""Static files: a middleware that serves a directory tree with `sendfile`.

Only paths under `mount` (at a segment boundary) are considered. Each decoded path segment is
checked — no `..`, no NUL, no hidden names unless allowed — and the resolved real path must
stay under the real root, so neither encoded dot-segments nor symlinks escape it.
"""

from __future__ import annotations

import html
import os
import stat
from collections.abc import Callable, Sequence
from urllib.parse import quote

from socketify.request import Request
from socketify.response import Response

__all__ = ["serve"]

Next = Callable[[], None]


def serve(
    root: str,
    mount: str = "/",
    *,
    fallthrough: bool = True,
    auto_index: bool = True,
    index_names: Sequence[str] = ("index.html", "index.htm"),
    directory_listing: bool = False,
    allow_hidden: bool = False,
) -> Callable[[Request, Response, Next], None]:
    """Serve files under `root` at URL prefix `mount`; misses go on to `next()` or 404."""
    real_root = os.path.realpath(root)
    if not os.path.isdir(real_root):
        raise ValueError(f"static root is not a directory: {root}")
    prefix = "/" + mount.strip("/")
    prefix = "" if prefix == "/" else prefix

    def static_middleware(req: Request, res: Response, next: Next) -> None:
        path = req.path
        if prefix and path != prefix and not path.startswith(prefix + "/"):
            next()
            return
        if req.method not in ("GET", "HEAD"):
            if fallthrough:
                next()
            else:
                res.status(405).set_header("Allow", "GET, HEAD").send("Method Not Allowed\n")
            return
        relative = path[len(prefix) :]
        target = _resolve(real_root, relative, allow_hidden)
        if target is not None:
            try:
                info = os.stat(target)
            except OSError:
                info = None
            if info is not None and stat.S_ISDIR(info.st_mode):
                if _serve_directory(
                    req,
                    res,
                    target,
                    relative,
                    auto_index,
                    index_names,
                    directory_listing,
                    allow_hidden,
                ):
                    return
            elif info is not None and stat.S_ISREG(info.st_mode) and res.send_file(target):
                return
        if fallthrough:
            next()
        else:
            res.status(404).send("Not Found\n")

    return static_middleware


def _resolve(real_root: str, relative: str, allow_hidden: bool) -> str | None:
    """The real path for a decoded URL path under root, or None if it must not be served."""
    parts = [part for part in relative.split("/") if part]
    for part in parts:
        if part in (".", "..") or "\x00" in part or "\\" in part:
            return None
        if part.startswith(".") and not allow_hidden:
            return None
    candidate = os.path.realpath(os.path.join(real_root, *parts))
    if candidate != real_root and not candidate.startswith(real_root + os.sep):
        return None  # a symlink pointing out of the root
    return candidate


def _serve_directory(
    req: Request,
    res: Response,
    directory: str,
    relative: str,
    auto_index: bool,
    index_names: Sequence[str],
    listing: bool,
    allow_hidden: bool,
) -> bool:
    if not req.path.endswith("/"):
        # Relative links in an index page only work from a URL with the trailing slash.
        query = f"?{req.head.query_string}" if req.head.query_string else ""
        res.redirect(quote(req.path + "/") + query, 301)
        return True
    if auto_index:
        for name in index_names:
            index = os.path.join(directory, name)
            if os.path.isfile(index) and res.send_file(index):
                return True
    if not listing:
        return False
    entries = []
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.name.startswith(".") and not allow_hidden:
                continue  # not served, so not listed
            suffix = "/" if entry.is_dir() else ""
            entries.append(entry.name + suffix)
    entries.sort(key=lambda name: (not name.endswith("/"), name.lower()))
    title = html.escape(req.path)
    rows = [] if relative.strip("/") == "" else ['<li><a href="../">../</a></li>']
    rows += [f'<li><a href="{quote(name)}">{html.escape(name)}</a></li>' for name in entries]
    res.html(
        f'<!doctype html><html><head><meta charset="utf-8"><title>Index of {title}</title>'
        f"</head><body><h1>Index of {title}</h1><ul>{''.join(rows)}</ul></body></html>\n"
    )
    return True
