"""`Request`: one parsed HTTP request as handlers see it.

Built by the connection from a `RequestHead` and the body: `b""` when there is none, else an
iterable of pieces that the connection reads only when asked (kept as a `BodyStream`), which
`iter_body()` passes on as they come and `body` reads whole on first use. Nothing of a body is read
before the app asks, so `limit_body` can refuse it from Content-Length alone. Only what every
request needs is computed up front; the header mapping, query, cookies, decoded path and proxy-aware
address are parsed on first use and cached. Form and multipart parsing live in
`socketify.core.body`; the methods here only delegate and cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import orjson

from socketify.core.body_stream import PAYLOAD_TOO_LARGE, BodyStream
from socketify.core.cookies import parse_cookie_header
from socketify.core.errors import HTTPError
from socketify.core.headers import Headers, MultiDict
from socketify.core.routing import decode_path
from socketify.core.urlencoded import parse_query
from socketify.protocol.http11.target import is_authority

if TYPE_CHECKING:
    from socketify.core.body import BodyLimits, UploadedFiles
    from socketify.protocol.http11 import RequestHead
    from socketify.protocol.proxy_header import ProxyHeader

__all__ = ["DEFAULT_MAX_JSON_SIZE", "Request"]

DEFAULT_MAX_JSON_SIZE = 1024 * 1024
JSON_TOO_LARGE = "JSON body too large"


def _first_forwarded_for(value: str) -> str:
    """Return the address in the first `for=` of an RFC 7239 Forwarded header, or ""."""
    first = value.split(",", 1)[0]
    for pair in first.split(";"):
        name, _, addr = pair.strip().partition("=")
        if name.lower() == "for":
            addr = addr.strip().strip('"')
            if addr.startswith("["):  # "[2001:db8::1]:4711"
                return addr[1:].partition("]")[0]
            if addr.count(":") == 1:  # "192.0.2.60:4711"
                return addr.partition(":")[0]
            return addr
    return ""


class Request:
    """An HTTP request: method, path, headers, query, params, cookies and the body."""

    __slots__ = (
        "_body",
        "_changed",
        "_cookies",
        "_form_data",
        "_headers",
        "_locals",
        "_params",
        "_path",
        "_query",
        "_remote_ip",
        "_scheme",
        "_stream",
        "client_cert",
        "head",
        "max_json_size",
        "method",
        "proxy_header",
        "remote_addr",
        "route",
        "server_name",
        "started_ns",
        "trust_proxy",
    )

    def __init__(
        self,
        head: RequestHead,
        body: bytes | Iterable[bytes],
        remote_addr: str,
        trust_proxy: bool = False,
        scheme: str = "http",
    ) -> None:
        self.head = head
        self.method = head.method
        if isinstance(body, bytes):
            self._body: bytes | None = body
            self._stream: BodyStream | None = None
        else:
            self._body = None
            self._stream = (
                body if isinstance(body, BodyStream) else BodyStream(body, head.content_length)
            )
        self._form_data: tuple[MultiDict, UploadedFiles] | None = None
        self.remote_addr = remote_addr
        self.trust_proxy = trust_proxy
        self._scheme = scheme
        self.client_cert: dict[str, Any] | None = None  # the verified peer certificate (mTLS)
        # The PROXY protocol header of a load balancer in front (its `source` is already
        # `remote_addr`; `alpn`, `authority`, `unique_id`, `tls` and `tlv(type)` read the rest).
        self.proxy_header: ProxyHeader | None = None
        # The host name the client asked for in TLS (SNI), or the one the proxy in front saw.
        self.server_name: str | None = None
        self._headers: Headers | None = None  # the mapping, built on first use
        # Fields middleware set on this request ({lower-case name: value, or None: removed});
        # the head stays as the client sent it.
        self._changed: dict[str, str | None] | None = None
        self._query: MultiDict | None = None
        self._cookies: dict[str, str] | None = None
        self._params: dict[str, str] | None = None
        self._locals: dict[str, Any] | None = None
        self._path: str | None = None
        self._remote_ip: str | None = None
        self.started_ns = perf_counter_ns()  # when the request began: access logs time it
        # The largest body `json()` parses; the app sets its server's `max_json_size`.
        self.max_json_size = DEFAULT_MAX_JSON_SIZE
        # The pattern of the route that answered ("/users/:id"), set by routing; None when no
        # route matched. Metrics and traces name requests by it (bounded, unlike paths).
        self.route: str | None = None

    # -- request line ---------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The path, percent-decoded, without the query (`/a%2Fb` reads `/a/b`)."""
        path = self._path
        if path is None:
            path = self._path = decode_path(self.head.path)
        return path

    @property
    def raw_target(self) -> str:
        """The request target exactly as sent."""
        return self.head.target

    @property
    def raw_path(self) -> str:
        """The path as sent, still percent-encoded."""
        return self.head.path

    @property
    def query_string(self) -> str:
        """The raw query string, without the `?`."""
        return self.head.query_string

    @property
    def http_version(self) -> str:
        """`HTTP/1.1`, `HTTP/1.0` or `HTTP/2.0`."""
        return self.head.version

    # -- headers --------------------------------------------------------------------------

    @property
    def headers(self) -> Headers:
        """Case-insensitive, read-only header mapping; repeated fields are joined with ", "."""
        headers = self._headers
        if headers is None:
            headers = self._headers = Headers(self.header_fields(), readonly=True)
        return headers

    def header(self, name: str, default: str = "") -> str:
        """Return the value of header `name` (repeats joined with ", "), or `default`."""
        changed = self._changed
        if changed is not None:
            lower = name.lower()
            if lower in changed:
                value = changed[lower]
                return default if value is None else value
        names = self.head.names
        value = names.get(name)
        if value is None and not name.islower():
            value = names.get(name.lower())
        return default if value is None else value

    def set_header(self, name: str, value: str | None) -> None:
        """Change header `name` as later middleware and the handler see it (None removes it).

        The client's head is left as it was sent; this request alone sees the change.
        """
        if value is not None and not isinstance(value, str):
            raise TypeError(f"a header value must be str, not {type(value).__name__}")
        lower = name.lower()
        if self._changed is None:
            self._changed = {lower: value}
        else:
            self._changed[lower] = value
        self._headers = None
        if lower == "cookie":
            self._cookies = None

    def header_fields(self) -> list[tuple[str, str]]:
        """The (lower-case name, value) fields as seen now: the client's, with the changes."""
        changed = self._changed
        fields = list(self.head.headers)
        if changed:
            # A changed name's fields (repeats too) give way to its one new field, at the end.
            fields = [field for field in fields if field[0] not in changed]
            fields.extend((name, value) for name, value in changed.items() if value is not None)
        return fields

    @property
    def content_type(self) -> str:
        """The Content-Type header, or ""."""
        return self.header("content-type")

    @property
    def host(self) -> str:
        """The Host header (X-Forwarded-Host first when proxies are trusted).

        A forwarded host that is no valid authority (RFC 9112 §3.2, as the parser requires of
        Host) is ignored: a proxy that passes the client's header through unchecked must not
        hand the app a host that the Host header itself could never carry.
        """
        if self.trust_proxy:
            forwarded = self.header("x-forwarded-host").split(",", 1)[0].strip()
            if forwarded and is_authority(forwarded):
                return forwarded
        return self.header("host")

    @property
    def scheme(self) -> str:
        """`http` or `https` (X-Forwarded-Proto / Forwarded proto= when proxies are trusted)."""
        if self.trust_proxy:
            proto = self.header("x-forwarded-proto").split(",", 1)[0].strip().lower()
            if not proto:
                for pair in self.header("forwarded").split(",", 1)[0].split(";"):
                    name, _, value = pair.strip().partition("=")
                    if name.lower() == "proto":
                        proto = value.strip('"').lower()
            if proto in ("http", "https"):
                return proto
        return self._scheme

    @property
    def remote_ip(self) -> str:
        """The client address: the peer, or the first forwarded address with trust_proxy."""
        ip = self._remote_ip
        if ip is None:
            ip = ""
            if self.trust_proxy:
                xff = self.header("x-forwarded-for")
                if xff:
                    ip = xff.split(",", 1)[0].strip()
                else:
                    forwarded = self.header("forwarded")
                    if forwarded:
                        ip = _first_forwarded_for(forwarded)
            ip = self._remote_ip = ip or self.remote_addr
        return ip

    # -- query, params, cookies, locals ---------------------------------------------------

    @property
    def query(self) -> MultiDict:
        """The query string as a multi-dict: `query[k]` is the last value, `getall(k)` all."""
        query = self._query
        if query is None:
            query = self._query = parse_query(self.head.query_string)
        return query

    @property
    def params(self) -> dict[str, str]:
        """Route parameters, decoded (`/users/:id` on `/users/a%2Fb` gives id "a/b")."""
        params = self._params
        if params is None:
            params = self._params = {}
        return params

    @params.setter
    def params(self, value: dict[str, str]) -> None:
        self._params = value

    @property
    def cookies(self) -> dict[str, str]:
        """Cookies sent by the client (the last of duplicates wins; no URL-decoding)."""
        cookies = self._cookies
        if cookies is None:
            lines = [value for name, value in self.header_fields() if name == "cookie"]
            cookies = {}
            for line in lines:
                cookies.update(parse_cookie_header(line))
            self._cookies = cookies
        return cookies

    def cookie(self, name: str, default: str = "") -> str:
        """Return cookie `name`, or `default`."""
        return self.cookies.get(name, default)

    @property
    def locals(self) -> dict[str, Any]:
        """Per-request storage shared by middleware and the handler."""
        store = self._locals
        if store is None:
            store = self._locals = {}
        return store

    @property
    def session(self) -> Any:
        """The session loaded by `sessions.middleware()`, or None without it."""
        return self._locals.get("session") if self._locals is not None else None

    # -- body -----------------------------------------------------------------------------

    @property
    def body(self) -> bytes:
        """The whole body as bytes (read on first use when it is still streaming)."""
        body = self._body
        if body is None:
            assert self._stream is not None
            body = self._body = self._stream.read_all()
        return body

    def iter_body(self) -> Iterator[bytes]:
        """Yield the body in pieces as they arrive, without holding it all; read it once."""
        if self._body is not None:
            if self._body:
                yield self._body
            return
        assert self._stream is not None
        yield from self._stream

    @property
    def trailers(self) -> Headers:
        """The trailer fields the client sent after the body (read-only, case-insensitive).

        A chunked HTTP/1.1 body and an HTTP/2 stream can end with trailer fields; other
        bodies have none (an empty mapping). They follow the body, so asking for them reads
        the body first (as `body` does) when nothing has read it yet; while `iter_body()`
        is still under way they are not there yet, and asking raises RuntimeError. Fields a
        trailer must not carry (framing, routing, authentication, `Content-*`...: see
        `socketify.protocol.http.trailers`) are dropped on both protocols.
        """
        stream = self._stream
        if stream is None:
            return Headers((), readonly=True)
        if not stream.consumed:
            self.body  # noqa: B018 - reads the body to its end, where the trailers are
        fields = stream.trailers
        if fields is None:
            raise RuntimeError(
                "the trailers follow the body: read req.body, or iter_body() to its end, first"
            )
        return Headers(fields, readonly=True)

    def limit_body(self, max_bytes: int) -> None:
        """Answer 413 for a body over `max_bytes`: at once from Content-Length, or as it streams."""
        if self._stream is not None and self._body is None:
            self._stream.limit(max_bytes)
        elif len(self.body) > max_bytes:
            raise HTTPError(413, PAYLOAD_TOO_LARGE)

    @property
    def charset(self) -> str:
        """The charset parameter of the Content-Type, default `utf-8`."""
        for param in self.content_type.split(";")[1:]:
            name, _, value = param.strip().partition("=")
            if name.lower() == "charset" and value:
                return value.strip().strip('"')
        return "utf-8"

    @property
    def text(self) -> str:
        """The body decoded with its charset (utf-8 by default; bad bytes are replaced)."""
        try:
            return self.body.decode(self.charset, "replace")
        except LookupError:  # an unknown charset name from the client
            return self.body.decode("utf-8", "replace")

    def json(self, max_size: int | None = None) -> Any:
        """Parse the body as JSON; an empty or invalid body raises HTTPError(400), one over
        `max_size` bytes (default: the server's `max_json_size`) HTTPError(413)."""
        limit = self.max_json_size if max_size is None else max_size
        # Parsed JSON takes 15 to 40 times the memory of its text (a list of small numbers
        # or empty objects), so this bound is much lower than max_body_size.
        length = self.head.content_length
        if length is not None and length > limit:
            raise HTTPError(413, JSON_TOO_LARGE)  # refused before the body is read
        body = self.body
        if len(body) > limit:
            raise HTTPError(413, JSON_TOO_LARGE)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise HTTPError(400, "Invalid JSON body") from None

    def form(self, limits: BodyLimits | None = None) -> MultiDict:
        """The urlencoded or multipart form fields (`form["k"]` last value, `getall("k")`)."""
        return self.multipart(limits)[0]

    def files(self, limits: BodyLimits | None = None) -> UploadedFiles:
        """The uploaded files of a multipart body: field name -> `UploadedFile`."""
        return self.multipart(limits)[1]

    def multipart(self, limits: BodyLimits | None = None) -> tuple[MultiDict, UploadedFiles]:
        """Parse the form body once (streamed, large files to disk); returns (form, files)."""
        parsed = self._form_data
        if parsed is None:
            from socketify.core.body import parse_form  # lazy: most requests never parse a form

            parsed = self._form_data = parse_form(self, limits)
        return parsed

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.raw_target}>"
