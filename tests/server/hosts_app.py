"""Per-host routers behind TLS with several certificates (see test_hosts_live.py).

The certificates come from HOSTS_TEST_PKI: `server.crt` (localhost, 127.0.0.1) by default,
`sni.crt` for sni.example.test and `api.crt` for api.example.test, chosen by SNI.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from socketify import Request, Response, Server
from socketify.core.tls_options import TlsOptions


def _tls() -> TlsOptions | None:
    where = os.environ.get("HOSTS_TEST_PKI")
    if not where:
        return None

    def pair(stem: str) -> tuple[str, str]:
        return os.path.join(where, f"{stem}.crt"), os.path.join(where, f"{stem}.key")

    cert, key = pair("server")
    return TlsOptions(
        cert_file=cert,
        key_file=key,
        sni={"sni.example.test": pair("sni"), "api.example.test": pair("api")},
    )


def answer(name: str) -> Callable[[Request, Response], None]:
    def handler(req: Request, res: Response) -> None:
        res.json({"router": name, "server_name": req.server_name, "scheme": req.scheme})

    return handler


server = Server(tls=_tls())
server.get("/", answer("default"))
server.host("api.example.test").get("/", answer("api"))
server.host("*.example.test").get("/", answer("wildcard"))
