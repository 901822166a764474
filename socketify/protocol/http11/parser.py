"""HTTP/1.1 request parsing, sans-IO.

Theory of operation: a `RequestParser` owns one connection's input buffer. The connection
feeds it whatever `recv` returned and pulls events until `NEED_DATA`. A request is one
`RequestHead`, zero or more `bytes` body pieces, then `END_OF_MESSAGE`; after that the parser
carries on with the next pipelined request already in its buffer. Anything we refuse raises
`ParseError(status, detail)`; the parser is then dead and the connection answers the status
and closes, because after a framing error we no longer know where the next request starts.

We are deliberately stricter than RFC 9112 allows where leniency has been a smuggling or
splitting vector: obs-fold, whitespace before the colon, bare CR, control characters,
Content-Length with Transfer-Encoding, differing Content-Lengths, and transfer codings other
than a lone `chunked` are all refused; a bare CR is refused as soon as the byte after it shows
it is bare, without waiting for the head to end. Line ends are CRLF: a bare LF is refused the
same way, because a proxy in front that splits lines only on CRLF sees other headers (or
another body) than we would. `allow_bare_lf=True` accepts bare LF line ends in the head for
old clients on a trusted path; chunked framing never accepts them (see `chunked`). Methods
are any token (case-sensitive): routing, not the parser, decides which ones are served. The
Host header must be a valid authority (see `target`). An absolute-form target is routed by
its path, and its authority replaces the Host header.
"""

from __future__ import annotations

import re
from typing import Final

from socketify.protocol.http11.chunked import ChunkedDecoder
from socketify.protocol.http11.events import (
    CLOSED,
    END_OF_MESSAGE,
    NEED_DATA,
    ParseError,
    RequestHead,
    Sentinel,
)
from socketify.protocol.http11.grammar import FIELD_VALUE, TOKEN
from socketify.protocol.http11.target import is_authority, split_target, with_host

__all__ = ["RequestParser"]

VERSIONS: Final = frozenset({"HTTP/1.1", "HTTP/1.0"})

_TARGET: Final = re.compile(r"[\x21-\x7e]+")
# Header lines joined by CRLF. Values may hold HTAB, visible ASCII and obs-text only, so a
# bare CR or LF, NUL or other control character fails the match (and takes the slow path).
_HEADER_BLOCK: Final = re.compile(
    r"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]++:[^\x00-\x08\x0a-\x1f\x7f]*+\r\n)*+"
    r"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]++:[^\x00-\x08\x0a-\x1f\x7f]*+)?"
)
_FRAMING_FIELD: Final = re.compile(
    r"\n(content-length|transfer-encoding|connection|expect):([^\r]*)"
)
_CR_LF: Final = (13, 10)
_BARE_CR: Final = re.compile(rb"\r[^\n]")
# PERF: a few hot request lines ("GET /api/x HTTP/1.1") make up most traffic; remembering
# their validated split skips the request-line checks. Only lines that passed go in, and the
# cache is simply emptied when full, so a client sending unique targets costs one clear.
# method, target, path, query, version, and the authority of an absolute-form target ("")
_Line = tuple[str, str, str, str, str, str]
_LINE_CACHE: Final[dict[str, _Line]] = {}
_LINE_CACHE_SIZE: Final = 512
# Likewise the framing read from a header block: keep-alive clients repeat their headers
# byte for byte. Keyed per version (keep-alive defaults and Host rules differ); only blocks
# that passed validation, and only small ones, so the cache stays a few hundred KiB at most.
_Framing = tuple[int | None, bool, bool, bool]  # content_length, chunked, keep_alive, expect
_FRAMING_CACHE: Final[dict[str, dict[str, _Framing]]] = {"HTTP/1.1": {}, "HTTP/1.0": {}}
_FRAMING_CACHE_SIZE: Final = 256
_FRAMING_CACHE_MAX_BLOCK: Final = 1024
# And whole heads: a keep-alive client (a health check, a poller, a pipelining benchmark)
# repeats its head byte for byte, and then one lookup replaces every check above and hands
# back the same (never mutated) RequestHead. One table per (target, body) limit pair, since
# a head valid under one parser's limits may be refused by another's.
_HEAD_CACHES: Final[dict[tuple[int, int], dict[bytes, tuple[bytes, RequestHead]]]] = {}
_HEAD_CACHE_SIZE: Final = 256
_HEAD_CACHE_MAX: Final = 1024
_HUGE: Final = 10**20  # a Content-Length too long to be anything but over the limit


