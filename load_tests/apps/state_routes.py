"""Routes for the cross-worker state bars: `socketify run load_tests.apps.state_routes:server`.

`/ping` is the same answer as `ping.py`; `/session` reads and writes a session (store strategy,
the default cross-worker store); `/limited` takes a token from a global rate limit whose
bucket never runs dry (so every answer is a 200 and the cost measured is the store's).
"""

from socketify import Server
from socketify.middleware.ratelimit import middleware as ratelimit
from socketify.state import sessions
from socketify.state.shared_store import SharedStore

server = Server(compression=False)


@server.get("/ping")
def ping(req, res):
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def session_route(req, res):
    session = req.session
    session["n"] = session.get("n", 0) + 1
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


server.get("/session", session_route).use(sessions.middleware(secret="load-test-secret-" * 2))
server.get("/limited", ping).use(
    ratelimit(capacity=1e12, refill_per_second=1e9, store=SharedStore("bench:"))
)
