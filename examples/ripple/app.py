"""Ripple: a messenger over HTTPS and WSS — accounts, direct and group chats, history,
uploads, presence, typing, read receipts, unread counts and voice calls.

    python -m examples.ripple.devcert                  # ripple.crt + ripple.key, self-signed
    python -m examples.ripple --cert ripple.crt --key ripple.key     # https://127.0.0.1:8443/

or, with the settings in the environment or `.env` (see `examples.ripple.settings`):

    RIPPLE_CERT=ripple.crt RIPPLE_KEY=ripple.key \\
        socketify run examples.ripple.app:server --bind 127.0.0.1:8443 --workers 2

Without a certificate the server refuses to start: there is no plain-HTTP mode, since the
session cookie is `Secure` and browsers only give microphones to secure pages.

The pieces: `store` (Pony models on SQLite by default, through `socketify.db`), `api` (the
REST routes), `live` (the `/pulse` WebSocket: pulse.easy events and pulse.media voice frames
on a hub that spans the workers), `uploads`, and the page in `public/` (JavaScript modules,
nothing to build). Sessions live in the store every worker shares, so a user signed in on
one worker is signed in on all of them.

Guide: docs/guide/websocket.md, docs/guide/https.md.
"""

from __future__ import annotations

from pathlib import Path

import socketify.db
from examples.ripple import api, store
from examples.ripple.live import MAX_FRAME, connected, live
from examples.ripple.settings import SettingsError, from_environment
from socketify import Request, Response, Server, ratelimit, static_files
from socketify.core.tls_options import TlsError, TlsOptions
from socketify.realtime import pulse
from socketify.state import sessions

__all__ = ["server"]

PUBLIC = Path(__file__).resolve().parent / "public"
PULSE = "/pulse"

try:
    settings = from_environment()
except SettingsError as exc:
    # A TLS error is what `socketify run` reports in one line, before any worker starts.
    raise TlsError(str(exc)) from None

server = Server(tls=TlsOptions(cert_file=settings.cert, key_file=settings.key))
server.use(
    sessions.middleware(
        secret=settings.secret,
        cookie_name="ripple",
        cookie_secure=True,
        same_site="Strict",
        ttl=7 * 86400,
    )
)
server.use(static_files.serve(str(PUBLIC), cache_max_age=60))


def _auth_limit(req: Request) -> str | None:
    # Only guesses at passwords are limited; everything else goes through untouched.
    return req.remote_ip if req.path in ("/api/login", "/api/register") else None


server.use(ratelimit.middleware(capacity=20, refill_per_second=0.5, key=_auth_limit))
# A database session per API request. Not around the live socket: its handlers open their
# own, one per event, since a connection lasts far longer than any transaction should.
rest = server.group("/api").use(socketify.db.middleware(store.db))
for method, path, handler in api.ROUTES:
    if path.startswith("/api/"):
        rest.route(method, path.removeprefix("/api"), handler)
    else:
        server.route(method, path, handler)


@server.get(PULSE)
def pulse_socket(req: Request, res: Response) -> None:
    """A signed-in page of this very site opens its live connection."""
    # Cookies ride along with a cross-site WebSocket too: the Origin tells them apart.
    if req.header("origin") != f"https://{req.host}":
        res.json_error(403, "wrong origin")
        return
    user = api.signed_in(req)
    if user is None:
        res.json_error(401, "sign in first")
        return
    channel = pulse.upgrade(req, res, max_message_bytes=MAX_FRAME, idle_timeout=60)
    if channel is not None:
        connected(live.adopt(channel), user)
