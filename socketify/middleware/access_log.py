"""Access logging middleware on the stdlib `logging` module.

One line per request on the logger `socketify.access`: INFO below 400, WARNING for 4xx, ERROR
for 5xx. The middleware's `after` hook sees the exception leaving the chain, so requests
that end in an exception are logged too, with the status the server is about to send (500,
or the HTTPError's), and a chain that stopped without an answer is logged as the 404 the
server gives it. In a server the lines of one loop turn go out together (`log_handlers`).
Formats:

- `dev`:    `127.0.0.1 GET /x 200 0.1ms 13B` (plus ` rid=... ua=...` when the logger is at
  DEBUG);
- `common`: NCSA Common Log Format, `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /x
  HTTP/1.1" 200 13` (UTC; `-` for no body), which log analysers read;
- `json`:   one JSON object per line (with `trace_id` and `span_id` while tracing is on).

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
from socketify.middleware.log_handlers import LineSink
from socketify.middleware.proxy import TrustProxy, client_ip_resolver
from socketify.protocol.http11.status import NO_BODY_STATUSES
from socketify.tracing.context import current_ids

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
    resolve: Callable[[Request], str] | None = (
        None if trust_proxy is False else client_ip_resolver(trust_proxy)
    )
    render = {"dev": _dev, "common": _common, "json": _json}[format]
    clock = time.perf_counter_ns

    def access_log_middleware(req: Request, res: Response, error: BaseException | None) -> None:
        if error is None and res.ended and not res.head_only:  # the usual answer
            status = res.status_code
            sent = res.body_length if status not in NO_BODY_STATUSES else 0
        else:
            status, sent = _outcome(res, error)
        level = _INFO if status < 400 else _level_of(status)
        if not log.isEnabledFor(level):
            return
        ms = (clock() - req.started_ns) / 1e6
        if resolve is not None:
            ip = resolve(req)
        else:  # `req.remote_ip` without its call when proxies are not trusted
            ip = req.remote_ip if req.trust_proxy else req.remote_addr
        sink.send(level, render(req, ip, status, ms, sent, log))

    # After only: the request's clock starts when it is created.
    return hooked(None, access_log_middleware)


def _level_of(status: int) -> int:
    """INFO below 400, WARNING for 4xx, ERROR for 5xx (and beyond)."""
    return _INFO if status < 400 else _WARNING if status < 500 else _ERROR


def _outcome(res: Response, error: BaseException | None) -> tuple[int, int | None]:
    """(status, body bytes or None when unknown) of the answer the server is about to send."""
    if error is None:
        if res.ended:
            return res.status_code, res.body_length if res.sends_body else 0
        # Not ended after the chain: the server answers 404 (a global middleware stopped
        # before routing); dispatch itself always ends the response.
        return 404, None
    if isinstance(error, HTTPError):
        status = error.status
    elif isinstance(error, Exception):
        status = 500
    else:
        status = 503  # a request_timeout thrown into the handler; answered 503
    if res.ended and status == res.status_code:
        return status, res.body_length if res.sends_body else 0  # it goes out as it is
    return status, None


def _dev(
    req: Request, ip: str, status: int, ms: float, sent: int | None, log: logging.Logger
) -> str:
    size = "-" if sent is None else f"{sent}B"
    path = req.head.path  # as sent
    # The parser lets only visible ASCII through in a target, so the path as sent needs
    # escaping only for a quote, and decoding only for a `%`.
    if "%" in path or '"' in path:
        path = _clean(req.path)
    line = f"{ip or '-'} {req.method} {path} {status} {ms:.1f}ms {size}"
    if log.isEnabledFor(_DEBUG):
        line += _dev_details(req)
    return line


def _dev_details(req: Request) -> str:
    """What `dev` adds at DEBUG: the request id and the (shortened) User-Agent."""
    rid = req.header("x-request-id")
    ua = req.header("user-agent")
    if len(ua) > _UA_LIMIT:
        ua = ua[:_UA_LIMIT] + "..."
    return f" rid={_clean(rid) or '-'} ua={_clean(ua) or '-'}"


def _clean(text: str) -> str:
    return text.translate(_ESCAPES) if not text.isprintable() or '"' in text else text


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
    ids = current_ids()
    if ids is not None:
        record["trace_id"], record["span_id"] = ids
    # orjson escapes control characters, so the line stays one line.
    return orjson.dumps(record).decode()
