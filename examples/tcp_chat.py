"""A line-based chat over raw TCP: what one client sends, every other client gets, on any worker.

    socketify run examples.tcp_chat:service --bind 127.0.0.1:7001 --workers 2
    nc 127.0.0.1 7001          # in two terminals: say `/nick ada`, then anything

The first line a client sends may be `/nick NAME`; every later line goes to all the others as
`NAME: text`. Messages cross workers on the master's shared bus (`default_bus()`), so two
clients accepted by different workers still talk. Each client has a bounded outbox drained by
its own greenlet: one that stops reading is dropped instead of holding everyone up. When the
server stops or reloads, each client is told so, behind what it was sent before, and its
connection ends at once instead of holding the old worker.

`examples.tcp_chat:site` serves the chat beside an HTTP app on one master:

    socketify run examples.tcp_chat:site --bind 127.0.0.1:8080    # chat on 127.0.0.1:7001
    curl 127.0.0.1:8080/                                           # how to join

Guide: docs/guide/tcp.md.
"""

from __future__ import annotations

import contextlib
import itertools
import os

import gevent
import gevent.queue

from socketify import Server, tcp
from socketify.state.shared_bus import default_bus

CHANNEL = "tcp-chat"
OUTBOX = 256  # lines a client may fall behind before it is dropped
MAX_LINE = 2048
CHAT_BIND = os.environ.get("CHAT_BIND", "127.0.0.1:7001")

_ids = itertools.count(1)


def chat(conn: tcp.StreamConnection) -> None:
    """Relay this client's lines to everyone else until it leaves."""
    me = f"{os.getpid()}-{next(_ids)}".encode()
    outbox: gevent.queue.Queue[bytes | None] = gevent.queue.Queue(OUTBOX)

    def deliver(payload: bytes) -> None:
        sender, _, line = payload.partition(b" ")
        if sender == me:
            return
        try:
            outbox.put_nowait(line)
        except gevent.queue.Full:
            conn.close()  # too slow to keep up: the reader below ends with an error

    def write() -> None:
        while (line := outbox.get()) is not None:
            conn.send(line)

    def goodbye(conn: tcp.StreamConnection) -> None:
        # The server stops or reloads: the last line goes out behind the queued ones, then
        # closing ends the read loop below (a reload's new workers take the reconnection).
        with contextlib.suppress(gevent.queue.Full):  # full: it was being dropped anyway
            outbox.put_nowait(b"* the server is restarting; reconnect in a moment\n")
            outbox.put_nowait(None)
        writer.join(timeout=1)
        conn.close()

    bus = default_bus()
    name = b"guest-" + me
    conn.send(b"welcome; /nick NAME to choose a name\n")
    subscription = bus.subscribe(CHANNEL, deliver)
    writer = gevent.spawn(write)
    conn.on_stop(goodbye)
    try:
        for line in tcp.lines(conn, max_line=MAX_LINE):
            if line.startswith(b"/nick "):
                name = line[6:].strip()[:32] or name
                outbox.put_nowait(b"you are " + name + b"\n")
            elif line:
                bus.publish(CHANNEL, me + b" " + name + b": " + line + b"\n")
    except tcp.LineTooLong as exc:
        conn.send(f"error: {exc}\n".encode())
    finally:
        subscription.cancel()
        outbox.put(None)
        writer.join(timeout=1)
        writer.kill(block=False)


service = tcp.Service(chat, idle_timeout=3600)

web = Server()


@web.get("/")
def index(req, res):  # type: ignore[no-untyped-def]
    res.send(f"chat: nc {CHAT_BIND.replace(':', ' ')}\n")


site = tcp.Bundle(web, {CHAT_BIND: service})
