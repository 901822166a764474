"""The PEP 3333 `environ` of one request.

Strings in an environ are "bytes as latin-1": PATH_INFO is the percent-decoded path's bytes
decoded as latin-1 (a framework re-decodes it as UTF-8), headers are the latin-1 text they
were sent as. SCRIPT_NAME is where the app is mounted (`server.mount`) under the root path a
proxy strips (`--root-path`), and PATH_INFO what follows it.

With `trust_proxy`, what a proxy says about the original request (X-Forwarded-For/-Proto/-Host,
Forwarded) becomes REMOTE_ADDR, `wsgi.url_scheme` and HTTP_HOST, as werkzeug's ProxyFix would
make them. Header names with an underscore are dropped: as HTTP_* keys they would be
indistinguishable from the dashed name a proxy may have vetted (gunicorn does the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

from socketify.wsgi.file_wrapper import FileWrapper
from socketify.wsgi.streams import ErrorStream, InputStream

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.protocol.http.heads import RequestHead

__all__ = ["EnvironBuilder", "wsgi_path"]

_DEFAULT_PORTS = {"http": "80", "https": "443"}
_NAMES_KEPT = 1024  # header names whose environ key is remembered
_HEADS_KEPT = 256  # heads whose environ is remembered (a head holds its cookies: kept few)


def wsgi_path(raw_path: str) -> str:
    """The percent-decoded path, as the latin-1 text of its bytes (a WSGI string)."""
    if "%" not in raw_path:
        return raw_path
    return unquote_to_bytes(raw_path).decode("latin-1")


def _environ_key(name: str) -> str | None:
    """`HTTP_X_TOKEN` for `x-token`; None for a name a WSGI app must not see."""
    if "_" in name:
        return None
    if name == "content-type":
        return "CONTENT_TYPE"
    if name == "content-length":
        return "CONTENT_LENGTH"
    return "HTTP_" + name.upper().replace("-", "_")


class EnvironBuilder:
    """Makes the environ of each request for an app mounted at `mount_path` under `root_path`."""

    __slots__ = ("_heads", "_hosts", "_keys", "_template", "mount_path", "root_path")

    def __init__(self, mount_path: str = "", root_path: str = "") -> None:
        self.mount_path = wsgi_path(mount_path.rstrip("/"))
        self.root_path = wsgi_path(root_path.rstrip("/"))
        # What every request's environ starts with; copied, never changed.
        self._template: dict[str, Any] = {
            "wsgi.version": (1, 0),
            "wsgi.errors": ErrorStream(),
            "wsgi.multithread": True,  # requests run side by side, in greenlets
            "wsgi.multiprocess": True,  # ... and in several worker processes
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,  # the input ends with the body, chunked too
            "wsgi.file_wrapper": FileWrapper,
            "SCRIPT_NAME": self.root_path + self.mount_path,
        }
        self._keys: dict[str, str | None] = {}
        # PERF: clients name the same few hosts: each (Host, scheme) is split once; immutable.
        # It keeps a head that is never repeated (HTTP/2's, a new URL) as cheap as before.
        self._hosts: dict[tuple[str, str], tuple[str, str]] = {}
        # PERF: a client repeats its head, and the parser hands out the same immutable
        # `RequestHead` for the same bytes: everything an environ takes from the head (and the
        # connection's scheme) is worked out once per head, and each request copies it. The
        # dicts kept are never changed after they are made. Keyed by the head object itself
        # (which the key keeps alive, so it is never mistaken for another); bounded.
        self._heads: dict[tuple[RequestHead, str], dict[str, Any]] = {}

    def build(self, req: Request) -> dict[str, Any]:
        """The environ for `req`; its `wsgi.input` reads the body on demand."""
        if req.headers_changed:  # middleware changed what the head says: nothing to reuse
            environ = self._from_head(req)
        else:
            key = (req.head, req.scheme)
            known = self._heads.get(key)
            if known is None:
                known = self._from_head(req)
                if len(self._heads) >= _HEADS_KEPT:
                    self._heads.clear()
                self._heads[key] = known
            environ = known.copy()
        environ["wsgi.input"] = InputStream(req.iter_body)
        environ["REMOTE_ADDR"] = req.remote_ip if req.trust_proxy else req.remote_addr
        return environ

    def _from_head(self, req: Request) -> dict[str, Any]:
        """What the environ of `req` takes from its head, its headers and its scheme."""
        head = req.head
        environ = self._template.copy()
        path = wsgi_path(head.path)
        root = self.root_path
        if root and (path == root or path.startswith(root + "/")):
            path = path[len(root) :]  # the proxy did not strip its prefix: we do
        mount = self.mount_path
        if mount:
            path = path[len(mount) :] if path.startswith(mount) else path
        environ["PATH_INFO"] = path
        environ["REQUEST_METHOD"] = head.method
        environ["QUERY_STRING"] = head.query_string
        environ["SERVER_PROTOCOL"] = head.version
        keys = self._keys
        for name, value in req.header_fields():
            key = keys.get(name, "")
            if key == "":
                key = _environ_key(name)
                if len(keys) < _NAMES_KEPT:
                    keys[name] = key
            if key is None:
                continue
            seen = environ.get(key)
            if seen is None:
                environ[key] = value
            else:
                environ[key] = f"{seen}{'; ' if key == 'HTTP_COOKIE' else ', '}{value}"
        if head.chunked:
            environ.pop("CONTENT_LENGTH", None)  # the length is not known: read to the end
        scheme = environ["wsgi.url_scheme"] = req.scheme
        if req.trust_proxy:
            host = req.host
            if host:
                environ["HTTP_HOST"] = host
        else:
            host = environ.get("HTTP_HOST", "")
        hosts = self._hosts
        server = hosts.get((host, scheme))
        if server is None:
            server = _server_name_and_port(host, scheme)
            if len(hosts) >= _NAMES_KEPT:
                hosts.clear()
            hosts[host, scheme] = server
        environ["SERVER_NAME"], environ["SERVER_PORT"] = server
        return environ


def _server_name_and_port(host: str, scheme: str) -> tuple[str, str]:
    """SERVER_NAME and SERVER_PORT for a Host header: ("localhost", "80") for none."""
    name, port = _split_host(host)
    return name or "localhost", port or _DEFAULT_PORTS.get(scheme, "80")


def _split_host(host: str) -> tuple[str, str]:
    """("example.com", "8080") for "example.com:8080"; IPv6 literals keep their brackets."""
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest[1:] if rest.startswith(":") else ""
    name, _, port = host.partition(":")
    return name, port if port.isdigit() else ""
