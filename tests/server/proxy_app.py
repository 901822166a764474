"""The app behind a PROXY protocol load balancer: it answers with what it knows of its client.

`socketify run tests.server.proxy_app:server --proxy-protocol` expects the header on every
bind; `per_bind` expects it only on the bind named by the PROXY_BIND environment variable.
"""

from __future__ import annotations

import os

from socketify import Request, Response, Server


def who(req: Request, res: Response) -> None:
    header = req.proxy_header
    tls = header.tls if header is not None else None
    res.json(
        {
            "remote_addr": req.remote_addr,
            "scheme": req.scheme,
            "version": header.version if header else None,
            "command": header.command if header else None,
            "source": list(header.source) if header and header.source else None,
            "destination": list(header.destination) if header and header.destination else None,
            "alpn": header.alpn if header else None,
            "authority": header.authority if header else None,
            "unique_id": header.unique_id.decode() if header and header.unique_id else None,
            "tls_version": tls.version if tls else None,
            "tls_client_ssl": tls.client_ssl if tls else None,
        }
    )


def ping(req: Request, res: Response) -> None:
    res.send("pong")


def _server(**options: object) -> Server:
    app = Server(header_timeout=1.0, **options)  # type: ignore[arg-type]
    app.get("/who", who)
    app.get("/ping", ping)
    return app


server = _server()
per_bind = _server(proxy_protocol=[os.environ.get("PROXY_BIND", "127.0.0.1:1")])
misconfigured = _server(proxy_protocol=["127.0.0.1:notaport"])
