"""Access logging middleware on the stdlib `logging` module (SPEC §1.10.1, DESIGN §4b).

One line per request on the logger `socketify.access`: INFO below 400, WARNING for 4xx, ERROR
for 5xx. The middleware's `after` hook sees the exception leaving the chain, so requests
that end in an exception are logged too, with the status the server is about to send (500,
or the HTTPError's), and a chain that stopped without an answer is logged as the 404 the
server gives it (SPEC §5.10-11 logged both as 200). In a server the lines of one loop turn
go out together (`log_handlers`), and the logger's settings are asked once per such batch.
Formats:

- `dev`:    `127.0.0.1 GET /x 200 0.1ms 13B` (plus ` rid=... ua=...` when the logger is at
  DEBUG);
- `common`: NCSA Common Log Format, `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /x
  HTTP/1.1" 200 13` (UTC; `-` for no body), which log analysers read;
- `json`:   one JSON object per line.

Anything the client controls (path, target, User-Agent, request id) is escaped: control
characters become `\\xNN`, so a `%0a` in a URL cannot forge a second log line. Bytes are the
body bytes before compression; `-` when unknown (streams, errors).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from socketify.core.chain import Hooked, hooked
from socketify.core.errors import HTTPError
from socketify.middleware.log_handlers import LineSink, get_ident
from socketify.middleware.proxy import TrustProxy, client_ip_resolver
from socketify.protocol.http11.status import NO_BODY_STATUSES

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["ACCESS_LOGGER", "middleware"]

ACCESS_LOGGER = "socketify.access"
FORMATS = ("dev", "common", "json")
_UA_LIMIT = 40
# Control characters (C0, DEL, C1 and the Unicode line separators) -> \xNN / \uNNNN; the
# quote too, as it delimits fields in `common`.
_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))} | {
    0x2028: "\\u2028",
    0x2029: "\\u2029",
    ord('"'): '\\"',
}
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

_DEBUG, _INFO, _WARNING, _ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR


def middleware(
    format: str = "dev",
    trust_proxy: TrustProxy = False,
    logger: logging.Logger | None = None,
) -> Hooked:
    """Log every request on `socketify.access` (or `logger`) in `format` dev/common/json."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {format!r}")
    log = logger or logging.getLogger(ACCESS_LOGGER)
    sink = LineSink(log)
    send = sink.send
    # None: the peer's address (a property read, not a call per request)
    resolve: Callable[[Request], str] | None = (
        None if trust_proxy is False else client_ip_resolver(trust_proxy)
    )
    render = {"dev": None, "common": _common, "json": _json}[format]  # None: dev, inline
    clock = time.perf_counter_ns
    enabled, cached = _level_checks(log)

    def access_log_middleware(req: Request, res: Response, error: BaseException | None) -> None:
        # PERF: inline and on the slots, not the properties: this runs for every request.
        if error is None and res._ended:
            status = res._status or 200
            # Bytes: the body before compression; None (`-`) when unknown (streams, errors).
            if (
                res._chunks
                or res._head_only
                or res.file_path  # PERF: truth tests; a path or callable is never false
                or res.upgrade
                or res.stream_iter is not None
                or status in NO_BODY_STATUSES
            ):
                sent = _body_size(res, status)
            else:
                sent = len(res._body)  # the usual answer: a buffered body
            code = _STATUSES[status]  # a Response's status is in 100-999
        else:
            status, sent = _unusual_end(res, error)
            code = _STATUSES[status] if 0 <= status < 1000 else f"{status} "  # an HTTPError's
        batch = sink.batch
        if batch is not None and sink.batch_thread == get_ident():
            # PERF: this loop turn's batch is open in this thread (the turn bounds its length).
            # When it opened, the logger took INFO and up (every access level) and said
            # whether it takes DEBUG: its settings are asked once per batch (see LineSink).
            debug = sink.batch_debug
        else:
            batch = None
            level = _level_of(status)
            # PERF: what log.isEnabledFor answers, from logging's own cache when it has it.
            on = cached(level)
            if log.disabled or not (on or (on is None and enabled(level))):
                return
            on = cached(_DEBUG)
            debug = on or (on is None and enabled(_DEBUG))
        tenths = (clock() - req.started_ns) // 100_000  # whole tenths of a millisecond
        if resolve is not None:
            ip = resolve(req)
        else:
            # PERF: what req.remote_ip answers when proxies are not trusted, without the call.
            ip = req.remote_ip if req.trust_proxy else req.remote_addr
        if render is not None:
            line = render(req, ip, status, tenths / 10.0, sent, log)
        else:
            # The `dev` line. PERF: every field is a str already: an f-string formatting ints
            # and a float costs twice as much. The tables below cover the usual sizes and
            # durations (never negative); the others come by the exception, with no test.
            try:
                size = _SIZES[sent]  # type: ignore[index]  # None: TypeError
            except (IndexError, TypeError):
                size = "-" if sent is None else f"{sent}B"
            try:
                took = _TENTHS[tenths]
            except IndexError:
                took = f"{tenths / 10.0:.1f}ms "
            path = req.head.path
            # PERF: the parser lets only visible ASCII through in a target, so the path as
            # sent needs escaping only for a quote, and decoding only for a `%`.
            if "%" in path or '"' in path:
                path = _clean(req.path)
            line = f"{ip or '-'} {req.method} {path} {code}{took}{size}"
            if debug:
                line += _dev_details(req)
        if batch is not None:
            batch.append(line)
        else:
            send(_level_of(status), line)

    # PERF: after only (the request's clock starts when it is created): a chain calls
    # nothing of it on the way in.
    return hooked(None, access_log_middleware)


