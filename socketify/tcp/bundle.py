"""`Bundle`: an HTTP app and TCP services on different binds, served by one master.

    site = tcp.Bundle(server, {"0.0.0.0:7000": chat_service})

`socketify run module:site --bind 0.0.0.0:8080` binds the `--bind` addresses for the HTTP app
and each TCP service's own binds beside them; every worker serves all of them, telling the
sockets apart by their bound address. The HTTP app's options (workers, timeouts, TLS) are
the master's; each TCP service keeps its own connection options and TLS.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from socketify.tcp.service import Service
from workers.supervise.sockets import TcpAddress, UnixAddress, parse_bind

if TYPE_CHECKING:
    from socketify.core.application import Application
    from socketify.core.options import ServerOptions

__all__ = ["Bundle"]


class Bundle:
    """An HTTP app plus TCP services, each on binds of its own (explicit ports, no port 0)."""

    def __init__(self, http: Application, tcp: Mapping[str, Service]) -> None:
        self.http = http
        self.tcp: dict[str, Service] = {}
        self._addresses: list[tuple[TcpAddress | UnixAddress, Service]] = []
        for spec, service in tcp.items():
            if not isinstance(service, Service):
                raise TypeError(f"the service on {spec!r} is a {type(service).__name__}")
            address = parse_bind(spec)
            if isinstance(address, TcpAddress) and address.port == 0:
                # Workers match sockets to services by bound address; port 0 could be any.
                raise ValueError(f"TCP bind {spec!r} needs an explicit port")
            self.tcp[spec] = service
            self._addresses.append((address, service))

    @property
    def settings(self) -> ServerOptions:
        """The HTTP app's options: they set the master's workers, timeouts and TLS."""
        return self.http.settings

    @property
    def tcp_binds(self) -> list[str]:
        """The binds the master opens for the TCP services."""
        return list(self.tcp)

    def service_for(self, bound: Any) -> Service | None:
        """The TCP service of a socket bound to `bound` (`getsockname()`), or None for HTTP."""
        for address, service in self._addresses:
            if isinstance(address, UnixAddress):
                if bound == address.path:
                    return service
            elif isinstance(bound, tuple) and (bound[0], bound[1]) == (address.host, address.port):
                return service
        return None

    def __repr__(self) -> str:
        return f"<tcp.Bundle http + {', '.join(self.tcp)}>"
