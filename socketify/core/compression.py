"""Response compression, run by the server after the middleware chain.

Theory of operation. `Server(compression=True | False | CompressionOptions(...))` resolves to a
`Compressor` once; `Server.handle` calls it for every response. It returns at once when the
request has no Accept-Encoding (the cost of /ping stays a header lookup). Otherwise it picks
gzip or deflate by q-value (`gzip;q=0` is a refusal) and compresses:

- a buffered body of at least `min_size` bytes, kept only if it got smaller;
- a streamed body chunk by chunk with a sync flush after each, so every chunk still reaches
  the client when it is produced (server-sent data keeps flowing).

Never: a body the handler encoded itself (Content-Encoding set), `Cache-Control: no-transform`,
partial content (206 / Content-Range), upgrades (101, SSE, Pulse), `text/event-stream`, files
(sendfile stays zero-copy; static files have precompressed siblings instead), types outside
`types` or inside the never-compress list. Whenever the client could have been answered
differently — a compressible type, Accept-Encoding present — `Vary: Accept-Encoding` is added,
and a strong ETag becomes weak once the bytes change (the representation differs).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from socketify.core.negotiation import add_vary, choose_encoding

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["DEFAULT_TYPES", "CompressionOptions", "Compressor", "resolve"]

DEFAULT_TYPES: tuple[str, ...] = (
    "text/",
    "application/json",
    "application/javascript",
    "application/xml",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/ld+json",
    "application/manifest+json",
    "image/svg+xml",
)
# Already compressed (or pointless to compress) whatever `types` says.
_NEVER = ("image/", "video/", "audio/", "application/zip", "application/gzip", "application/x-gzip")
_NEVER_EXCEPT = ("image/svg+xml",)
_WBITS = {"gzip": 31, "deflate": 15}  # gzip = RFC 1952; "deflate" = zlib-wrapped RFC 1950


@dataclass(frozen=True, slots=True)
class CompressionOptions:
    """What to compress and how; `Server(compression=CompressionOptions(...))`."""

    min_size: int = 256  # buffered bodies smaller than this are sent as they are
    types: tuple[str, ...] = DEFAULT_TYPES  # Content-Type prefixes; () allows every type
    gzip: bool = True
    deflate: bool = True
    level: int = 6  # zlib level 1 (fast) .. 9 (small)
    streams: bool = True  # also compress streamed (chunked) responses

    def __post_init__(self) -> None:
        if not 0 <= self.level <= 9:
            raise ValueError(f"compression level must be 0..9, got {self.level!r}")
        if self.min_size < 0:
            raise ValueError("min_size must be >= 0")


def resolve(setting: Any) -> Compressor | None:
    """Turn the `compression` server option into a Compressor, or None when it is off."""
    if setting is None or setting is False:
        return None
    if setting is True:
        return Compressor(CompressionOptions())
    if isinstance(setting, CompressionOptions):
        return Compressor(setting) if setting.gzip or setting.deflate else None
    raise TypeError("compression must be True, False or a CompressionOptions")


class Compressor:
    """Compresses one finished response in place; built once per server."""

    __slots__ = ("_offered", "_options", "_types")

    def __init__(self, options: CompressionOptions) -> None:
        self._options = options
        self._types = tuple(t.lower() for t in options.types)
        offered = []
        if options.gzip:
            offered.append("gzip")
        if options.deflate:
            offered.append("deflate")
        self._offered = tuple(offered)

    def __call__(self, req: Request, res: Response) -> None:
        accept = req.header("accept-encoding")
        if not accept:
            return  # PERF: the common benchmark case; nothing to negotiate
        kind = res.kind
        if kind == "file" or kind == "upgrade":
            return
        if kind == "stream":
            if not self._options.streams or res.stream_length is not None:
                return  # a declared length would no longer hold once compressed
        else:
            body = res.body
            if len(body) < self._options.min_size or not body:
                # Never compressed at this size, so it does not vary with Accept-Encoding
                # either (no Vary, as nginx); PERF: checked before any header lookup.
                return
        status = res.status_code
        if status < 200 or status in (204, 206, 304):
            return
        if not self._compressible(res.content_type):
            return
        if res.get_header("content-encoding") or res.get_header("content-range"):
            return
        if "no-transform" in (res.get_header("cache-control") or "").lower():
            return
        add_vary(res, "Accept-Encoding")
        coding = choose_encoding(accept, self._offered)
        if coding is None:
            return
        if kind == "stream":
            source = res.stream_iter
            assert source is not None
            res.stream_iter = _compressed_stream(source, coding, self._options.level)
        else:
            packed = zlib.compress(body, self._options.level, wbits=_WBITS[coding])
            if len(packed) >= len(body):
                return
            res.replace_body(packed)
        res.set_header("Content-Encoding", coding)
        etag = res.get_header("etag")
        if etag and not etag.startswith("W/"):
            res.set_header("ETag", "W/" + etag)

    def _compressible(self, content_type: str | None) -> bool:
        if not content_type:
            return True  # an untyped body may be compressed
        media = content_type.split(";", 1)[0].strip().lower()
        if media == "text/event-stream":
            return False
        if media.startswith(_NEVER) and not media.startswith(_NEVER_EXCEPT):
            return False
        return not self._types or media.startswith(self._types)


def _compressed_stream(chunks: Iterable[bytes | str], coding: str, level: int) -> Iterator[bytes]:
    encoder = zlib.compressobj(level, zlib.DEFLATED, _WBITS[coding])
    for chunk in chunks:
        if not chunk:
            continue
        raw = chunk.encode() if isinstance(chunk, str) else chunk
        # A sync flush per chunk: the client can decode everything produced so far.
        data = encoder.compress(raw) + encoder.flush(zlib.Z_SYNC_FLUSH)
        if data:
            yield data
    tail = encoder.flush()
    if tail:
        yield tail
