"""Static files: a middleware serving a directory tree with sendfile.

Theory of operation, per request:

1. **Mount.** The raw path is split on "/" and each segment decoded (so `%2F` stays inside a
   segment); the request is ours only when its leading segments equal the mount's — `/assets`
   never serves `/assetsX`. Everything else goes to `next()`, whatever the options.
2. **Method.** GET and HEAD are served. Others go on with `fallthrough`; without it they get
   405 (OPTIONS: 204) with `Allow: GET, HEAD` — only under the mount.
3. **Safety.** A segment that is `.`/`..`, holds "/", "\\" or NUL once decoded, or is hidden
   (unless `allow_hidden`) is refused. Components are checked with lstat from the (real) root
   down; if a symlink is met, the real path must still be inside the root. A refusal is a miss.
4. **Directories** redirect (301) to the URL with a trailing slash, then serve the first index
   file, or a listing when enabled; otherwise a miss.
5. **Files**: Content-Type by extension, strong ETag, Last-Modified, Cache-Control,
   Accept-Ranges; preconditions (304/412), If-Range and one byte range (206/416) as in
   `conditional`; a precompressed `name.br`/`name.gz` sibling when the client accepts it
   (with `Vary: Accept-Encoding`); the body goes out with sendfile. What these headers need
   is worked out once per file version (`file_versions`), checked against the fresh lstat.

A miss is `next()` with `fallthrough` (the default), or 404 `Not Found` without it.
`spa()` adds the single-page-app rule: a navigation that nothing else answered gets the index.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from socketify.core.negotiation import add_vary, choose_encoding
from socketify.core.response import TEXT_PLAIN
from socketify.core.routing import split_path
from socketify.middleware.conditional import (
    UNSATISFIABLE,
    if_range_allows,
    parse_range,
    preconditions,
)
from socketify.middleware.file_versions import SUFFIXES, FileVersion, FileVersions
from socketify.middleware.listing import render_listing

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["serve", "spa"]

Next = Callable[[], None]
Middleware = Callable[["Request", "Response", Next], None]
_ALLOW = "GET, HEAD"


class _Options:
    """The resolved settings of one `serve()` middleware."""

    __slots__ = (
        "allow_hidden",
        "auto_index",
        "cache_control",
        "etag",
        "fallthrough",
        "index_names",
        "last_modified",
        "listing",
        "mount",
        "precompressed",
        "real_root",
        "versions",
    )

    def __init__(self, root: str, mount: str, **options: Any) -> None:
        self.real_root = os.path.realpath(root)
        if not os.path.isdir(self.real_root):
            raise ValueError(f"static root is not a directory: {root}")
        self.mount = split_path("/" + mount.strip("/"))
        self.fallthrough: bool = options["fallthrough"]
        self.auto_index: bool = options["auto_index"]
        self.index_names = tuple(options["index_names"])
        self.listing: bool = options["directory_listing"]
        self.allow_hidden: bool = options["allow_hidden"]
        self.etag: bool = options["etag"]
        self.last_modified: bool = options["last_modified"]
        self.precompressed: bool = options["precompressed"]
        max_age: int = options["cache_max_age"]
        self.cache_control = ""
        if max_age > 0:
            self.cache_control = f"public, max-age={int(max_age)}"
            if options["immutable"]:
                self.cache_control += ", immutable"
        self.versions = FileVersions()


def serve(
    root: str | os.PathLike[str],
    mount: str = "/",
    *,
    fallthrough: bool = True,
    auto_index: bool = True,
    index_names: Sequence[str] = ("index.html", "index.htm"),
    directory_listing: bool = False,
    allow_hidden: bool = False,
    etag: bool = True,
    last_modified: bool = True,
    cache_max_age: int = 0,
    immutable: bool = False,
    precompressed: bool = True,
) -> Middleware:
    """Serve the files under `root` at URL prefix `mount` (see the module doc)."""
    opts = _Options(
        os.fspath(root), mount, fallthrough=fallthrough, auto_index=auto_index,
        index_names=index_names, directory_listing=directory_listing,
        allow_hidden=allow_hidden, etag=etag, last_modified=last_modified,
        cache_max_age=cache_max_age, immutable=immutable, precompressed=precompressed,
    )  # fmt: skip

    def static_files_middleware(req: Request, res: Response, next: Next) -> None:
        segments = _below_mount(req, opts.mount)
        if segments is None:
            next()
        elif req.method != "GET" and req.method != "HEAD":
            if fallthrough:
                next()
            else:
                res.set_header("Allow", _ALLOW if req.method != "OPTIONS" else _ALLOW + ", OPTIONS")
                if req.method == "OPTIONS":
                    res.send_status(204)
                else:
                    res.status(405).send("Method Not Allowed\n", TEXT_PLAIN)
        elif not _serve_path(req, res, segments, opts):
            if fallthrough:
                next()
            else:
                res.status(404).send("Not Found\n", TEXT_PLAIN)

    return static_files_middleware


def spa(
    root: str | os.PathLike[str],
    index: str = "index.html",
    mount: str = "/",
    exclude: Iterable[str] = (),
    **options: Any,
) -> Middleware:
    """Static files plus history-API fallback: unanswered page navigations get `index`.

    A navigation is a GET or HEAD that accepts HTML (text/html, or anything: `*/*`, or no
    Accept at all, as curl sends) and whose last path segment has no extension
    (`/app/settings`, not `/app/logo.png`). Routes
    still win: the index is only served when the request would otherwise end in 404.
    `exclude` lists path prefixes (whole segments: `/api` covers `/api/x`, not `/apis`) whose
    404s stay 404s even for a browser's navigation, e.g. an API opened in a tab.
    """
    excluded = [
        split_path(prefix) for prefix in ([exclude] if isinstance(exclude, str) else exclude)
    ]
    options.setdefault("index_names", (index,))
    static = serve(root, mount, fallthrough=True, **options)
    opts = _Options(os.fspath(root), mount, fallthrough=True, auto_index=True,
                    index_names=(index,), directory_listing=False, allow_hidden=False,
                    etag=True, last_modified=True, cache_max_age=0, immutable=False,
                    precompressed=options.get("precompressed", True))  # fmt: skip
    index_path = os.path.join(opts.real_root, index)
    if not os.path.isfile(index_path):
        raise ValueError(f"SPA index not found: {index_path}")

    def spa_middleware(req: Request, res: Response, next: Next) -> None:
        missed = False

        def after_static_miss() -> None:
            nonlocal missed
            missed = True
            next()
            if (
                res.status_code == 404
                and _is_navigation(req, opts.mount)
                and not any(split_path(req.raw_path)[: len(p)] == p for p in excluded)
            ):
                res.reset_for_error()
                # The index names every asset of the build: always revalidate it.
                res.set_header("Cache-Control", "no-cache")
                _serve_file(req, res, index_path, os.stat(index_path), opts, False)

        static(req, res, after_static_miss)
        if not missed and _names_root_index(req, opts.mount, index):
            # The same index reached as `/` or `/index.html` (served by the static files,
            # with their cache_max_age): revalidated too, or a deploy stays stale that long.
            res.set_header("Cache-Control", "no-cache")

    return spa_middleware


def _names_root_index(req: Request, mount: list[str], index: str) -> bool:
    segments = _below_mount(req, mount)
    return segments is not None and (segments == [] or segments == [index])


# -- request path ---------------------------------------------------------------------------


def _accepts_html(accept: str) -> bool:
    """Whether an Accept header lets HTML through: no header, text/html, text/* or */*.

    curl sends `*/*` and a browser navigation `text/html,...`: both get the page. A range
    with q=0 refuses it, as RFC 9110 says.
    """
    if not accept:
        return True
    for item in accept.split(","):
        media, _, parameters = item.partition(";")
        if media.strip().lower() not in ("text/html", "text/*", "*/*"):
            continue
        quality = next(
            (p.split("=", 1)[1] for p in parameters.split(";") if p.strip().startswith("q=")),
            "1",
        )
        try:
            if float(quality) > 0:
                return True
        except ValueError:
            continue
    return False


def _below_mount(req: Request, mount: list[str]) -> list[str] | None:
    """The decoded segments after the mount, or None when the path is outside it."""
    segments = split_path(req.raw_path)
    count = len(mount)
    if count and segments[:count] != mount:
        return None
    return segments[count:] if count else segments


def _safe(segments: list[str], allow_hidden: bool) -> bool:
    for segment in segments:
        if segment in (".", "..") or "/" in segment or "\\" in segment or "\x00" in segment:
            return False
        if segment[0] == "." and not allow_hidden:
            return False
    return True


def _locate(real_root: str, segments: list[str]) -> tuple[str, os.stat_result] | None:
    """(path, stat) of the target inside the root, or None if missing or escaping it."""
    path = real_root
    info: os.stat_result | None = None
    try:
        for segment in segments:
            path = f"{path}/{segment}"
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                # Rare: settle it with the real path, which must stay inside the root.
                real = os.path.realpath(os.path.join(real_root, *segments))
                if real != real_root and not real.startswith(real_root + os.sep):
                    return None
                return real, os.stat(real)
        return path, info if info is not None else os.stat(real_root)
    except (OSError, ValueError):
        return None


def _serve_path(req: Request, res: Response, segments: list[str], opts: _Options) -> bool:
    if not _safe(segments, opts.allow_hidden):
        return False
    found = _locate(opts.real_root, segments)
    if found is None:
        return False
    path, info = found
    if stat.S_ISREG(info.st_mode):
        if req.raw_path.endswith("/"):
            return False  # "/file.txt/" names a directory that does not exist
        return _serve_file(req, res, path, info, opts, opts.precompressed)
    if stat.S_ISDIR(info.st_mode):
        return _serve_directory(req, res, path, segments, opts)
    return False  # sockets, FIFOs, devices


def _serve_directory(
    req: Request, res: Response, directory: str, segments: list[str], opts: _Options
) -> bool:
    index: tuple[str, os.stat_result] | None = None
    if opts.auto_index:
        for name in opts.index_names:
            candidate = os.path.join(directory, name)
            try:
                index_info = os.stat(candidate)
            except OSError:
                continue
            if stat.S_ISREG(index_info.st_mode):
                index = candidate, index_info
                break
    if index is None and not opts.listing:
        return False
    if not req.raw_path.endswith("/"):
        # Relative links in the page only resolve from the slash URL. Built from the
        # segments so that "//evil.example/" can never become a protocol-relative Location.
        raw_segments = [s for s in req.raw_path.split("/") if s]
        query = f"?{req.query_string}" if req.query_string else ""
        res.redirect("/" + "/".join(raw_segments) + "/" + query, 301)
        return True
    if index is not None:
        return _serve_file(req, res, index[0], index[1], opts, opts.precompressed)
    page = render_listing(
        directory, req.path, opts.real_root,
        allow_hidden=opts.allow_hidden, at_mount_root=len(segments) == 0,
    )  # fmt: skip
    if opts.cache_control:
        res.set_header("Cache-Control", opts.cache_control)
    res.set_header("Content-Type", "text/html; charset=utf-8")
    res.send(page)
    return True


def _serve_file(
    req: Request,
    res: Response,
    path: str,
    info: os.stat_result,
    opts: _Options,
    precompressed: bool,
) -> bool:
    versions = opts.versions
    version = versions.get(path, info)
    content_type = version.content_type  # the uncompressed file's type, also for a .gz/.br sibling
    if precompressed:
        codings = versions.siblings(version)
        if codings:
            version = _precompressed(req, res, version, codings, versions)
    size = version.size
    etag = version.etag if opts.etag else None
    if etag is not None:
        res.set_header("ETag", etag)
    if opts.last_modified:
        res.set_header("Last-Modified", version.last_modified)
    if opts.cache_control:
        res.set_header("Cache-Control", opts.cache_control)
    validator_mtime = version.mtime if opts.last_modified else None
    headers = req.headers
    decided = preconditions(req.method, headers, etag, validator_mtime)
    if decided is not None:
        res.status(decided)
        if decided == 304:
            return res.send(b"")
        return res.send("Precondition Failed\n", TEXT_PLAIN)
    res.set_header("Content-Type", content_type)
    res.set_header("Accept-Ranges", "bytes")
    range_header = headers.get("range")
    if range_header and if_range_allows(headers, etag, validator_mtime):
        wanted = parse_range(range_header, size)
        if wanted is UNSATISFIABLE:
            res.remove_header("Content-Encoding")
            res.set_header("Content-Range", f"bytes */{size}")
            return res.status(416).send(b"")
        if isinstance(wanted, tuple):
            first, last = wanted
            res.status(206).set_header("Content-Range", f"bytes {first}-{last}/{size}")
            return res.send_file(version.path, offset=first, length=last - first + 1)
    return res.send_file(version.path, length=size)


def _precompressed(
    req: Request,
    res: Response,
    version: FileVersion,
    codings: tuple[str, ...],
    versions: FileVersions,
) -> FileVersion:
    """The `.br`/`.gz` sibling the client accepts, with Content-Encoding set; else `version`."""
    # The answer depends on Accept-Encoding whenever a sibling exists, even when this
    # client sent none: a shared cache must not give the plain file to one that accepts gzip.
    add_vary(res, "Accept-Encoding")
    chosen = choose_encoding(req.headers.get("accept-encoding") or "", codings)
    if chosen is None:
        return version
    sibling_path = version.path + SUFFIXES[chosen]
    try:
        info = os.stat(sibling_path)  # always fresh: the served length must be exact
    except (OSError, ValueError):
        versions.forget_siblings(version)
        return version
    if not stat.S_ISREG(info.st_mode):
        versions.forget_siblings(version)
        return version
    res.set_header("Content-Encoding", chosen)
    return versions.get(sibling_path, info)


def _is_navigation(req: Request, mount: list[str]) -> bool:
    if req.method not in ("GET", "HEAD") or not _accepts_html(req.header("accept")):
        return False
    segments = _below_mount(req, mount)
    if segments is None:
        return False
    return not segments or "." not in segments[-1]
