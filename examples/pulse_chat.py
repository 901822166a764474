"""A lobby chat on the raw Pulse API: one `pulse.Hub` room, JSON messages, a page with a name gate.

    socketify run examples.pulse_chat:server --bind 127.0.0.1:8080 --workers 2
    open http://127.0.0.1:8080/ in two windows

The protocol, one JSON object per text message on `/chat`:

    client -> server   {"type": "join", "user": "ada"}      once, before talking
                       {"type": "chat", "text": "hello"}
    server -> client   {"type": "welcome", "text": "...", "online": 3}    on connecting
                       {"type": "sys", "text": "ada joined"}  /  "ada left"
                       {"type": "chat", "user": "ada", "text": "hello"}  (the sender gets it too)
                       {"type": "error", "text": "..."}       a message we could not act on

Messages are parsed as JSON and checked (an object, a known type, strings of bounded length,
a name without control characters); anything else gets an `error` answer and the connection
stays open. Everything sent is encoded as JSON, so a name or text holding quotes, backslashes,
newlines or markup arrives as the same string, and the page shows it as text, never as HTML.

This uses `pulse.upgrade` and `pulse.Hub` directly; `examples.chat_easy` is the same kind of
chat on `pulse.easy`, which does the envelope parsing and per-connection state for you. The
lobby is a hub room, so its broadcasts reach the members on every worker.

Guide: docs/guide/websocket.md.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from socketify import Request, Response, Server
from socketify.realtime import pulse

LOBBY = "lobby"
MAX_NAME = 24
MAX_TEXT = 1000
MAX_MESSAGE_BYTES = 8 * 1024

hub = pulse.Hub(name="pulse_chat")
server = Server()

PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Pulse lobby</title>
  <style>
    body { font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 2rem auto;
           padding: 0 1rem; color: #222; }
    h1 { font-size: 1.4rem; }
    #log { list-style: none; padding: 0; min-height: 8rem; border: 1px solid #ddd;
           border-radius: .4rem; padding: .5rem; }
    #log .sys { color: #777; font-style: italic; }
    #log .error { color: #b00; }
    #log b { margin-right: .4rem; }
    form { display: flex; gap: .5rem; margin: .5rem 0; }
    input { flex: 1; font: inherit; padding: .4rem; }
    #status { color: #777; font-size: .875rem; }
    [hidden] { display: none; }
  </style>
</head>
<body>
  <h1>Pulse lobby</h1>
  <p id="status">pick a name to enter</p>
  <form id="gate">
    <input id="name" maxlength="24" placeholder="your name" autocomplete="off" required>
    <button>Enter</button>
  </form>
  <form id="talk" hidden>
    <input id="text" maxlength="1000" placeholder="say something" autocomplete="off" required>
    <button>Send</button>
  </form>
  <ul id="log"></ul>
  <script>
    const log = document.getElementById("log");
    const status = document.getElementById("status");
    let socket = null;

    function show(kind, user, text) {
      const item = document.createElement("li");
      item.className = kind;
      if (user !== null) {
        const who = document.createElement("b");
        who.textContent = user;  // text, never markup: names and messages are not HTML
        item.append(who);
      }
      const body = document.createElement("span");
      body.textContent = text;
      item.append(body);
      log.append(item);
    }

    document.getElementById("gate").addEventListener("submit", (event) => {
      event.preventDefault();
      const user = document.getElementById("name").value.trim();
      const scheme = location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(scheme + location.host + "/chat");
      socket.onopen = () => socket.send(JSON.stringify({type: "join", user}));
      socket.onmessage = (message) => {
        const event = JSON.parse(message.data);
        if (event.type === "welcome") {
          status.textContent = `live as ${user}`;
          show("sys", null, `${event.text} (${event.online} connected)`);
          document.getElementById("gate").hidden = true;
          document.getElementById("talk").hidden = false;
          document.getElementById("text").focus();
        } else if (event.type === "chat") {
          show("chat", event.user, event.text);
        } else {
          show(event.type === "error" ? "error" : "sys", null, event.text);
        }
      };
      socket.onclose = () => { status.textContent = "disconnected: reload to enter again"; };
    });

    document.getElementById("talk").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = document.getElementById("text");
      if (input.value.trim() && socket && socket.readyState === WebSocket.OPEN) {
        socket.send(JSON.stringify({type: "chat", text: input.value}));
        input.value = "";
      }
    });
  </script>
</body>
</html>
"""


@server.get("/")
def page(req: Request, res: Response) -> None:
    res.html(PAGE)


@server.get("/chat")
def chat(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res, max_message_bytes=MAX_MESSAGE_BYTES, idle_timeout=60)
    if ch is None:
        return  # not a WebSocket handshake: 400/426 already answered
    member = Member(ch)
    ch.on_text(member.received)
    ch.on_close(member.closed)
    hub.join(LOBBY, ch)
    ch.send_json(
        {"type": "welcome", "text": "welcome to the lobby", "online": hub.room_size(LOBBY)}
    )


class Member:
    """One connection's side of the chat: its name once it has joined."""

    def __init__(self, ch: pulse.Channel) -> None:
        self.ch = ch
        self.name: str | None = None

    def received(self, ch: pulse.Channel, text: str) -> None:
        """Act on one message, or answer why not."""
        try:
            message = json.loads(text)
        except ValueError:
            self.refuse("not JSON")
            return
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "join":
            self.join(message.get("user"))
        elif kind == "chat":
            self.say(message.get("text"))
        else:
            self.refuse('expected {"type": "join" or "chat", ...}')

    def join(self, user: Any) -> None:
        """Take a name once, and tell the lobby."""
        if self.name is not None:
            self.refuse("already joined")
            return
        name = user.strip() if isinstance(user, str) else ""
        if not 0 < len(name) <= MAX_NAME or any(_is_control(c) for c in name):
            self.refuse(f"a name is 1 to {MAX_NAME} printable characters")
            return
        self.name = name
        broadcast({"type": "sys", "text": f"{name} joined"})

    def say(self, text: Any) -> None:
        """Pass a message to everyone in the lobby, the sender included."""
        if self.name is None:
            self.refuse("join with a name first")
        elif not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            self.refuse(f"a message is 1 to {MAX_TEXT} characters of text")
        else:
            broadcast({"type": "chat", "user": self.name, "text": text})

    def closed(self, ch: pulse.Channel, code: int, reason: str) -> None:
        """The hub has already dropped the channel; the others hear who left."""
        if self.name is not None:
            broadcast({"type": "sys", "text": f"{self.name} left"})

    def refuse(self, why: str) -> None:
        """Answer this connection only; it stays open."""
        self.ch.send_json({"type": "error", "text": why})


def broadcast(event: dict[str, str]) -> None:
    """One JSON text frame to every lobby member on every worker."""
    hub.broadcast_text(LOBBY, json.dumps(event, ensure_ascii=False, separators=(",", ":")))


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")


if __name__ == "__main__":
    server.listen(8080, host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
