"""A socketify.py app, written as socketify.py's documentation writes them, served by Socketify.

Run with `python tests/socketify_py/chat_app.py` (PORT from the environment, default 3000) or
`socketify run tests.socketify_py.chat_app:app`. The module ends in `app.run()` without a
`__main__` guard, as socketify.py's examples do.
"""

import asyncio
import os

from socketify import App, CompressOptions, OpCode

app = App()


def home(res, req):
    res.end("Hello, World!")


def user(res, req):
    res.write_status(200).write_header("X-User", req.get_parameter(0)).end(
        {
            "id": req.get_parameter(0),
            "tab": req.get_query("tab"),
            "agent": req.get_header("user-agent"),
        }
    )


def created(res, req):
    res.write_status("201 Created").send({"method": req.get_method(), "url": req.get_url()})


def teapot(res, req):
    res.write_status(418)
    res.write_header("X-Kind", "tea")
    res.write("short ")
    res.end("and stout")


async def slow(res, req):
    await asyncio.sleep(0.05)
    res.end("slept")


async def echo_json(res, req):
    data = await res.get_json()
    res.end({"echo": data, "pid": os.getpid()})


def upload(res, req):
    chunks = []

    def on_data(res, chunk, is_end):
        chunks.append(chunk)
        if is_end:
            res.end(f"{len(b''.join(chunks))} bytes")

    res.on_data(on_data)


def broadcast(res, req):
    app.publish("room", req.get_query("text") or "", OpCode.TEXT)
    res.end(f"published by {os.getpid()}")


def fails(res, req):
    raise ValueError("handler failure")


def on_error(error, res, req):
    res.write_status(500).end(f"handled: {error}")


def ws_open(ws):
    ws.subscribe("room")
    ws.send(f"welcome from {os.getpid()}", OpCode.TEXT)


def ws_message(ws, message, opcode):
    if message == "pid":
        ws.send(str(os.getpid()), OpCode.TEXT)
    elif message == "topics":
        ws.send(",".join(ws.get_topics()), OpCode.TEXT)
    elif isinstance(message, str) and message.startswith("say "):
        ws.publish("room", message[4:], OpCode.TEXT)
    else:
        ws.send(message, opcode)


app.get("/", home)
app.get("/user/:id", user)
app.post("/items", created)
app.get("/teapot", teapot)
app.get("/slow", slow)
app.post("/echo", echo_json)
app.post("/upload", upload)
app.get("/broadcast", broadcast)
app.get("/fails", fails)
app.set_error_handler(on_error)
app.ws(
    "/ws",
    {
        "compression": CompressOptions.SHARED_COMPRESSOR,
        "max_payload_length": 64 * 1024,
        "idle_timeout": 60,
        "open": ws_open,
        "message": ws_message,
        "close": lambda ws, code, message: None,
    },
)
app.listen(
    int(os.environ.get("PORT", "3000")),
    lambda config: print(f"Listening on port http://localhost:{config.port} now", flush=True),
)
app.run()
