"""The TLS tests' app, served by the real `socketify run` (see conftest.py and tls_clients.py).

The certificates come from the directory named by TLS_TEST_PKI (written by the `pki` fixture),
so each Server below can carry its own TlsOptions. `plain` has none: the tests give it TLS
from the command line or the environment instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from socketify import Request, Response, Server
from socketify.core.tls_options import TlsOptions

SNI_HOST = "sni.example.test"  # the same name as pki.SNI_HOST (this module runs in the server)
SHORT = {"header_timeout": 1.0, "body_timeout": 1.0, "idle_timeout": 2.0, "graceful_timeout": 3.0}


def _tls(min_version: str = "TLSv1.2") -> TlsOptions | None:
    where = os.environ.get("TLS_TEST_PKI")
    if not where:
        return None
    return TlsOptions(
        cert_file=os.path.join(where, "server.crt"),
        key_file=os.path.join(where, "server.key"),
        sni={SNI_HOST: (os.path.join(where, "sni.crt"), os.path.join(where, "sni.key"))},
        min_version=min_version,
    )


def ping(req: Request, res: Response) -> None:
    res.send("pong")


def echo(req: Request, res: Response) -> None:
    res.set_header("X-Scheme", req.scheme).send(req.body, "application/octet-stream")


def whoami(req: Request, res: Response) -> None:
    """The scheme and the common name of the verified client certificate, if any."""
    common_name = None
    if req.client_cert is not None:
        for rdn in req.client_cert["subject"]:
            for key, value in rdn:
                if key == "commonName":
                    common_name = value
    res.json({"scheme": req.scheme, "client": common_name, "pid": os.getpid()})


def file(req: Request, res: Response) -> None:
    if not res.send_file(req.query["path"]):
        res.send_status(404)


def big(req: Request, res: Response) -> None:
    """`n` MiB of a repeating 251-byte pattern in one body (not a file: one large send)."""
    size = int(req.query.get("mb", "8")) << 20
    pattern = bytes(range(251))
    res.send((pattern * (size // len(pattern) + 1))[:size], "application/octet-stream")


def stream(req: Request, res: Response) -> None:
    count = int(req.query.get("n", "5"))

    def produce() -> Iterator[bytes]:
        for index in range(count):
            yield f"part {index};".encode()
            time.sleep(0.02)  # gevent-patched: each chunk goes out on its own

    res.stream(produce())


def build(server: Server) -> Server:
    """Register the routes on `server`."""
    server.get("/ping", ping)
    server.any("/echo", echo)
    server.get("/whoami", whoami)
    server.get("/file", file)
    server.get("/stream", stream)
    server.get("/big", big)
    return server


# HTTPS with an SNI certificate; TLS 1.2 and 1.3.
server = build(Server(**SHORT, tls=_tls()))
# TLS 1.3 only.
modern = build(Server(**SHORT, tls=_tls(min_version="TLSv1.3")))
# A long idle_timeout beside a short header_timeout: which of the two bounds a handshake.
patient = build(Server(**{**SHORT, "idle_timeout": 60.0}, tls=_tls()))
# No TLS of its own: --certfile/--keyfile/--ca-file or SOCKETIFY_CERT_FILE/KEY_FILE give it.
plain = build(Server(**SHORT))
