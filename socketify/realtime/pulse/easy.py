"""`pulse.easy`: JSON events over Pulse, `{"type": ..., "data": ...}`.

    app = easy.App()

    @app.on("/chat")
    def chat(conn):
        conn.join("lobby")
        conn.emit("welcome", {"online": app.hub.room_size("lobby")})
        conn.on("say", lambda conn, data: conn.broadcast("lobby", "said", data))

    app.bind(server)

Theory of operation. Each text message is parsed as an envelope and handed to the handler
registered for its type. What cannot be dispatched goes to the raw handler when there is one,
otherwise the client gets an `error` event saying why (`App(error_events=False)` drops it
silently instead). Rooms are rooms of a `pulse.Hub`, so they span workers and a
broadcast is encoded once. Binary messages are left to the channel (and `pulse.media`).

`bind(server)` registers a GET route for each path recorded so far, and a path recorded later
gets its route at once while the server's route table is still open. Once the table is frozen
(the server is serving), later paths are answered by a small global middleware that `bind`
installed: they work in the process that recorded them, behind only the global middleware
registered before `bind`.

The default hub is named `pulse.easy`, and hubs of one name are one set of rooms in every
process; two Apps that must not share rooms get hubs of their own names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from socketify.core.chain import hooked
from socketify.core.coroutines import blocking
from socketify.core.routing import Router
from socketify.realtime.pulse.accept import upgrade
from socketify.realtime.pulse.channel import Channel
from socketify.realtime.pulse.hub import Hub
from socketify.server.upgraded import SendStatus

if TYPE_CHECKING:
    from socketify.core.application import Application
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["App", "Connection", "envelope", "parse_envelope"]

log = logging.getLogger("socketify.error")

ERROR_EVENT = "error"

ConnectionHandler = Callable[["Connection"], Any]
EventHandler = Callable[["Connection", Any], Any]
RawHandler = Callable[["Connection", str], Any]
CloseHandler = Callable[["Connection", int, str], Any]


def envelope(type: str, data: Any = None) -> str:
    """The compact, key-sorted JSON text of one event: `{"data":...,"type":"..."}`."""
    body = {"data": {} if data is None else data, "type": type}
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()


def parse_envelope(raw: str | bytes) -> tuple[str, Any] | None:
    """`(type, data)` of a JSON object with a string `type` (no `data` gives `{}`), else None."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return None
    return message["type"], message.get("data", {})


class Connection:
    """One pulse.easy client: its channel, its rooms and its event handlers (`App.adopt`)."""

    __slots__ = (
        "_close",
        "_events",
        "_raw",
        "app",
        "channel",
        "default_room",
        "error_events",
        "locals",
    )

    def __init__(self, app: App, channel: Channel) -> None:
        self.app = app
        self.channel = channel
        self.default_room: str | None = None
        self.error_events = app.error_events  # answer undeliverable messages with `error`
        self.locals: dict[str, Any] = {}
        self._events: dict[str, EventHandler] = {}
        self._raw: RawHandler | None = None
        self._close: list[CloseHandler] = []
        # The channel's text messages and its end are this connection's from now on.
        channel.on_text(self._dispatch)
        channel.on_close(self._closed)

    @property
    def id(self) -> str:
        """The channel id (unique across workers)."""
        return self.channel.id

    @property
    def alive(self) -> bool:
        """False once the connection has ended."""
        return self.channel.alive

    @property
    def rooms(self) -> set[str]:
        """The rooms this connection is in."""
        return self.app.hub.rooms(self.channel)

    def join(self, room: str) -> bool:
        """Join `room` (on the App's hub) and make it the default room; False if already in."""
        self.default_room = room
        return self.app.hub.join(room, self.channel)

    def leave(self, room: str) -> bool:
        """Leave `room`; False if this connection was not in it."""
        if self.default_room == room:
            self.default_room = None
        return self.app.hub.leave(room, self.channel)

    def emit(self, type: str, data: Any = None) -> SendStatus:
        """Send one event to this connection only; a `SendStatus` (DROPPED once closed)."""
        return self.channel.send_text(envelope(type, data))

    def broadcast(
        self, room: str | None, type: str, data: Any = None, *, include_self: bool = True
    ) -> None:
        """Send one event to every member of `room` (None: the default room) on every worker."""
        target = room if room is not None else self.default_room
        if target is None:
            raise ValueError("broadcast needs a room: this connection has no default room")
        exclude = None if include_self else self.channel
        self.app.hub.broadcast_text(target, envelope(type, data), exclude=exclude)

    def on(self, type: str, fn: EventHandler) -> EventHandler:
        """`fn(conn, data)` for each event of `type` (replaces the previous one)."""
        self._events[type] = blocking(fn, "the pulse.easy event handler")
        return fn

    def on_raw(self, fn: RawHandler) -> RawHandler:
        """`fn(conn, text)` for each text message no event handler takes."""
        self._raw = blocking(fn, "the pulse.easy on_raw callback")
        return fn

    def on_close(self, fn: CloseHandler) -> CloseHandler:
        """`fn(conn, code, reason)` when the connection ends (appends; run in order)."""
        self._close.append(blocking(fn, "the pulse.easy on_close callback"))
        return fn

    def clear_handlers(self) -> None:
        """Drop the event and raw handlers: what `App.release` does to a connection it forgets."""
        self._events.clear()
        self._raw = None

    def _dispatch(self, channel: Channel, text: str) -> None:
        parsed = parse_envelope(text)
        handler = self._events.get(parsed[0]) if parsed is not None else None
        if handler is not None:
            handler(self, parsed[1])  # type: ignore[index]
        elif self._raw is not None:
            self._raw(self, text)
        elif self.error_events:
            if parsed is None:
                self.emit(ERROR_EVENT, {"error": "invalid_envelope", "message": _EXPECTED})
            else:
                self.emit(ERROR_EVENT, {"error": "unknown_type", "type": parsed[0]})

    def _closed(self, channel: Channel, code: int, reason: str) -> None:
        callbacks, self._close = self._close, []
        for fn in callbacks:
            try:
                fn(self, code, reason)
            except Exception:
                log.exception("pulse.easy on_close callback failed")
        self.app.release(channel)

    def __repr__(self) -> str:
        return f"<easy.Connection {self.id} rooms={sorted(self.rooms)}>"


