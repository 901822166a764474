"""Hub fan-out app for `load_tests/bench_websocket_hub.py`: one room, two ways to reach it.

Every connection to `/room` joins the room `bench` and is told `pid:N`. A text message
`hub <payload>` is broadcast with `Hub.broadcast_text` (the frame is encoded once, published
once on the cross-worker bus, and written as is to each member on each worker). A text
message `naive <payload>` takes the path a hub saves: the text is published on the bus as
text and every worker calls `send_text` for each of its members, encoding a frame per member.
"""

import os

from socketify import Server
from socketify.realtime import pulse
from socketify.state.shared_bus import default_bus

server = Server(compression=False)
hub = pulse.Hub("bench")
ROOM = "bench"
NAIVE_TOPIC = "bench-naive"
members: dict[str, pulse.Channel] = {}  # this worker's members, for the naive path
_naive: list[object] = []  # the naive path's bus subscription, made in the worker on first use


@server.get("/ping")
def ping(req, res):
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def _send_to_each(payload):
    text = payload.decode()
    for ch in list(members.values()):
        ch.send_text(text)


def _on_text(ch, text):
    if text.startswith("hub "):
        hub.broadcast_text(ROOM, text[4:])
    elif text.startswith("naive "):
        default_bus().publish(NAIVE_TOPIC, text[6:].encode())


def _left(ch, code, reason):
    members.pop(ch.id, None)


@server.get("/room")
def room(req, res):
    ch = pulse.upgrade(req, res)
    if ch is None:
        return
    if not _naive:
        _naive.append(default_bus().subscribe(NAIVE_TOPIC, _send_to_each))
    members[ch.id] = ch
    ch.on_close(_left)
    hub.join(ROOM, ch)
    ch.send_text(f"pid:{os.getpid()}")
    ch.on_text(_on_text)
