"""A socketify.py route handler `(res, req)` served as a Socketify `(req, res)` handler.

One `RouteHandler` per registered route does what socketify.py's generic method handler
does around the user's function: it makes the `AppResponse`/`AppRequest` faces, runs the
function (an `async def` one on the worker's loop), feeds the body to an `on_data` handler,
starts a piece-by-piece answer (`try_end`, `send_chunk`) and, when the function declined the
request with `req.set_yield(True)` without answering, falls through to the next route that
matches (a `/user/:id` that yields reaches `app.any("/*")`).

Which route comes first follows uWebSockets, where the method is matched before the path: a
route for the request's own method beats every `any` route, so `app.ws("/*", ...)` takes
the upgrade to `/` although `app.any("/", ...)` is there too. Among routes of the same kind,
the router's precedence holds (static, then parameter, then wildcard). A WebSocket route
declines a request that is not an upgrade, as uWebSockets' does.

An `async def` handler normally runs to its end before the answer is written. One that starts
a piece-by-piece answer keeps running on the loop while the connection writes it: the
request's greenlet returns as soon as the first piece is offered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from socketify.core.coroutines import is_async, runner
from socketify.core.routing import ANY
from socketify.socketify_py.request import AppRequest
from socketify.socketify_py.response import AppResponse

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response
    from socketify.core.routing import Route
    from socketify.socketify_py.app import App

__all__ = ["RouteHandler", "WebSocketRoute"]

log = logging.getLogger("socketify.socketify_py")

Handler = Callable[[AppResponse, AppRequest], Any]

# In a request's locals: the routes are being tried in uWebSockets' order already (so an `any`
# route reached by falling through answers, rather than looking for a better match again).
IN_UWS_ORDER = "socketify_py.in_uws_order"


class RouteHandler:
    """Serve one socketify.py handler; `route` is its Route, set when it is registered."""

    __slots__ = ("app", "handler", "is_async", "route")

    def __init__(self, app: App, handler: Callable[..., Any]) -> None:
        if not callable(handler):
            raise TypeError(f"a route handler must be callable, got {handler!r}")
        self.app = app
        self.handler = handler
        self.is_async = is_async(handler)
        self.route: Route | None = None

    @property
    def __name__(self) -> str:
        """The user's handler's name, for logs and route listings."""
        return str(getattr(self.handler, "__name__", "handler"))

    def __call__(self, req: Request, res: Response) -> None:
        if self.route is not None and self.route.method == ANY and IN_UWS_ORDER not in req.locals:
            first = next(iter(self.in_uws_order(req)), None)
            if first is not None and first[0] is not self.route:
                self.run(first, req, res)  # a route for this very method comes first
                return
        if self.serve(req, res) and not res.ended:
            self.fall_through(req, res)

    def serve(self, req: Request, res: Response) -> bool:
        """Answer with the handler; True when it declined the request (`set_yield`)."""
        faces = self.app.faces
        face = faces.response(res, req, self.app)
        request = faces.request(req)
        if self.is_async:
            runner().run(self.serve_async(face, request))
        else:
            self.handler(face, request)
            face.deliver_body()
            face.finish_producing()
        face.start_stream()
        return request.yielding

    async def serve_async(self, face: AppResponse, request: AppRequest) -> None:
        """Run the handler, and the tasks it gave `res.run_async`, until they are done or
        until the answer starts streaming."""
        task = asyncio.ensure_future(self.handler(face, request))
        streaming = face.streaming_started()
        while True:
            await asyncio.wait((task, streaming), return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                # The task goes on writing pieces while the connection sends them.
                task.add_done_callback(lambda done: _after_streaming(done, face))
                return
            task.result()  # its exception, if it raised, is the request's error
            if not face.scheduled:
                break
            task = face.scheduled.pop(0)
        streaming.cancel()
        if face.data_handler is not None:  # registered but never awaited: feed it now
            await runner().in_caller(face.deliver_body)
        face.finish_producing()

    def in_uws_order(self, req: Request) -> list[tuple[Route, dict[str, str]]]:
        """The routes matching `req`, as uWebSockets tries them: its method's, then `any`'s."""
        found = list(self.app.router.candidates(req.method, req.head.path))
        return [c for c in found if c[0].method != ANY] + [c for c in found if c[0].method == ANY]

    def fall_through(self, req: Request, res: Response) -> None:
        """Run the next route matching the request after this one (it declined it); 404 when
        none is left, as for a request no route matched."""
        passed = False
        for candidate in self.in_uws_order(req):
            if passed:
                self.run(candidate, req, res)
                return
            passed = candidate[0] is self.route
        res.status(404).send("Not Found\n", "text/plain; charset=utf-8")

    @staticmethod
    def run(candidate: tuple[Route, dict[str, str]], req: Request, res: Response) -> None:
        """Answer `req` with another route (its middleware included)."""
        route, params = candidate
        req.params = params
        req.locals[IN_UWS_ORDER] = True
        route.chain.run(req, res)


class WebSocketRoute(RouteHandler):
    """The GET route of `app.ws(path, behavior)`: upgrades, and declines other requests."""

    __slots__ = ("upgrade",)

    def __init__(self, app: App, upgrade: Callable[[Request, Response], Any]) -> None:
        super().__init__(app, upgrade)
        self.upgrade = upgrade

    def serve(self, req: Request, res: Response) -> bool:
        """Upgrade a WebSocket handshake; decline anything else (True)."""
        if "websocket" not in (req.headers.get("upgrade") or "").lower():
            return True
        self.upgrade(req, res)
        return False


def _after_streaming(task: asyncio.Future[Any], face: AppResponse) -> None:
    """The handler of a streaming answer returned: log what it raised, end the producing."""
    if not task.cancelled() and task.exception() is not None:
        log.error("the handler failed while its answer streamed", exc_info=task.exception())
    face.finish_producing()
