"""A small blocking-style HTTP client on urllib3, pooled and TLS-verified.

    from socketify import http_client

    res = http_client.get("https://api.example.com/users/1", timeout=5)
    if res.ok:
        user = res.json()
    else:
        log.warning("lookup failed: %s %s", res.status, res.error)

Theory of operation. Every call returns a `Response`; a request that got no HTTP answer at all
(bad URL, DNS, refused connection, failed TLS handshake, timeout) has `status == 0` and says
why in `error`, so a handler can treat "no answer" like any non-2xx answer. Calls block the
calling greenlet only: urllib3 does its IO through the `socket` module, which gevent's
monkey-patching (done by the socketify worker) makes cooperative, so a slow upstream never
stalls the other connections of the worker.

Connections are pooled per host by a `Client` (keep-alive; the module-level functions share
one per TLS setting). Pools are dropped in a forked child, so workers never share a socket
with the master. Certificates are verified by default (the system store plus certifi's
bundle, or `ca_file`), Host carries a non-default port, IPv6 literals work
(`http://[::1]:8080/`), repeated response headers are all kept
(`res.headers.getall("Set-Cookie")`). Redirects are followed only when asked; gzip and
deflate bodies are decompressed (the headers are left as received).

`timeout` (seconds) bounds the connection attempt and each wait for data, not the whole call.
"""

from __future__ import annotations

import os
import ssl
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import certifi
import orjson
import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    DecodeError,
    LocationParseError,
    LocationValueError,
    MaxRetryError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    ResponseError,
    SSLError,
)
from urllib3.util import Retry, Timeout, make_headers, parse_url

from socketify import json_util
from socketify.core.headers import Headers
from socketify.tracing.context import inject as inject_trace

__all__ = [
    "DEFAULT_TIMEOUT",
    "USER_AGENT",
    "Client",
    "Request",
    "Response",
    "get",
    "post",
    "request",
]

USER_AGENT = "socketify-http-client"
DEFAULT_TIMEOUT = 15.0
JSON_TYPE = "application/json"

HeaderInput = Mapping[str, str] | Iterable[tuple[str, str]]
StrPath = str | os.PathLike[str]

# The connection is the pool's business, the length is the body's: a caller's value for
# these would contradict what is actually sent.
_OWNED_HEADERS = frozenset({"host", "connection", "content-length", "transfer-encoding"})
# Only what urllib3 can decode with what is installed (br/zstd need optional packages).
_ACCEPT_ENCODING = make_headers(accept_encoding=True)["accept-encoding"]

_UNSET: Any = object()


@dataclass(frozen=True)
class Request:
    """One request: method, absolute URL, headers, body and per-request options."""

    url: str
    method: str = "GET"
    headers: HeaderInput = ()
    body: bytes | str = b""
    timeout: float | None = None  # None: the client's timeout
    follow_redirects: bool = False
    max_redirects: int = 10
    decompress: bool = True


@dataclass(frozen=True)
class Response:
    """An answer (`status` > 0), or a failure to get one (`status == 0`, see `error`)."""

    status: int
    headers: Headers
    body: bytes = b""
    error: str = ""
    url: str = ""  # where the answer came from (differs from the request after redirects)

    @property
    def ok(self) -> bool:
        """True for a 2xx status."""
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        """The body decoded with the Content-Type charset (UTF-8 by default)."""
        charset = "utf-8"
        for param in (self.headers.get("content-type") or "").split(";")[1:]:
            name, _, value = param.strip().partition("=")
            if name.lower() == "charset" and value:
                charset = value.strip().strip('"')
        try:
            return self.body.decode(charset, "replace")
        except LookupError:  # a charset name Python does not know
            return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON; None when it is empty or not JSON."""
        return json_util.parse(self.body)

    def __repr__(self) -> str:
        return f"<Response {self.status}{' ' + self.error if self.error else ''}>"


def _failure(error: str, url: str = "") -> Response:
    return Response(0, Headers(readonly=True), b"", error, url)


def _ssl_context(
    verify: bool | str,
    ca_file: str | None,
    cert_file: str | None,
    key_file: str | None,
) -> ssl.SSLContext:
    """The client TLS context: verifying unless `verify is False`, TLS 1.2 at least."""
    if verify is False:
        if ca_file is not None:
            raise ValueError("ca_file has no effect with verify=False; drop one of them")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        trust = ca_file or (verify if isinstance(verify, str) else None)
        if trust is not None:
            # Only the given CAs, as with curl --cacert: a private CA should not be diluted.
            if os.path.isdir(trust):
                context = ssl.create_default_context(capath=trust)
            else:
                context = ssl.create_default_context(cafile=trust)
        else:
            # The system store (which honours SSL_CERT_FILE) plus certifi's bundle: minimal
            # containers often lack ca-certificates, and a corporate CA lives only in the
            # system store, so neither alone is enough.
            context = ssl.create_default_context()
            context.load_verify_locations(certifi.where())
    context.minimum_version = max(context.minimum_version, ssl.TLSVersion.TLSv1_2)
    if cert_file is not None:
        context.load_cert_chain(cert_file, key_file)
    return context


def _fspath(path: StrPath | None) -> str | None:
    return None if path is None else os.fspath(path)


def _clean_url(url: str) -> str | None:
    """The URL to request (userinfo and fragment dropped), or None when it is not usable."""
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return None
    try:
        parsed = parse_url(url)
    except LocationParseError:
        return None
    if not parsed.host:
        return None
    # Credentials in a URL are not sent: they leak into logs; use an Authorization header.
    return parsed._replace(scheme=scheme.lower(), auth=None, fragment=None).url


def _final_url(url: str, answer: urllib3.BaseHTTPResponse) -> str:
    """The absolute URL that gave `answer`: `url`, or the last redirect's target."""
    history = answer.retries.history if answer.retries is not None else ()
    for step in history:
        if step.redirect_location:
            url = urljoin(step.url or url, step.redirect_location)
    return url


