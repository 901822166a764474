"""Middleware chains: a frozen list of `(req, res, next)` middleware and what runs after it.

Theory of operation. Every middleware has one shape, `(req, res, next)`. A `Chain` is made once,
when the server freezes its routes, from the middleware and the *end*: the route dispatch for
the global chain, the handler for a route's own chain. These rules hold for every element:

- it starts only while the response is not ended: once a middleware has answered, the rest of
  the chain (the end included) does not run;
- its `next()` walks on to the following element; a middleware that never calls `next` stops
  the chain there (it answered, or leaves the request unanswered); calling `next()` a second
  time does nothing;
- exceptions travel up through `next()`, so a middleware can catch, map or log them.

The chain is resolved once into nested functions, one per element, each holding the function
of the rest of the chain (falcon's `prepare_middleware` idea): a request then pays one call per
element and no lookups. `_link` is the one place that writes the rules down.

`hooked(before, after)` writes the common "do something, then `next()`, then something after"
middleware as two plain functions; the result is an ordinary `(req, res, next)` middleware,
which a chain runs without building a `next` for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from socketify.core.coroutines import blocking

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["Chain", "Hooked", "Middleware", "hooked"]

Next = Callable[[], None]
Middleware = Callable[["Request", "Response", Next], Any]
End = Callable[["Request", "Response"], Any]
Before = Callable[["Request", "Response"], bool]
After = Callable[["Request", "Response", "BaseException | None"], "bool | None"]


class Hooked:
    """A `(req, res, next)` middleware written as `before`/`after` hooks (see `hooked`)."""

    __slots__ = ("__name__", "after", "before")

    def __init__(self, before: Before | None, after: After | None, name: str) -> None:
        self.before = before
        self.after = after
        self.__name__ = name

    def __call__(self, req: Request, res: Response, next: Next) -> None:
        """Run `before`, then the rest of the chain (`next`), then `after`."""
        _link(self, lambda req, res: next())(req, res)

    def __repr__(self) -> str:
        return f"<middleware {self.__name__}>"


def hooked(before: Before | None = None, after: After | None = None, *, name: str = "") -> Hooked:
    """A middleware from a `before(req, res) -> bool` and/or an `after(req, res, error)`.

    - `before` returns True to go on down the chain; False stops it (the hook has answered,
      or leaves the request unanswered like a middleware that never calls `next`).
    - `after` runs once the rest of the chain has finished, like code after `next()`; `error`
      is the exception leaving the rest of the chain (re-raised after the hook) or None. It does
      not run when its own `before` stopped the chain. An `after` that returns True has
      answered `error`, like code that catches the exception of `next()`.
    """
    if before is None and after is None:
        raise ValueError("a hooked middleware needs a before or an after hook")
    label = name or getattr(before or after, "__name__", "middleware")
    if before is not None:
        before = blocking(before, "the middleware hook")
    if after is not None:
        after = blocking(after, "the middleware hook")
    return Hooked(before, after, label)


class Chain:
    """Middleware in order, then the end; resolved once into one function (`run`)."""

    __slots__ = ("end", "middleware", "run")

    def __init__(self, middleware: Sequence[Middleware], end: End) -> None:
        self.middleware = tuple(middleware)
        self.end = end
        run: End = end
        for element in reversed(self.middleware):
            run = _link(element, run)
        self.run = run  # run(req, res): the whole chain for one request

    def __repr__(self) -> str:
        names = ", ".join(getattr(m, "__name__", repr(m)) for m in self.middleware)
        return f"<Chain [{names}] -> {getattr(self.end, '__name__', self.end)!r}>"


def _link(element: Middleware, rest: End) -> End:
    """The function that runs `element` and then, as it asks, `rest`: the chain's rules.

    The first element starts with a fresh response; each later one (and the end) only while
    the response is not ended, which is checked before `rest` is called.
    """
    if type(element) is Hooked:
        before, after = element.before, element.after

        def run_hooked(req: Request, res: Response) -> None:
            if before is not None and not before(req, res):
                return
            if after is None:
                if not res.ended:
                    rest(req, res)
                return
            try:
                if not res.ended:
                    rest(req, res)
            except BaseException as exc:
                if after(req, res, exc) is not True:
                    raise
            else:
                after(req, res, None)

        return run_hooked

    def run_middleware(req: Request, res: Response) -> None:
        started = False

        def next() -> None:
            nonlocal started
            if not started and not res.ended:
                started = True
                rest(req, res)

        element(req, res, next)

    return run_middleware
