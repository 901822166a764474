"""`ServerOptions`: every knob of a `Server`, validated once and frozen."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

__all__ = ["ServerOptions", "checked_proxy_options"]

_POSITIVE_SECONDS = (
    "header_timeout",
    "body_timeout",
    "idle_timeout",
    "graceful_timeout",
    "timeout",
    "http2_send_timeout",
)
_POSITIVE_SIZES = (
    "max_header_size",
    "max_target_size",
    "max_body_size",
    "max_json_size",
    "max_connections",
    "backlog",
    "http2_max_concurrent_streams",
    "http2_max_resets_per_second",
    "http2_max_pings_per_second",
    "http2_max_settings_per_second",
)
# HTTP/2 lets SETTINGS_MAX_FRAME_SIZE range from 2**14 to 2**24 - 1 only.
_FRAME_SIZES = range(1 << 14, 1 << 24)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Server settings; durations are seconds, sizes are bytes.

    An unknown keyword raises `TypeError` (the dataclass constructor does that for us), a value
    out of range raises `ValueError`, so a typo never silently falls back to a default.
    """

    workers: int | None = None  # None: one per CPU; 0: serve in the master process
    header_timeout: float = 15.0
    body_timeout: float = 30.0
    idle_timeout: float = 60.0
    request_timeout: float | None = None
    graceful_timeout: float = 30.0
    max_header_size: int = 16384
    max_target_size: int = 8192
    max_body_size: int = 16 * 1024 * 1024
    # What `req.json()` parses at most: parsed JSON takes 15-40 times the memory of its
    # text, so a body max_body_size allows could cost a worker hundreds of MiB.
    max_json_size: int = 1024 * 1024
    max_connections: int = 10_000
    compression: Any = True  # bool or a CompressionOptions
    # Request heads end their lines with CRLF; a bare LF is refused (400) because a proxy in
    # front that reads only CRLF as a line end would see other headers than we do. True
    # accepts bare LF in the head, for old clients that reach the server directly.
    allow_bare_lf: bool = False
    trust_proxy: bool = False
    debug: bool = False
    tls: Any = None  # None or a TlsOptions
    timeout: float = 30.0  # worker heartbeat: a silent worker is replaced after this
    max_requests: int = 0
    max_requests_jitter: int = 0
    backlog: int = 2048
    # HTTP/2: over TLS when ALPN picks it, and as cleartext h2c for
    # clients that start with the HTTP/2 preface. The header list is bounded by
    # max_header_size, the body by max_body_size, as for HTTP/1.1.
    http2: bool = True
    http2_max_concurrent_streams: int = 100  # more at once are refused (REFUSED_STREAM)
    # Per second and connection, past which the client gets GOAWAY ENHANCE_YOUR_CALM:
    http2_max_resets_per_second: int = 100  # streams it resets (the rapid-reset attack)
    http2_max_pings_per_second: int = 50
    http2_max_settings_per_second: int = 50
    http2_max_frame_size: int = 16384  # the largest frame we accept (FRAME_SIZE_ERROR past it)
    http2_send_timeout: float = 30.0  # an answer stalled on a zero window is reset after this
    # PROXY protocol (v1 and v2, from HAProxy or a TCP load balancer): True makes every bind
    # expect the header before anything else; a list of bind specs ("127.0.0.1:8001",
    # "unix:/run/app.sock") only those. Only peers in `proxy_allow` (networks) may send it;
    # other connections to such a bind are closed unread.
    proxy_protocol: Any = False
    proxy_allow: Any = ("127.0.0.0/8", "::1")
    templates: Any = None  # None or the folder `res.render` reads Jinja2 templates from
    # Metrics and health (`socketify.metrics`): the master's private listener, e.g.
    # "127.0.0.1:9100" (None: off), and the request duration histogram's bucket bounds.
    metrics_bind: str | None = None
    metrics_buckets: Any = None  # None (the defaults) or increasing seconds

    def __post_init__(self) -> None:
        for name in _POSITIVE_SECONDS + _POSITIVE_SIZES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if self.request_timeout is not None and not self.request_timeout > 0:
            raise ValueError(f"request_timeout must be > 0 or None, got {self.request_timeout!r}")
        if self.workers is not None and (not isinstance(self.workers, int) or self.workers < 0):
            raise ValueError(f"workers must be None or an int >= 0, got {self.workers!r}")
        frame_size = self.http2_max_frame_size
        if isinstance(frame_size, bool) or frame_size not in _FRAME_SIZES:
            raise ValueError(f"http2_max_frame_size must be 16384 to 16777215, not {frame_size!r}")
        self._check_proxy()
        if self.metrics_bind is not None and not isinstance(self.metrics_bind, str):
            raise ValueError(f"metrics_bind must be a HOST:PORT string, got {self.metrics_bind!r}")
        if self.metrics_buckets is not None:
            buckets = tuple(self.metrics_buckets)
            if not buckets or list(buckets) != sorted(set(buckets)):
                raise ValueError(f"metrics_buckets must increase, got {self.metrics_buckets!r}")
            object.__setattr__(self, "metrics_buckets", buckets)
        for name in ("max_requests", "max_requests_jitter"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")

    def _check_proxy(self) -> None:
        protocol, allow = checked_proxy_options(self.proxy_protocol, self.proxy_allow)
        object.__setattr__(self, "proxy_protocol", protocol)
        object.__setattr__(self, "proxy_allow", allow)


def checked_proxy_options(protocol: Any, allow: Any) -> tuple[Any, tuple[str, ...]]:
    """`proxy_protocol` and `proxy_allow` as stored (see `ServerOptions`); ValueError if bad.

    Lists and comma-separated strings become tuples, so the options stay immutable.
    """
    binds = protocol
    if isinstance(binds, str):
        binds = [part for part in binds.split(",") if part.strip()]
    if not isinstance(binds, bool):
        if not isinstance(binds, list | tuple) or not all(isinstance(b, str) for b in binds):
            raise ValueError(
                f"proxy_protocol must be True, False or a list of binds, got {binds!r}"
            )
        binds = tuple(b.strip() for b in binds)
    if isinstance(allow, str):
        allow = allow.split(",")
    networks = []
    for network in allow:
        try:
            networks.append(str(ipaddress.ip_network(str(network).strip(), strict=False)))
        except ValueError:
            raise ValueError(f"proxy_allow: {network!r} is not a network") from None
    return binds, tuple(networks)
