"""HTTPS only: the smallest app served over TLS.

Make a self-signed certificate for localhost (RSA-2048, valid 365 days) in the working
directory, then serve and ask:

    openssl req -x509 -newkey rsa:2048 -nodes -days 365 -keyout server.key -out server.crt \\
        -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1"
    socketify run examples.https_hello:server --bind 127.0.0.1:8443 --workers 2
    curl --cacert server.crt https://localhost:8443/    # {"secure":true,"client":"127.0.0.1"}

The certificate and key are `SOCKETIFY_CERT_FILE` and `SOCKETIFY_KEY_FILE` when both are set
(`TlsOptions.from_env()`), otherwise `server.crt` and `server.key` in the working directory.
Without them the server refuses to start and says which file it could not load, rather than
falling back to plain HTTP. `--certfile/--keyfile` on the command line work as well. TLS
1.2 is the minimum. Every worker loads the same files and there is no state to share.

`secure` is what the connection really is (`req.scheme`), not a constant: behind a TLS
terminating proxy, set `trust_proxy` and the proxy's `X-Forwarded-Proto` decides.

Guide: docs/guide/https.md.
"""

from __future__ import annotations

from socketify import Request, Response, Server
from socketify.core.tls_options import TlsOptions


def tls_options() -> TlsOptions:
    """The environment's certificate, else `server.crt`/`server.key` in the working directory."""
    return TlsOptions.from_env() or TlsOptions(cert_file="server.crt", key_file="server.key")


server = Server(tls=tls_options())


@server.get("/")
def index(req: Request, res: Response) -> None:
    res.json({"secure": req.scheme == "https", "client": req.remote_ip})


if __name__ == "__main__":
    server.listen(8443, host="127.0.0.1")
    print(f"Serving on https://127.0.0.1:{server.port}")
    server.wait()