_EXPECTED = 'expected a JSON object {"type": "<string>", "data": <any>}'


class App:
    """Routes of JSON-event WebSockets sharing one hub (`App(hub=shared)` to share one)."""

    def __init__(self, hub: Hub | None = None, *, error_events: bool = True) -> None:
        self.hub = hub if hub is not None else Hub(name="pulse.easy")
        self.error_events = error_events
        self._routes: dict[str, tuple[ConnectionHandler, bool | None, dict[str, Any]]] = {}
        self._live: dict[str, Connection] = {}
        self._server: Application | None = None
        self._late: Router | None = None  # routes recorded after the server froze its table

    def on(
        self,
        path: str,
        handler: ConnectionHandler | None = None,
        *,
        error_events: bool | None = None,
        **options: Any,
    ) -> Any:
        """Serve `path`: `handler(conn)` runs for each new connection (usable as decorator).

        `error_events` overrides the App's setting for this path; the other `options` go to
        `pulse.upgrade` (`subprotocols`, `max_message_bytes`, `origins`, ...).
        """
        if handler is None:
            return lambda fn: self.on(path, fn, error_events=error_events, **options)
        run = blocking(handler, f"the pulse.easy connection handler for {path!r}")
        known = path in self._routes
        self._routes[path] = (run, error_events, options)  # a second `on` replaces the handler
        if self._server is not None and not known:
            self._register(path)
        return handler

    def bind(self, server: Application) -> App:
        """Register the recorded routes on `server`; routes recorded later follow at once."""
        if self._server is not None:
            raise RuntimeError("this pulse.easy App is already bound to a server")
        self._server = server
        server.use(hooked(self._late_routes, name="pulse_easy_late_routes"))
        for path in self._routes:
            self._register(path)
        return self

    def adopt(self, channel: Channel) -> Connection:
        """The connection of `channel`, created and made live on the first call."""
        conn = self._live.get(channel.id)
        if conn is None:
            conn = self._live[channel.id] = Connection(self, channel)
        return conn

    def release(self, channel: Channel) -> None:
        """Forget `channel`: leave every room of the hub and drop its handlers (idempotent)."""
        conn = self._live.pop(channel.id, None)
        if conn is None:
            return
        self.hub.leave_all(channel)
        conn.clear_handlers()

    def connection(self, channel: Channel) -> Connection | None:
        """The live connection of `channel`, or None (never adopted, or released)."""
        return self._live.get(channel.id)

    def is_live(self, channel: Channel) -> bool:
        """True while `channel` is adopted and open."""
        return channel.id in self._live

    def connections(self) -> list[Connection]:
        """A snapshot of this worker's live connections."""
        return list(self._live.values())

    # -- routing ------------------------------------------------------------------------------

    def _register(self, path: str) -> None:
        server = self._server
        assert server is not None
        if not server.router.frozen:
            server.get(path, self._handler_for(path))
            return
        late = Router()  # rebuilt per late path: they are rare, and a frozen table is fast
        if self._late is not None:
            for route in self._late.routes:
                late.add("GET", route.pattern, route.handler)
        late.add("GET", path, self._handler_for(path))
        late.freeze()
        self._late = late

    def _handler_for(self, path: str) -> Callable[[Request, Response], None]:
        def handler(req: Request, res: Response) -> None:
            self._accept(path, req, res)

        return handler

    def _accept(self, path: str, req: Request, res: Response) -> None:
        fn, error_events, options = self._routes[path]
        channel = upgrade(req, res, **options)
        if channel is None:
            return  # refused: the 400/426/403 is already answered
        conn = self.adopt(channel)
        if error_events is not None:
            conn.error_events = error_events
        fn(conn)

    def _late_routes(self, req: Request, res: Response) -> bool:
        # A before hook (socketify.core.chain): one call per request while no late route exists.
        late = self._late
        if late is None or req.method != "GET":
            return True
        route, params, _ = late.find("GET", req.head.path)
        if route is None:
            return True
        if params:
            req.params = params
        route.handler(req, res)
        if not res.ended:
            res.end()  # what routing does after a handler: the 101 (or refusal) goes out
        return False
