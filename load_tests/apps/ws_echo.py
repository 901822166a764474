"""Our WebSocket echo app: `socketify run load_tests.apps.ws_echo:server`.

- `GET /echo`: permessage-deflate on (any valid offer accepted), 64 MiB messages, echoes each
  message with its type. The Autobahn fuzzing client runs against it (`load_tests/autobahn.py`).
- `GET /pong`: the echo benchmark's route: default options, compression off, text echo.
- `GET /ping`: plain HTTP, so the load-test harness can tell when the server is up.
"""

from socketify import Server
from socketify.realtime import pulse

server = Server(compression=False)

# Autobahn case 9.x sends messages up to 16 MiB; 12.*/13.* up to 128 KiB, compressed.
MAX_MESSAGE_BYTES = 64 << 20


@server.get("/ping")
def ping(req, res):
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def _echo_text(ch, text):
    ch.send_text(text)


def _echo_binary(ch, data):
    ch.send_binary(data)


@server.get("/echo")
def echo(req, res):
    ch = pulse.upgrade(req, res, max_message_bytes=MAX_MESSAGE_BYTES, compression=True)
    if ch is not None:
        ch.on_text(_echo_text)
        ch.on_binary(_echo_binary)


@server.get("/pong")
def pong(req, res):
    ch = pulse.upgrade(req, res)
    if ch is not None:
        ch.on_text(_echo_text)
