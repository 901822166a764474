"""A chat room on Server-Sent Events: messages go in with POST, everything comes out on one
event stream, and a `tick` event every 2 seconds shows the stream is alive.

    socketify run examples.sse_chat:server --bind 127.0.0.1:8080 --workers 2
    open http://127.0.0.1:8080/ in two windows
    curl -N localhost:8080/events          # event: chat / data: welcome! clients online: 1
    curl -X POST localhost:8080/say --data-binary 'hello'   # 204; every stream: chat "hello"

Across workers: the streams of one room are spread over the worker processes, so the room is
an `sse.Hub` room, whose broadcasts reach the members on every worker and whose `room_size`
counts them all (the welcome's "clients online"). The tick is the subtle part. A ticker per
worker that broadcast to the room would reach every client once per worker, so with
`--workers 2` each client would see every tick twice. Instead each worker writes the tick only
to its own members (`hub.members`), and the tick number is the wall clock divided by the
period, not a per-worker counter, so every client sees the same number at the same time,
whichever worker serves it. `SSE_CHAT_TICK_SECONDS` changes the period (default 2).

A stream whose client went away leaves the room by itself (the hub drops members when their
connection ends); a message is at most 2,000 characters.

Guide: docs/guide/sse.md.
"""

from __future__ import annotations

import os
import time

import gevent

from socketify import Request, Response, Server
from socketify.realtime import sse

ROOM = "chat"
MAX_MESSAGE = 2000
TICK_SECONDS = float(os.environ.get("SSE_CHAT_TICK_SECONDS", "2"))

PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>SSE chat</title>
  <style>
    body { font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 2rem auto;
           padding: 0 1rem; }
    #log { list-style: none; padding: 0; }
    #tick { color: #777; font-size: .875rem; }
    form { display: flex; gap: .5rem; }
    input { flex: 1; font: inherit; padding: .4rem; }
  </style>
</head>
<body>
  <h1>SSE chat</h1>
  <p id="tick">waiting for the first tick…</p>
  <form id="say">
    <input id="text" maxlength="2000" placeholder="say something" autocomplete="off" required>
    <button>Send</button>
  </form>
  <ul id="log"></ul>
  <script>
    "use strict";
    const log = document.getElementById("log");
    const events = new EventSource("/events");
    events.addEventListener("chat", (event) => {
      const line = document.createElement("li");
      line.textContent = event.data;  // text, never HTML
      log.append(line);
    });
    events.addEventListener("tick", (event) => {
      document.getElementById("tick").textContent = "tick " + event.data;
    });
    document.getElementById("say").addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = document.getElementById("text");
      await fetch("/say", { method: "POST", body: text.value });
      text.value = "";
    });
  </script>
</body>
</html>
"""

server = Server()
hub = sse.Hub(name="sse-chat")


class Ticker:
    """Writes `tick` to this worker's members of the room while it has any."""

    def __init__(self, period: float) -> None:
        self.period = period
        self._running: gevent.Greenlet | None = None
        self._pid = 0

    def ensure_running(self) -> None:
        """Start this process's ticker unless it runs (a forked worker starts its own)."""
        if self._running is None or self._running.dead or self._pid != os.getpid():
            self._pid = os.getpid()
            self._running = gevent.spawn(self._run)

    def _run(self) -> None:
        while hub.local_size(ROOM):
            number = int(time.time() // self.period) + 1
            gevent.sleep(max(0.0, number * self.period - time.time()))
            event = sse.encode_event(str(number), event="tick")  # encoded once for all
            for stream in hub.members(ROOM):
                stream.write(event)


ticker = Ticker(TICK_SECONDS)


@server.get("/")
def index(req: Request, res: Response) -> None:
    res.html(PAGE)


@server.get("/events")
def events(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res, heartbeat=25)
    if not stream.alive:
        return  # HEAD: the headers only
    hub.join(ROOM, stream)
    stream.send_event("chat", f"welcome! clients online: {hub.room_size(ROOM)}")
    ticker.ensure_running()


@server.post("/say")
def say(req: Request, res: Response) -> None:
    text = req.text.strip()
    if not text or len(text) > MAX_MESSAGE:
        res.json_error(422, f"say 1 to {MAX_MESSAGE} characters")
        return
    hub.broadcast(ROOM, text, event="chat")
    res.send_status(204)


if __name__ == "__main__":
    server.listen(8080, host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