def _header_pairs(headers: HeaderInput) -> Iterable[tuple[str, str]]:
    if isinstance(headers, Mapping):
        return headers.items()
    return headers


def _describe(exc: Exception) -> str:
    """A short, stable error text for a failed exchange."""
    if isinstance(exc, MaxRetryError):
        if isinstance(exc.reason, ResponseError):
            return "too many redirects"
        if exc.reason is not None:
            exc = exc.reason
    if isinstance(exc, NameResolutionError):
        return f"dns: cannot resolve {exc.conn.host}"
    if isinstance(exc, NewConnectionError):  # a subclass of ConnectTimeoutError: test first
        return f"connect failed: {_innermost(exc)}"
    if isinstance(exc, ConnectTimeoutError):
        return "connect timed out"
    if isinstance(exc, SSLError):
        return f"TLS handshake failed: {_innermost(exc)}"
    if isinstance(exc, ReadTimeoutError):
        return "read timed out"
    if isinstance(exc, ProtocolError):
        return f"read failed: {_innermost(exc)}"
    if isinstance(exc, DecodeError):
        return "decompression failed"
    return f"request failed: {exc}"


def _innermost(exc: BaseException) -> str:
    """The most specific message in an exception chain (ssl's verify message when there)."""
    seen: BaseException | None = exc
    message = str(exc)
    while seen is not None:
        verify = getattr(seen, "verify_message", None)
        if verify:
            return str(verify)
        if isinstance(seen, OSError) and seen.strerror:
            message = seen.strerror
        elif isinstance(seen, ssl.SSLError) and seen.reason:
            message = seen.reason
        nested = [arg for arg in getattr(seen, "args", ()) if isinstance(arg, BaseException)]
        seen = nested[0] if nested else seen.__cause__ or seen.__context__
    return message