def _level_of(status: int) -> int:
    """INFO below 400, WARNING for 4xx, ERROR for 5xx (and beyond)."""
    return _INFO if status < 400 else _WARNING if status < 500 else _ERROR


def _body_size(res: Response, status: int) -> int | None:
    """The body bytes of an answer that is not a plain buffered one; None when unknown."""
    if res._head_only or status in NO_BODY_STATUSES or res.upgrade is not None:
        return 0
    if res.stream_iter is not None:
        return None
    if res.file_path is not None:
        return res.file_length
    chunks = res._chunks
    return len(res._body) + (sum(map(len, chunks)) if chunks else 0)


def _unusual_end(res: Response, error: BaseException | None) -> tuple[int, int | None]:
    """(status, body bytes or None) of a chain that raised, or stopped unanswered."""
    if error is None:
        # Not ended after the chain: the server answers 404 (a global middleware stopped
        # before routing); dispatch itself always ends the response.
        return 404, None
    if isinstance(error, HTTPError):
        status = error.status
    elif isinstance(error, Exception):
        status = 500
    else:
        status = 503  # a request_timeout thrown into the handler; answered 503
    if res._ended and status == (res._status or 200):
        return status, _body_size(res, status)  # the response goes out as it is
    return status, None


def _level_checks(log: logging.Logger) -> tuple[Callable[[int], bool], Callable[[int], Any]]:
    """(log.isEnabledFor, a dict lookup of its cached answers: None when not cached).

    PERF: `Logger.isEnabledFor` is a Python call; its answers are kept per level in
    `Logger._cache`, which logging clears (the same dict) whenever levels change. A logger
    class that decides otherwise is always asked.
    """
    cache = getattr(log, "_cache", None)
    if type(log).isEnabledFor is not logging.Logger.isEnabledFor or type(cache) is not dict:
        cache = {}
    return log.isEnabledFor, cache.get


def _dev_details(req: Request) -> str:
    """What `dev` adds at DEBUG: the request id and the (shortened) User-Agent."""
    rid = req.header("x-request-id")
    ua = req.header("user-agent")
    if len(ua) > _UA_LIMIT:
        ua = ua[:_UA_LIMIT] + "..."
    return f" rid={_clean(rid) or '-'} ua={_clean(ua) or '-'}"


def _clean(text: str) -> str:
    return text.translate(_ESCAPES) if not text.isprintable() or '"' in text else text


# The `dev` fields, each with the space that follows it (PERF: fewer pieces to join per line).
_TENTHS = [f"{tenths // 10}.{tenths % 10}ms " for tenths in range(1000)]  # under 100 ms
_SIZES = [f"{size}B" for size in range(2048)]  # the last field: no space
_STATUSES = [f"{code} " for code in range(1000)]  # Response keeps statuses in 100-999


def _common(
    req: Request, ip: str, status: int, ms: float, sent: int | None, log: logging.Logger
) -> str:
    t = time.gmtime()
    stamp = (
        f"{t.tm_mday:02d}/{_MONTHS[t.tm_mon - 1]}/{t.tm_year}:"
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} +0000"
    )
    request_line = _clean(f"{req.method} {req.raw_target} {req.http_version}")
    return f'{ip or "-"} - - [{stamp}] "{request_line}" {status} {sent or "-"}'


def _json(
    req: Request, ip: str, status: int, ms: float, sent: int | None, log: logging.Logger
) -> str:
    record: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ip": ip,
        "method": req.method,
        "path": req.path,
        "query": req.query_string,
        "http_version": req.http_version,
        "status": status,
        "duration_ms": round(ms, 3),
        "bytes": sent,
        "request_id": req.header("x-request-id") or None,
        "user_agent": req.header("user-agent") or None,
        "referer": req.header("referer") or None,
    }
    # orjson escapes control characters, so the line stays one line.
    return orjson.dumps(record).decode()
