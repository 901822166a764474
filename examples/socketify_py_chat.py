"""A socketify.py app, unchanged in style, on Socketify: `(res, req)` routes and a topic chat.

    python examples/socketify_py_chat.py                  # app.listen + app.run, port 3000
    socketify run examples.socketify_py_chat:app --bind 127.0.0.1:3000 --workers 2
    curl localhost:3000/                                  # Hello from a socketify.py app!
    curl localhost:3000/online                            # {"online":0}
    websocat ws://localhost:3000/chat                     # in two terminals: what one sends,
                                                          # the other receives

`from socketify import App, OpCode` gives socketify.py's API: handlers take `(res, req)`,
`app.ws(path, behavior)` takes the behavior dict, and topics work as in uWebSockets: a
socket subscribes to `chat` when it opens, `ws.publish` sends to the other subscribers (not
the sender), on every worker, and `app.num_subscribers` counts them all. Under `socketify
run` the `app.run()` below is skipped by the guard; without the guard it would return at once
there, as socketify.py scripts expect.

Guide: docs/guide/socketify-py.md.
"""

from __future__ import annotations

from typing import Any

from socketify import App, OpCode

TOPIC = "chat"

app = App()


def home(res: Any, req: Any) -> None:
    res.end("Hello from a socketify.py app!")


def online(res: Any, req: Any) -> None:
    res.end({"online": app.num_subscribers(TOPIC)})  # a dict goes out as JSON


def ws_open(ws: Any) -> None:
    ws.subscribe(TOPIC)
    ws.send("welcome", OpCode.TEXT)


def ws_message(ws: Any, message: str | bytes, opcode: OpCode) -> None:
    ws.publish(TOPIC, message, opcode)  # every other subscriber, on every worker


app.get("/", home)
app.get("/online", online)
app.ws("/chat", {"open": ws_open, "message": ws_message, "max_payload_length": 16 * 1024})


if __name__ == "__main__":
    app.listen(3000, lambda config: print(f"Listening on port {config.port}"))
    app.run()