class Client:
    """A pooled HTTP(S) client; share one per upstream setting, it is safe across greenlets."""

    def __init__(
        self,
        *,
        verify: bool | StrPath = True,
        ca_file: StrPath | None = None,
        cert_file: StrPath | None = None,
        key_file: StrPath | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        pool_size: int = 10,
        max_hosts: int = 32,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.timeout = timeout
        self.user_agent = user_agent
        self._ssl_context = _ssl_context(
            verify if isinstance(verify, bool) else os.fspath(verify),
            _fspath(ca_file),
            _fspath(cert_file),
            _fspath(key_file),
        )
        self._verify = verify is not False
        self._pool_size = pool_size
        self._max_hosts = max_hosts
        self._pool = self._new_pool()
        _live_clients.add(self)

    def _new_pool(self) -> urllib3.PoolManager:
        return urllib3.PoolManager(
            num_pools=self._max_hosts,
            maxsize=self._pool_size,
            block=False,  # past maxsize, open an extra connection rather than wait
            ssl_context=self._ssl_context,
            cert_reqs="CERT_REQUIRED" if self._verify else "CERT_NONE",
        )

    def drop_pools(self) -> None:
        """Start over with empty pools, without closing the pooled sockets.

        What a forked child does: a pooled socket used by two processes interleaves their
        requests, and dropping the child's copies of the descriptors does not touch the
        parent's connections.
        """
        self._pool = self._new_pool()

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, req: Request) -> Response:
        """Perform `req`; never raises for network or HTTP failures (see `Response.error`)."""
        url = _clean_url(req.url)
        if url is None:
            return _failure(f"invalid or unsupported URL: {req.url}", req.url)
        fields = urllib3.HTTPHeaderDict()
        for name, value in _header_pairs(req.headers):
            if name.lower() not in _OWNED_HEADERS:
                fields.add(name, value)
        if "user-agent" not in fields:
            fields["User-Agent"] = self.user_agent
        if req.decompress and "accept-encoding" not in fields:
            fields["Accept-Encoding"] = _ACCEPT_ENCODING
        inject_trace(fields)  # the request being traced continues in the callee
        body = req.body.encode() if isinstance(req.body, str) else bytes(req.body)
        seconds = self.timeout if req.timeout is None else req.timeout
        # No automatic retries: a timed-out POST must not be sent twice behind the caller's
        # back, and a timeout must not quietly double. Redirects count only when followed.
        retries = Retry(
            total=None,
            connect=0,
            read=0,
            other=0,
            status=0,
            redirect=req.max_redirects if req.follow_redirects else 0,
            raise_on_redirect=True,
            raise_on_status=False,
        )
        try:
            answer = self._pool.urlopen(
                req.method,
                url,
                body=body or None,
                headers=fields,
                redirect=req.follow_redirects,
                retries=retries,
                timeout=Timeout(connect=seconds, read=seconds),
                preload_content=True,
                decode_content=req.decompress,
            )
        except (LocationValueError, LocationParseError):
            return _failure(f"invalid or unsupported URL: {req.url}", req.url)
        except urllib3.exceptions.HTTPError as exc:
            return _failure(_describe(exc), url)
        headers = Headers(answer.headers.items(), readonly=True)
        return Response(answer.status, headers, answer.data, "", _final_url(url, answer))

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: HeaderInput = (),
        body: bytes | str = b"",
        json: Any = _UNSET,
        timeout: float | None = None,
        follow_redirects: bool = False,
        max_redirects: int = 10,
        decompress: bool = True,
    ) -> Response:
        """Send `method` to `url`; `json=` serializes a body and sets Content-Type."""
        if json is not _UNSET:
            if body:
                raise TypeError("pass either body= or json=, not both")
            body = orjson.dumps(json)
            headers = _with_default_type(headers)
        return self.send(
            Request(
                url, method, headers, body, timeout, follow_redirects, max_redirects, decompress
            )
        )

    def get(self, url: str, headers: HeaderInput = (), **options: Any) -> Response:
        """GET `url`."""
        return self.request("GET", url, headers=headers, **options)

    def post(
        self, url: str, body: bytes | str = b"", headers: HeaderInput = (), **options: Any
    ) -> Response:
        """POST `body` to `url`, as `application/json` unless the headers give a Content-Type."""
        return self.request("POST", url, headers=_with_default_type(headers), body=body, **options)


def _with_default_type(headers: HeaderInput) -> list[tuple[str, str]]:
    pairs = list(_header_pairs(headers))
    if not any(name.lower() == "content-type" for name, _ in pairs):
        pairs.append(("Content-Type", JSON_TYPE))
    return pairs


# -- module-level functions: one shared client per TLS setting ---------------------------

_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()
_shared: dict[tuple[bool | str, str | None], Client] = {}
_shared_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()  # another thread may have held it at fork time
    for client in list(_live_clients):
        client.drop_pools()


os.register_at_fork(after_in_child=_reset_after_fork)


def _shared_client(verify: bool | StrPath, ca_file: StrPath | None) -> Client:
    key = (verify if isinstance(verify, bool) else os.fspath(verify), _fspath(ca_file))
    client = _shared.get(key)
    if client is None:
        with _shared_lock:
            client = _shared.get(key)
            if client is None:
                client = _shared[key] = Client(verify=key[0], ca_file=key[1])
    return client


def request(
    method: str | Request,
    url: str = "",
    *,
    verify: bool | StrPath = True,
    ca_file: StrPath | None = None,
    **options: Any,
) -> Response:
    """`request(Request(...))` or `request(method, url, headers=..., body=..., json=...)`."""
    client = _shared_client(verify, ca_file)
    if isinstance(method, Request):
        if url or options:
            raise TypeError("pass either a Request or method and url, not both")
        return client.send(method)
    return client.request(method, url, **options)


def get(
    url: str,
    headers: HeaderInput = (),
    *,
    verify: bool | StrPath = True,
    ca_file: StrPath | None = None,
    **options: Any,
) -> Response:
    """GET `url` with the shared client (options as `Client.request`)."""
    return _shared_client(verify, ca_file).get(url, headers, **options)


def post(
    url: str,
    body: bytes | str = b"",
    headers: HeaderInput = (),
    *,
    verify: bool | StrPath = True,
    ca_file: StrPath | None = None,
    **options: Any,
) -> Response:
    """POST `body` to `url` (JSON Content-Type unless given) with the shared client."""
    return _shared_client(verify, ca_file).post(url, body, headers, **options)
