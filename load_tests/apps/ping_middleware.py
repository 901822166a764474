"""/ping with and without the common middleware stack, for load_tests/middleware_overhead.py.

`bare`: the /ping of load_tests/apps/ping.py with default server options (compression on, as
users get it); `stacked`: the same plus access logging, request ids and CORS, as
`logging.middleware()`, `request_id()` and `cors.middleware(allow_origin="*")` give them.
"""

from __future__ import annotations

from socketify import Request, Response, Server, cors, logging
from socketify.middleware import request_id


def _ping(req: Request, res: Response) -> None:
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


bare = Server()
bare.get("/ping", _ping)

stacked = Server()
stacked.use(logging.middleware())
stacked.use(request_id())
stacked.use(cors.middleware(allow_origin="*"))
stacked.get("/ping", _ping)

# Each middleware of the stack alone, to see what each costs.
logged = Server()
logged.use(logging.middleware())
logged.get("/ping", _ping)

with_id = Server()
with_id.use(request_id())
with_id.get("/ping", _ping)

with_cors = Server()
with_cors.use(cors.middleware(allow_origin="*"))
with_cors.get("/ping", _ping)