# Parser states. PERF: `Final` int constants, not an Enum or class attributes: the state is
# compared several times per request; a compiled build inlines them as literals.
_HEAD: Final = 0
_BODY: Final = 1
_CHUNKED: Final = 2
_END: Final = 3
_ERROR: Final = 4


class RequestParser:
    """Turns the bytes of one connection into request events."""

    __slots__ = (
        "_body_seen",
        "_buf",
        "_chunked",
        "_eof",
        "_error",
        "_heads",
        "_last_head",
        "_last_wire",
        "_remaining",
        "_scan_from",
        "_skipped",
        "_state",
        "allow_bare_lf",
        "max_body_size",
        "max_header_size",
        "max_target_size",
        "trailers",
    )

    def __init__(
        self,
        max_header_size: int = 16384,
        max_target_size: int = 8192,
        max_body_size: int = 16 * 1024 * 1024,
        *,
        allow_bare_lf: bool = False,
    ) -> None:
        self.max_header_size = max_header_size
        self.allow_bare_lf = allow_bare_lf
        self.max_target_size = max_target_size
        self.max_body_size = max_body_size
        self._buf = bytearray()
        self._eof = False
        self._state = _HEAD
        self._scan_from = 0  # where the search for the end of the head resumes
        self._skipped = 0  # blank lines before the request line; they count toward the limit
        self._remaining = 0
        self._chunked: ChunkedDecoder | None = None
        self._error: ParseError | None = None
        self._heads = _HEAD_CACHES.setdefault((max_target_size, max_body_size), {})
        # The last cached head this parser met, and its bytes with the blank line that ends it.
        self._last_wire = b""
        self._last_head: RequestHead | None = None
        # The trailer fields of the chunked body whose END_OF_MESSAGE was the last event.
        self.trailers: tuple[tuple[str, str], ...] = ()

    @property
    def input(self) -> bytearray:
        """The unconsumed input buffer (the chunked decoder reads from it)."""
        return self._buf

    @property
    def eof(self) -> bool:
        """Whether the peer said it will send nothing more."""
        return self._eof

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into events."""
        return len(self._buf)

    @property
    def at_request_start(self) -> bool:
        """True between requests: nothing of the next request has been consumed yet."""
        return self._state == _HEAD and self._skipped == 0

    def feed(self, data: bytes) -> None:
        """Append received bytes; `b""` means the peer will send nothing more."""
        if data:
            self._buf += data
        else:
            self._eof = True

    def next_event(self) -> RequestHead | bytes | Sentinel:
        """Return the next event, or raise ParseError for input we refuse."""
        state = self._state
        if state == _HEAD:
            buf = self._buf
            if not self._scan_from:
                # PERF: the usual head, inline: it ends in CRLF CRLF and was seen before. A
                # cached head holds no blank line and does not end in LF, so a hit proves
                # the head ends here (and that it starts here: it holds no blank line).
                wire = self._last_wire
                head = None
                if buf == wire:
                    # The same head again, alone in the buffer (a keep-alive client's next
                    # request): no search, no copy, no hash.
                    head = self._last_head
                else:
                    end = buf.find(b"\r\n\r\n")
                    if end > 0:
                        if end + 4 == len(wire) and buf.startswith(wire):
                            head = self._last_head  # the same head, pipelined bytes after it
                        else:
                            # The table's own bytes, not a copy: idle keep-alive connections
                            # then share them instead of holding a head each.
                            known = self._heads.get(bytes(buf[:end]))
                            if known is not None:
                                wire, head = known
                                self._last_wire, self._last_head = known
                if head is not None and len(wire) - 4 + self._skipped <= self.max_header_size:
                    del buf[: len(wire)]
                    self._skipped = 0
                    if head.chunked or head.content_length:
                        self._begin_body(head)
                    else:
                        self._state = _END
                    return head
            return self._next_head()
        if state == _BODY:
            return self._next_body_piece()
        if state == _END:
            self._state = _HEAD
            return END_OF_MESSAGE
        if state == _ERROR:
            assert self._error is not None
            raise self._error
        assert self._chunked is not None
        try:
            event = self._chunked.next_event()
        except ParseError as exc:
            self._state = _ERROR
            self._error = exc
            raise
        if event is END_OF_MESSAGE:
            self._state = _HEAD
            self.trailers = tuple(self._chunked.trailers)
            self._chunked = None
        return event

    def _fail(self, status: int, detail: str) -> ParseError:
        self._state = _ERROR
        self._error = ParseError(status, detail)
        return self._error

    # -- head ---------------------------------------------------------------------------------

    def _next_head(self) -> RequestHead | Sentinel:
        buf = self._buf
        if not buf:
            if self._eof:
                # Only blank lines (a stray CRLF after a body) before the close: no request.
                return CLOSED
            return NEED_DATA
        if buf[0] in _CR_LF:
            self._skip_blank_lines()
            if not buf:  # only blank lines so far
                return CLOSED if self._eof else NEED_DATA
            if buf[0] == 13:  # a lone CR pending
                return self._incomplete_head() if self._eof else NEED_DATA
        found = self._find_head_end()
        if found is None:
            return self._incomplete_head()
        head_end, body_start = found
        if head_end + self._skipped > self.max_header_size:
            raise self._fail(431, "Header section too large")
        raw = bytes(buf[:head_end])
        del buf[:body_start]
        self._scan_from = 0
        self._skipped = 0
        head = self._parse_head(raw)
        # Only CRLF heads are remembered: the table is shared with parsers that refuse bare LF.
        if len(raw) <= _HEAD_CACHE_MAX and (
            not self.allow_bare_lf or raw.count(b"\n") == raw.count(b"\r\n")
        ):
            heads = self._heads
            if len(heads) >= _HEAD_CACHE_SIZE:
                heads.clear()
            known = heads[raw] = (raw + b"\r\n\r\n", head)
            self._last_wire, self._last_head = known
        if head.chunked or head.content_length:
            self._begin_body(head)
        else:
            self._state = _END
        return head

    def _begin_body(self, head: RequestHead) -> None:
        self.trailers = ()
        if head.chunked:
            self._state = _CHUNKED
            self._chunked = ChunkedDecoder(self)
        else:
            self._state = _BODY
            self._remaining = head.content_length or 0

    def _skip_blank_lines(self) -> None:
        # Blank lines before a request line are tolerated (RFC 9112 §2.2), e.g. a stray CRLF
        # after a pipelined body, but they count toward the header limit.
        buf = self._buf
        while buf and buf[0] in _CR_LF:
            if buf[0] == 13:
                if len(buf) == 1:
                    return  # wait for what follows the CR
                if buf[1] != 10:
                    raise self._fail(400, "Bare CR in request")
                cut = 2
            elif self.allow_bare_lf:
                cut = 1
            else:
                raise self._fail(400, "Bare LF in request head")
            del buf[:cut]
            self._skipped += cut
            if self._skipped > self.max_header_size:
                raise self._fail(431, "Header section too large")

    def _find_head_end(self) -> tuple[int, int] | None:
        """Locate the empty line ending the head: (end of last header line, body start)."""
        buf = self._buf
        start = self._scan_from
        if self.allow_bare_lf:
            crlf = buf.find(b"\n\r\n", start)
            lf = buf.find(b"\n\n", start, crlf + 1 if crlf >= 0 else len(buf))
            end, body_start = (lf, lf + 2) if lf >= 0 else (crlf, crlf + 3)
            if end >= 0:
                # The last header line's own CR is not part of its text.
                return (end - 1 if end and buf[end - 1] == 13 else end), body_start
        else:
            end = buf.find(b"\r\n\r\n", max(0, start - 1))
            if end >= 0:
                return end, end + 4  # a bare LF inside is refused by `_parse_head`
            # A bare LF is refused as soon as it arrives, like a bare CR below: waiting for
            # the head to end would let a client hold the connection with a head we refuse.
            # PERF: two counts in C; a look-behind regex would try every position.
            if buf.count(b"\n", start) != buf.count(b"\r\n", max(0, start - 1)):
                raise self._fail(400, "Bare LF in request head")
        # A CR followed by anything but LF can never become part of a valid head: refuse it
        # now rather than when the head ends, which a client need never let happen.
        if _BARE_CR.search(buf, start) is not None:
            raise self._fail(400, "Bare CR in request head")
        # Resume the next search just before the tail, so a byte-at-a-time sender costs O(n).
        self._scan_from = max(0, len(buf) - 2)
        return None

    def _incomplete_head(self) -> Sentinel:
        buf = self._buf
        if len(buf) + self._skipped > self.max_header_size:
            raise self._fail(431, "Header section too large")
        if b"\n" not in buf:
            method = bytes(buf[:32]).partition(b" ")[0]
            if len(buf) - len(method) - 1 > self.max_target_size + len(" HTTP/1.1\r"):
                raise self._fail(414, "Request target too long")
        if self._eof:
            if not buf and not self._skipped:
                return CLOSED
            raise self._fail(400, "Connection closed in the middle of the request head")
        return NEED_DATA

    def _parse_head(self, raw: bytes) -> RequestHead:
        # PERF: a clean head (CRLF line ends, no control characters) is checked by a cached
        # request-line lookup and one regex over the header lines, and only the framing
        # headers are picked out before the block is split into fields.
        text = raw.decode("latin-1")
        line, _, block = text.partition("\r\n")
        parsed = _LINE_CACHE.get(line)
        if parsed is None or len(parsed[1]) > self.max_target_size:
            if "\n" in line or "\r" in line:
                return self._parse_unusual_head(text)
            parsed = self._parse_request_line(line)
            if len(_LINE_CACHE) >= _LINE_CACHE_SIZE:
                _LINE_CACHE.clear()
            _LINE_CACHE[line] = parsed
        framing = _FRAMING_CACHE[parsed[4]].get(block)
        if framing is None:
            if _HEADER_BLOCK.fullmatch(block) is None:
                return self._parse_unusual_head(text)
            framing = self._framing(parsed[4], block)
            if len(block) <= _FRAMING_CACHE_MAX_BLOCK:
                cache = _FRAMING_CACHE[parsed[4]]
                if len(cache) >= _FRAMING_CACHE_SIZE:
                    cache.clear()
                cache[block] = framing
        return self._head(parsed, block, framing)

    def _parse_unusual_head(self, text: str) -> RequestHead:
        """The slow path: bare LF line ends (when allowed) are normalised, anything else is
        diagnosed."""
        crlf = text.count("\r\n")
        if text.count("\r") != crlf:
            raise self._fail(400, "Bare CR in request head")
        if not self.allow_bare_lf and text.count("\n") != crlf:
            raise self._fail(400, "Bare LF in request head")
        line, _, block = text.replace("\r\n", "\n").replace("\n", "\r\n").partition("\r\n")
        parsed = self._parse_request_line(line)
        if _HEADER_BLOCK.fullmatch(block) is None:
            self._diagnose(block)
        return self._head(parsed, block, self._framing(parsed[4], block))

    def _head(self, parsed: _Line, block: str, framing: _Framing) -> RequestHead:
        content_length, chunked, keep_alive, expect_continue = framing
        # Checked here, not in `_framing`, because cached framings are shared by parsers
        # with different limits.
        if content_length is not None and content_length > self.max_body_size:
            raise self._fail(413, "Body too large")
        method, target, path, query, version, authority = parsed
        if authority:
            # RFC 9112 §3.2.2: an absolute-form target's authority replaces the Host header
            # (which HTTP/1.1 must still send, see `_framing`).
            block = with_host(block, authority)
        return RequestHead(
            method,
            target,
            path,
            query,
            version,
            _fields(block),
            content_length,
            chunked,
            keep_alive,
            expect_continue,
        )

    def _framing(self, version: str, block: str) -> _Framing:
        """Apply the message-framing rules of RFC 9112 §6 and the connection options."""
        content_length: int | None = None
        chunked = False
        keep_alive = version == "HTTP/1.1"
        expect_continue = False
        lowered = "\n" + block.lower()
        hosts = lowered.count("\nhost:")
        if hosts != 1 and (hosts > 1 or version == "HTTP/1.1"):
            raise self._fail(400, "Multiple Host headers" if hosts else "Missing Host header")
        if hosts:
            host = lowered.partition("\nhost:")[2].partition("\r")[0].strip(" \t")
            if not is_authority(host):
                raise self._fail(400, "Host is not a valid authority")
        framing = _FRAMING_FIELD.findall(lowered)
        if framing:
            codings: list[str] = []
            connection: set[str] = set()
            for name, value in framing:
                value = value.strip(" \t")
                if name == "content-length":
                    content_length = self._content_length(value, content_length)
                elif name == "transfer-encoding":
                    codings.extend(c.strip(" \t") for c in value.split(","))
                elif name == "connection":
                    connection.update(_tokens(value))
                elif value != "100-continue":  # expect
                    raise self._fail(417, "Unsupported expectation")
                else:
                    expect_continue = True
            if codings:
                chunked = self._check_codings(codings, content_length, version)
            if "close" in connection:
                keep_alive = False
            elif "keep-alive" in connection:
                keep_alive = True
            expect_continue = expect_continue and (chunked or bool(content_length))
        return content_length, chunked, keep_alive, expect_continue

    def _check_codings(self, codings: list[str], content_length: int | None, version: str) -> bool:
        # RFC 9112 §6.1: TE with CL is a smuggling vector; refuse instead of guessing.
        if content_length is not None:
            raise self._fail(400, "Both Content-Length and Transfer-Encoding")
        if version == "HTTP/1.0":
            raise self._fail(400, "Transfer-Encoding in an HTTP/1.0 request")
        if codings[-1] != "chunked":
            raise self._fail(400, "Transfer-Encoding must end with chunked")
        if codings.count("chunked") > 1:
            raise self._fail(400, "Transfer-Encoding applies chunked twice")
        if codings != ["chunked"]:
            raise self._fail(501, "Unsupported Transfer-Encoding")
        return True

    def _diagnose(self, block: str) -> None:
        """Walk header lines one by one and raise the error for the first bad one."""
        for line in block.split("\r\n") if block else ():
            name, colon, value = line.partition(":")
            if line[:1] in (" ", "\t"):
                raise self._fail(400, "Obsolete line folding is not accepted")
            if not colon:
                raise self._fail(400, "Header missing ':'")
            if not name:
                raise self._fail(400, "Empty header name")
            if name[-1:] in (" ", "\t"):
                raise self._fail(400, "Whitespace before ':' in header")
            if TOKEN.fullmatch(name) is None:
                raise self._fail(400, "Invalid character in header name")
            if FIELD_VALUE.fullmatch(value) is None:
                raise self._fail(400, "Invalid character in header value")
        raise self._fail(400, "Malformed header section")

    def _parse_request_line(self, line: str) -> _Line:
        method, _, rest = line.partition(" ")
        target, sp2, version = rest.partition(" ")
        if not sp2 or not method or not target:
            raise self._fail(400, "Malformed start-line")
        if TOKEN.fullmatch(method) is None:
            raise self._fail(400, "Malformed start-line")
        if version not in VERSIONS:
            if version.startswith("HTTP/"):
                raise self._fail(505, "Unsupported HTTP version")
            raise self._fail(400, "Malformed start-line")
        if len(target) > self.max_target_size:
            raise self._fail(414, "Request target too long")
        if _TARGET.fullmatch(target) is None:
            raise self._fail(400, "Invalid character in request target")
        try:
            path, query, authority = split_target(method, target)
        except ParseError as exc:
            raise self._fail(exc.status, exc.detail) from None
        return method, target, path, query, version, authority

    def _content_length(self, value: str, previous: int | None) -> int:
        if not (value.isascii() and value.isdigit()):
            raise self._fail(400, "Invalid Content-Length")
        length = int(value) if len(value) <= 19 else _HUGE
        if previous is not None and previous != length:
            raise self._fail(400, "Conflicting Content-Length headers")
        return length

    # -- bodies -------------------------------------------------------------------------------

    def _next_body_piece(self) -> bytes | Sentinel:
        buf = self._buf
        if not buf:
            if self._eof:
                raise self._fail(400, "Connection closed in the middle of the body")
            return NEED_DATA
        take = self._remaining
        if len(buf) <= take:
            piece = bytes(buf)
            buf.clear()
        else:
            piece = bytes(buf[:take])
            del buf[:take]
        self._remaining -= len(piece)
        if not self._remaining:
            self._state = _END
        return piece


def _fields(block: str) -> list[tuple[str, str]]:
    """The (lower-case name, value) pairs of a validated header block, in order."""
    if not block:
        return []
    lines = [line.partition(":") for line in block.split("\r\n")]
    return [(name.lower(), value.strip(" \t")) for name, _, value in lines]


def _tokens(value: str) -> set[str]:
    return {token.strip(" \t") for token in value.split(",")}
