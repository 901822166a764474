"""The built-in middleware in one app: access log, request id, CORS, rate limit, sessions, and a
per-route API-key check.

    socketify run examples.middleware_stack:server --bind 127.0.0.1:8080 --workers 2
    curl -i localhost:8080/                         # X-Request-Id, RateLimit-*, CORS headers
    curl -c jar -b jar localhost:8080/visits        # {"visits":1,"session_id":"..."}
    curl -c jar -b jar localhost:8080/visits        # {"visits":2,...}, whichever worker answers
    curl localhost:8080/admin                       # 401 {"error":"missing or bad X-Api-Key"}
    curl -H 'X-Api-Key: secret' localhost:8080/admin   # {"admin":true}

Settings come from the environment or a `.env` file (`socketify.config.Config`):
`ADMIN_API_KEY` (default `secret`: set your own) and
`SESSION_SECRET`, which signs the session cookie.

Nothing here lives in a per-process dict, because with `--workers 2` consecutive requests of
one client land on different processes: the session (and so the visit counter) is kept in the
cross-worker store, and the rate limiter's token buckets are too, so a client gets 10 requests
in a burst and 1 more per second in total, not 10 per worker. (A session is loaded when a
request starts and saved when it ends, so two requests of one session at the same instant
count one visit; a counter that must never miss belongs in `SharedStore().incr`.)

Guides: docs/guide/middleware.md, docs/guide/sessions.md, docs/guide/shared-state.md.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from socketify import Request, Response, Server, cors, ratelimit
from socketify import logging as access_log
from socketify.config import Config
from socketify.middleware import request_id
from socketify.state import sessions

settings = Config.load()
ADMIN_API_KEY = settings.get_or("ADMIN_API_KEY", "secret")
SESSION_SECRET = settings.get_or("SESSION_SECRET", "middleware-stack example: set SESSION_SECRET")

server = Server()
# Order matters: the access log sees the final status of everything below it, including the
# 429s of the rate limiter; the request id is set before anything could log or fail.
server.use(access_log.middleware(format="dev"))
server.use(request_id())
server.use(cors.middleware())
server.use(ratelimit.middleware(capacity=10, refill_per_second=1))
server.use(sessions.middleware(secret=SESSION_SECRET))


def require_api_key(req: Request, res: Response, next: Callable[[], None]) -> None:
    """Per-route middleware: the request must carry `X-Api-Key: <ADMIN_API_KEY>`."""
    given = req.header("X-Api-Key").encode()
    # Compared in constant time, so the key cannot be guessed byte by byte from timings.
    if not hmac.compare_digest(given, ADMIN_API_KEY.encode()):
        res.json_error(401, "missing or bad X-Api-Key")
        return
    next()


@server.get("/")
def index(req: Request, res: Response) -> None:
    res.send("Try GET /visits (keep the cookie) and GET /admin with an X-Api-Key header.\n")


@server.get("/visits")
def visits(req: Request, res: Response) -> None:
    count = int(req.session.get("visits", 0)) + 1
    req.session["visits"] = count
    res.json({"visits": count, "session_id": req.session.id})


def admin(req: Request, res: Response) -> None:
    res.json({"admin": True})


server.get("/admin", admin).use(require_api_key)


if __name__ == "__main__":
    server.listen(8080, host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
