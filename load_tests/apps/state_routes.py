"""Routes for the cross-worker state bars: `socketify run load_tests.apps.state_routes:server`.

`/ping` is the same answer as `ping.py`; `/session` reads and writes a session (store strategy,
the default cross-worker store); `/limited` takes a token from a global rate limit whose
bucket never runs dry (so every answer is a 200 and the cost measured is the store's).

The hot-session experiment (`load_tests/faults.py hot-session`) uses `/hot`: every request
changes a session of about 300 bytes (a counter and a note), and with `?c=NAME` also counts
its own requests under the key `c:NAME`, which only that client writes; `/hot/peek` shows
the session and `/hot/count` how many sessions the store holds.
"""

import os

from socketify import Server
from socketify.middleware.ratelimit import middleware as ratelimit
from socketify.state import sessions
from socketify.state.shared_store import SharedStore

server = Server(compression=False)
NOTE = 260  # characters of note: with the counter, a session of about 300 bytes of JSON


@server.get("/ping")
def ping(req, res):
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def session_route(req, res):
    session = req.session
    session["n"] = session.get("n", 0) + 1
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def hot(req, res):
    session = req.session
    n = session.get("n", 0) + 1
    session["n"] = n
    session["note"] = f"{os.getpid()}:{n}:".ljust(NOTE, "x")
    name = req.query.get("c")
    if name:
        key = f"c:{name}"
        session[key] = session.get(key, 0) + 1
        res.json({"mine": session[key]})
        return
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def hot_peek(req, res):
    res.json(dict(req.session))


def hot_count(req, res):
    res.json({"sessions": SharedStore().count_prefix("sess:")})


session_middleware = sessions.middleware(secret="load-test-secret-" * 2)
server.get("/session", session_route).use(session_middleware)
server.get("/hot", hot).use(session_middleware)
server.get("/hot/peek", hot_peek).use(session_middleware)
server.get("/hot/count", hot_count)
server.get("/limited", ping).use(
    ratelimit(capacity=1e12, refill_per_second=1e9, store=SharedStore("bench:"))
)
