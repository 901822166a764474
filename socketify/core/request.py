"""`Request`: one parsed HTTP request as handlers see it (SPEC §1.5, DESIGN §4).

Built by the connection from a `RequestHead` and the body: `b""` when there is none, else an
iterable of pieces that the connection reads only when asked (kept as a `BodyStream`), which
`iter_body()` passes on as they come and `body` reads whole on first use. Nothing of a body is
read before the app asks, so `limit_body` can refuse it from Content-Length alone. Only what
every request needs is computed up front; the header mapping, query, cookies, decoded path
and proxy-aware address are parsed on first use and cached (SPEC §5.7 claimed lazy parsing
and did not do it). Form and multipart parsing live in `socketify.core.body`; the methods here
only delegate and cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

import orjson

from socketify.core.body_stream import PAYLOAD_TOO_LARGE, BodyStream
from socketify.core.cookies import parse_cookie_header
from socketify.core.errors import HTTPError
from socketify.core.headers import Headers, MultiDict
from socketify.core.routing import decode_path

if TYPE_CHECKING:
    from socketify.core.body import BodyLimits, UploadedFiles
    from socketify.protocol.http11 import RequestHead

__all__ = ["Request", "parse_query"]


def _unquote_plus(text: str) -> str:
    # PERF: most keys and values need no decoding at all.
    if "%" in text or "+" in text:
        return unquote_plus(text)  # keeps malformed escapes as raw text, as SPEC asks
    return text


def parse_query(query_string: str) -> MultiDict:
    """Parse `a=1&b=2`: `+` is a space, %XX decoded, empty keys dropped, missing value ""."""
    pairs: list[tuple[str, str]] = []
    for part in query_string.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        key = _unquote_plus(key)
        if key:
            pairs.append((key, _unquote_plus(value)))
    return MultiDict(pairs)


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


# PERF: names asked for in lower case already (most lookups), so a missing header costs no
# lower-casing; bounded, as a handler may ask for names it got from clients.
_LOWER_CASE_NAMES: set[str] = set()
_LOWER_CASE_NAMES_KEPT = 1024


class Request:
    """An HTTP request: method, path, headers, query, params, cookies and the body."""

    __slots__ = (
        "_body",
        "_by_name",
        "_cookies",
        "_fields",
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
        "method",
        "remote_addr",
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
        self._headers: Headers | None = None
        self._fields: list[tuple[str, str]] | None = None  # with _set_field's changes, built late
        # The head's name map (shared by identical heads; None until it is built), or this
        # request's copy of it once `_set_field` changed a field.
        self._by_name: dict[str, str] | None = head._by_name
        self._query: MultiDict | None = None
        self._cookies: dict[str, str] | None = None
        self._params: dict[str, str] | None = None
        self._locals: dict[str, Any] | None = None
        self._path: str | None = None
        self._remote_ip: str | None = None
        self.started_ns = perf_counter_ns()  # when the request began: access logs time it

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
        """`HTTP/1.1` or `HTTP/1.0`."""
        return self.head.version

    # -- headers --------------------------------------------------------------------------

    @property
    def headers(self) -> Headers:
        """Case-insensitive header mapping; repeated fields are joined with ", "."""
        headers = self._headers
        if headers is None:
            headers = self._headers = Headers(self._field_list())
        return headers

    def _names(self) -> dict[str, str]:
        """The name map `header` reads (see `_by_name`), built on first use.

        PERF: built-in middleware read `(req._by_name or req._names()).get(name)` for a
        lower-case name while `_headers` is None: `header` without the call.
        """
        by_name = self._by_name
        if by_name is None:
            by_name = self._by_name = self.head.by_name()
        return by_name

    def _set_field(self, lower: str, value: str) -> None:
        """Set header `lower` (lower-cased) to `value` as downstream code will read it.

        PERF: what `req.headers[name] = value` does without building the mapping: only a copy
        of the head's name map changes (the head is shared with identical requests); the field
        list is rebuilt from it if someone asks for it (`_field_list`).
        """
        if self._headers is not None:
            self._headers[lower] = value
            return
        by_name = self._by_name or self._names()
        head = self.head
        if by_name is head._by_name:  # still the shared one: this request gets a copy
            by_name = self._by_name = by_name.copy()
        by_name[lower] = value
        self._fields = None

    def _field_list(self) -> list[tuple[str, str]]:
        """The header fields as downstream code sees them: the head's, with `_set_field`'s."""
        fields = self._fields
        if fields is not None:
            return fields
        head = self.head
        own = self._by_name
        if own is None or own is head._by_name:
            return head.headers
        shared = head.by_name()
        changed = {name: value for name, value in own.items() if shared.get(name) != value}
        # A changed name's fields (repeats too) give way to its one new field, at the end.
        fields = [field for field in head.headers if field[0] not in changed]
        fields.extend(changed.items())
        self._fields = fields
        return fields

    def header(self, name: str, default: str = "") -> str:
        """Return the value of header `name` (repeats joined with ", "), or `default`."""
        if self._headers is not None:
            value = self._headers.get(name)
            return default if value is None else value
        # PERF: the head's own map (shared by identical heads), or this request's copy once
        # `_set_field` changed one; callers mostly pass the lower-case name: one dict get.
        by_name = self._by_name or self._names()
        value = by_name.get(name)
        if value is None and name not in _LOWER_CASE_NAMES:
            lower = name.lower()
            if lower != name:
                value = by_name.get(lower)
            elif len(_LOWER_CASE_NAMES) < _LOWER_CASE_NAMES_KEPT:
                _LOWER_CASE_NAMES.add(name)
        return default if value is None else value

    @property
    def content_type(self) -> str:
        """The Content-Type header, or ""."""
        return self.header("content-type")

    @property
    def host(self) -> str:
        """The Host header (X-Forwarded-Host first when proxies are trusted)."""
        if self.trust_proxy:
            forwarded = self.header("x-forwarded-host")
            if forwarded:
                return forwarded.split(",", 1)[0].strip()
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
        """Cookies sent by the client (SPEC §1.7: last duplicate wins, no URL-decoding)."""
        cookies = self._cookies
        if cookies is None:
            if self._headers is not None:  # middleware may have rewritten the headers
                lines = self._headers.getall("cookie")
            else:
                lines = [value for name, value in self._field_list() if name == "cookie"]
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

    def json(self) -> Any:
        """Parse the body as JSON; an empty or invalid body raises HTTPError(400)."""
        try:
            return orjson.loads(self.body)
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
