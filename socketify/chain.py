"""Middleware chains: the frozen plan of one chain and one request's walk along it.

Theory of operation. Every middleware has one shape, `(req, res, next)`. A chain is frozen
once (`Plan`) and walked per request (`Walk`): element `i` gets `next` = "walk from `i + 1`",
the last element is the route handler (or, for the global chain, the route dispatch).

PERF: a built-in middleware is usually "do something, then `next()`" or "do something,
`next()`, then something after". `hooked(before, after)` writes such a middleware as two plain
functions and still returns an ordinary `(req, res, next)` middleware, so users can call it,
wrap it or put it anywhere. When a plan finds one in its chain it calls the hooks directly:
consecutive `before` hooks run in one loop with no `next` object built and no call frame per
layer, and an `after` hook costs one try block. The order, the "ended response stops the
chain" rule and the exceptions seen are exactly those of the `(req, res, next)` form:

- `before(req, res) -> bool`: True to go on down the chain; False stops it (the hook has
  answered, or leaves the request unanswered like a middleware that never calls `next`).
- `after(req, res, error)`: runs once the rest of the chain has finished, like code after
  `next()`; `error` is the exception leaving the rest of the chain (re-raised after the hook)
  or None. It does not run when its own `before` stopped the chain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from socketify.request import Request
    from socketify.response import Response

__all__ = ["Hooked", "Plan", "Walk", "hooked"]

Before = Callable[["Request", "Response"], bool]
After = Callable[["Request", "Response", "BaseException | None"], None]


class Hooked:
    """A `(req, res, next)` middleware written as `before`/`after` hooks (see `hooked`)."""

    __slots__ = ("__name__", "after", "before")

    def __init__(self, before: Before | None, after: After | None, name: str) -> None:
        self.before = before
        self.after = after
        self.__name__ = name

    def __call__(self, req: Request, res: Response, next: Callable[[], None]) -> None:
        """Run as an ordinary middleware (outside a frozen plan, or called by other code)."""
        if self.before is not None and not self.before(req, res):
            return
        after = self.after
        if after is None:
            next()
            return
        try:
            next()
        except BaseException as exc:
            after(req, res, exc)
            raise
        after(req, res, None)

    def __repr__(self) -> str:
        return f"<middleware {self.__name__}>"


def hooked(before: Before | None = None, after: After | None = None, *, name: str = "") -> Hooked:
    """A middleware from a `before(req, res) -> bool` and/or an `after(req, res, error)`."""
    if before is None and after is None:
        raise ValueError("a hooked middleware needs a before or an after hook")
    label = name or getattr(before or after, "__name__", "middleware")
    return Hooked(before, after, label)


class Plan:
    """One frozen chain: its elements, and the hooks of those that are `Hooked`."""

    __slots__ = (
        "afters",
        "afters_within",
        "befores",
        "dispatch",
        "flat",
        "handlers",
        "last",
        "middleware_befores",
    )

    def __init__(
        self,
        handlers: Sequence[Callable[..., Any]],
        dispatch: Callable[[Request, Response], None] | None = None,
    ) -> None:
        self.handlers = tuple(handlers)
        self.dispatch = dispatch  # what runs after the last middleware; None: a handler does
        self.last = len(self.handlers) if dispatch is not None else len(self.handlers) - 1
        # A plain middleware is (None, None): it gets a `next`. A Hooked one with no before
        # gets an always-true stand-in, so the walk tells the kinds apart by one test.
        self.befores: tuple[Before | None, ...] = tuple(
            (h.before or _go_on) if type(h) is Hooked else None for h in self.handlers
        )
        self.afters: tuple[After | None, ...] = tuple(
            h.after if type(h) is Hooked else None for h in self.handlers
        )
        # Every middleware Hooked: `run_flat` walks the chain in one loop, no Walk at all.
        self.flat = all(type(h) is Hooked for h in self.handlers[: self.last])
        self.middleware_befores = self.befores[: self.last]
        # PERF: for `run_flat`: the after hooks of the first `went_on` elements, innermost
        # first, for each possible `went_on` (most middleware has no after hook).
        self.afters_within: tuple[tuple[After, ...], ...] = tuple(
            tuple(after for after in reversed(self.afters[:went_on]) if after is not None)
            for went_on in range(self.last + 1)
        )


def _go_on(req: Request, res: Response) -> bool:
    return True


def run_flat(plan: Plan, req: Request, res: Response) -> bool:
    """Walk a chain of hooked middleware only (`plan.flat`); True if the end was reached.

    The same order and rules as `Walk.run`, unrolled: the `before` hooks in a loop, then the
    `after` hooks of those that went on, innermost first, each seeing the exception that left
    the chain below it (or that an inner `after` raised), which is re-raised at the end.
    """
    went_on = 0  # how many before hooks said "go on"
    reached = False
    error: BaseException | None = None
    try:
        for before in plan.middleware_befores:
            if res._ended or not before(req, res):  # type: ignore[misc]  # flat: no None
                break
            went_on += 1
        else:
            if not res._ended:
                reached = True
                if plan.dispatch is not None:
                    plan.dispatch(req, res)
                else:
                    plan.handlers[-1](req, res)
    except BaseException as exc:
        error = exc
    for after in plan.afters_within[went_on]:
        try:
            after(req, res, error)
        except BaseException as exc:
            error = exc
    if error is not None:
        try:
            raise error
        finally:
            error = None  # the traceback holds this frame: no cycle left for the gc
    return reached


class Walk:
    """One request's walk along a `Plan`; a plain middleware's `next` is `partial(run, i + 1)`.

    PERF: an object with an index, not a closure that calls itself: a self-referencing
    closure is a reference cycle, which kept every request's Request and Response (bodies
    included) alive until the cyclic garbage collector ran. A C-level `partial` as `next`
    costs less than a Python callable object.
    """

    __slots__ = ("plan", "reached", "req", "res", "started")

    def __init__(self, plan: Plan, req: Request, res: Response) -> None:
        self.plan = plan
        self.req = req
        self.res = res
        self.reached = False  # the dispatch (or handler) was started
        self.started = -1  # the furthest element started

    def run(self, index: int) -> None:
        """Walk from element `index`: middleware, then the dispatch or the route's handler."""
        if index <= self.started:
            return  # a second next() call: the rest of the chain already ran (or runs)
        plan = self.plan
        req = self.req
        res = self.res
        befores = plan.befores
        last = plan.last
        while True:
            self.started = index
            if res._ended:
                return  # SPEC: once the response is ended, next() does nothing
            if index == last:
                self.reached = True
                if plan.dispatch is not None:
                    plan.dispatch(req, res)
                else:
                    plan.handlers[index](req, res)
                return
            before = befores[index]
            if before is None:
                plan.handlers[index](req, res, partial(self.run, index + 1))
                return
            if not before(req, res):
                return
            after = plan.afters[index]
            index += 1
            if after is not None:
                try:
                    self.run(index)
                except BaseException as exc:
                    after(req, res, exc)
                    raise
                after(req, res, None)
                return
