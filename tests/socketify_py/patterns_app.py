"""The patterns of socketify.py's examples, in this project's words, served by Socketify.

Run with `python tests/socketify_py/patterns_app.py` (PORT from the environment) or
`socketify run tests.socketify_py.patterns_app:app`. Like socketify.py's examples it ends in
`app.run()` without a `__main__` guard. The live tests are in test_patterns_live.py.
"""

import asyncio
import os
from pathlib import Path

import jinja2
import orjson

from socketify import App, MiddlewareRouter, OpCode, middleware, sendfile

HERE = Path(__file__).resolve()
PIECE = 16 * 1024

app = App()
app.json_serializer(orjson)  # bytes from dumps: answers and messages take them as they are


# -- routes that decline: req.set_yield ----------------------------------------------------


def item(res, req):
    if req.get_parameter(0).isdigit():
        res.end(f"item {req.get_parameter(0)}")
    else:
        req.set_yield(True)


def catch_all(res, req):
    res.write_status(404).end(f"nothing at {req.get_url()}")


# -- errors: (error, res, req) -------------------------------------------------------------


def broken(res, req):
    raise LookupError("no such thing")


async def broken_later(res, req):
    await asyncio.sleep(0)
    raise TimeoutError("too slow")


@app.on_error
def on_error(error, res, req):
    res.write_status(500).end(f"{type(error).__name__} on {req.get_url()}")


# -- socketify.py's middleware chain -------------------------------------------------------


async def needs_token(res, req, data=None):
    await asyncio.sleep(0)
    token = req.get_header("x-token")
    if token is None:
        res.write_status(401).end("who are you?")
        return False
    return {"token": token}


def stamps(res, req, data=None):
    data["stamped"] = True
    return data


def whoami(res, req, data=None):
    res.end(data)


# -- templates: app.template(engine) and res.render ----------------------------------------


class PageEngine:
    """A template engine of the shape socketify.py's helpers have: render(name, **context)."""

    def __init__(self) -> None:
        pages = {"hello.html": "<h1>{{ greeting }}, {{ name }}</h1>"}
        self.env = jinja2.Environment(loader=jinja2.DictLoader(pages), autoescape=True)

    def render(self, template_name, **context):
        return self.env.get_template(template_name).render(**context)


app.template(PageEngine())


def page(res, req):
    res.render("hello.html", greeting="Hello", name=req.get_query("name") or "<nobody>")


# -- a body in pieces: send_chunk, try_end and on_writable ---------------------------------


def pattern(size):
    return bytes(i % 251 for i in range(size))


async def pieces(res, req):
    body = pattern(int(req.get_query("size") or 100_000))
    res.write_status(200).write_header("Content-Type", "application/octet-stream")
    sent = 0
    while not res.aborted:
        ok, done = await res.send_chunk(body[sent : sent + PIECE], len(body))
        sent += PIECE
        if not ok or done:
            break


async def endless(res, req):
    # Far more than a client reads: it leaves, and the abort is written down for the test.
    def aborted(res):
        with open(os.environ["ABORTS_FILE"], "a") as record:
            record.write("aborted\n")

    res.on_aborted(aborted)
    while not res.aborted:
        await res.send_chunk(bytes(PIECE), 1 << 40)


def offered(res, req):
    body = pattern(int(req.get_query("size") or 300_000))
    refused = []

    def offer_rest(res, offset):
        while True:
            ok, done = res.try_end(body[offset : offset + PIECE], len(body))
            if done:
                return True
            if not ok:
                refused.append(offset)
                return False
            offset = res.get_write_offset()

    res.write_header("X-Handler", "sync")
    res.on_writable(offer_rest)
    offer_rest(res, 0)


# -- the body through on_data and a future of the app's loop -------------------------------


async def counted(res, req):
    finished = res.app.loop.create_future()
    sizes = []

    def on_piece(res, chunk, is_last):
        sizes.append(len(chunk))
        if is_last:
            finished.set_result(sum(sizes))

    res.on_data(on_piece)
    res.end(f"{await finished} bytes")


# -- one file: sendfile --------------------------------------------------------------------


async def source(res, req):
    await sendfile(res, req, str(HERE))


# -- WebSockets: upgrade, subscription, publish ----------------------------------------------


def upgrade(res, req, socket_context):
    name = req.get_query("name")
    if not name:
        res.write_status(403).end("a name, please")
        return
    res.upgrade(
        req.get_header("sec-websocket-key"),
        req.get_header("sec-websocket-protocol"),
        req.get_header("sec-websocket-extensions"),
        socket_context,
        {"name": name},
    )


async def slow_upgrade(res, req, socket_context):
    key = req.get_header("sec-websocket-key")
    await asyncio.sleep(0.05)
    res.upgrade(key, None, None, socket_context, {"name": "late"})


def ws_open(ws):
    ws.send(f"hello {ws.get_user_data()['name']}", OpCode.TEXT)
    ws.subscribe("room")


def ws_message(ws, message, opcode):
    if message == "leave":
        ws.unsubscribe("room")
    else:
        ws.publish("room", f"{ws.get_user_data()['name']}: {message}", OpCode.TEXT)


def subscription(ws, topic, subscribers, subscribers_before):
    ws.send({"topic": topic, "now": subscribers, "before": subscribers_before}, OpCode.TEXT)


def fill(ws):
    # Send numbered messages until the socket pushes back, as far as 2000 of them.
    sent = ws.get_user_data()
    while ws.get_buffered_amount() < 1024 and sent["count"] < 2000:
        ws.send(f"message {sent['count']}", OpCode.TEXT)
        sent["count"] += 1


def counting_upgrade(res, req, socket_context):
    res.upgrade(None, None, None, socket_context, {"count": 0})


behavior = {
    "upgrade": upgrade,
    "open": ws_open,
    "message": ws_message,
    "subscription": subscription,
}

app.get("/item/:id", item)
app.get("/broken", broken)
app.get("/broken_later", broken_later)
app.get("/private", middleware(needs_token, stamps, whoami))
MiddlewareRouter(app, needs_token).get("/router/private", whoami).post("/router/private", whoami)
app.get("/page", page)
app.get("/pieces", pieces)
app.get("/offered", offered)
app.get("/endless", endless)
app.post("/counted", counted)
app.get("/source", source)
app.ws("/chat", behavior)
app.ws("/late", {**behavior, "upgrade": slow_upgrade})
app.ws("/flood", {"upgrade": counting_upgrade, "open": fill, "drain": fill})
app.any("/", lambda res, req: res.end("not a WebSocket"))
app.any("/*", catch_all)
app.listen(
    int(os.environ.get("PORT", "3000")),
    lambda config: print(f"Listening on port http://localhost:{config.port} now", flush=True),
)
app.run()
