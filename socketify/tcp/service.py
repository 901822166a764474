"""`Service`: a connection handler and the options it is served with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from socketify.core.options import checked_proxy_options

if TYPE_CHECKING:
    from socketify.core.tls_options import TlsOptions
    from socketify.tcp.connection import StreamConnection

__all__ = ["Handler", "Service", "ServiceOptions"]

Handler = Callable[["StreamConnection"], Any]


@dataclass(frozen=True)
class ServiceOptions:
    """How a TCP service is served; the master-side ones mean what they mean for HTTP apps.

    `idle_timeout` closes a connection on which no read or write made progress for that many
    seconds (None: never). `max_requests` recycles a worker after that many connections.
    """

    workers: int | None = None  # None: one per CPU; 0: serve in the master process
    idle_timeout: float | None = 300.0
    handshake_timeout: float = 10.0  # a TLS client must finish its handshake within this
    graceful_timeout: float = 30.0
    timeout: float = 30.0  # worker heartbeat: a silent worker is replaced after this
    max_connections: int = 10_000  # per worker; more wait in the listen backlog
    max_line: int = 65536  # readline's bound
    max_requests: int = 0
    max_requests_jitter: int = 0
    backlog: int = 2048
    tls: TlsOptions | None = None
    # PROXY protocol, as for HTTP (`ServerOptions`): True, or the binds that expect the
    # header; `handler(conn)` then sees the client's address as `conn.peer`.
    proxy_protocol: Any = False
    proxy_allow: Any = ("127.0.0.0/8", "::1")
    # Tells the command line these options serve raw TCP, not HTTP.
    tcp: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.workers is not None and (not isinstance(self.workers, int) or self.workers < 0):
            raise ValueError(f"workers must be None or an int >= 0, got {self.workers!r}")
        if self.idle_timeout is not None and not self.idle_timeout > 0:
            raise ValueError(f"idle_timeout must be > 0 or None, got {self.idle_timeout!r}")
        for name in ("handshake_timeout", "timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not self.graceful_timeout >= 0:
            raise ValueError(f"graceful_timeout must be >= 0, got {self.graceful_timeout!r}")
        for name in ("max_connections", "max_line", "backlog"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for name in ("max_requests", "max_requests_jitter"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        protocol, allow = checked_proxy_options(self.proxy_protocol, self.proxy_allow)
        object.__setattr__(self, "proxy_protocol", protocol)
        object.__setattr__(self, "proxy_allow", allow)


class Service:
    """A TCP service: `handler(conn)` runs in its own greenlet for every accepted connection.

    The connection is closed when the handler returns or raises. Keyword arguments are
    `ServiceOptions` (an unknown one raises TypeError).
    """

    def __init__(self, handler: Handler, **options: Any) -> None:
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {type(handler).__name__}")
        self.handler = handler
        self.settings = ServiceOptions(**options)

    def __repr__(self) -> str:
        name = getattr(self.handler, "__qualname__", repr(self.handler))
        return f"<tcp.Service {name}>"
