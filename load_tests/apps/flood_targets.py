"""The app the flood experiments run: `socketify run load_tests.apps.flood_targets:site`.

`/ping` answers small; `/pid` names the worker that answered, so a probe can tell a
replacement from the worker it started with; `/ws` is a WebSocket that echoes every text
message; `/large` answers `size` bytes (default 1 MiB) made afresh for each request, so a
client that opens many streams and reads none of them shows what the server holds for it.
Beside the HTTP app, a line-echo TCP service listens on 127.0.0.1:`FLOOD_TCP_PORT` (the
experiment picks the port and sets the variable).
"""

import os

from socketify import Server, tcp
from socketify.realtime import pulse

server = Server(compression=False)


@server.get("/ping")
def ping(req, res):
    res.send("pong")


@server.get("/pid")
def pid(req, res):
    res.send(str(os.getpid()))


@server.get("/large")
def large(req, res):
    size = int(req.query.get("size", str(1 << 20)))
    res.send(b"x" * size, "application/octet-stream")  # written: resident, unlike bytes(size)


def _echo(ch, text):
    ch.send_text(text)


@server.get("/ws")
def ws(req, res):
    ch = pulse.upgrade(req, res)
    if ch is not None:
        ch.on_text(_echo)


def echo_lines(conn):
    for line in tcp.lines(conn, keepends=True):
        conn.send(line)


TCP_BIND = f"127.0.0.1:{os.environ.get('FLOOD_TCP_PORT', '7707')}"
site = tcp.Bundle(server, {TCP_BIND: tcp.Service(echo_lines)})
