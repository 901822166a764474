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
  or None. It does not run when its own `before` stopped the chain. An `after` that returns
  True has answered `error`, like code that catches the exception of `next()`: the error
  stops there, and the hooks outside it see a normal return (None).

A chain made only of hooked middleware runs as one function generated when it is frozen
(`flat_runner`); a middleware with only an `after` hook costs nothing on the way in.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from socketify.core.callables import require_blocking

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["Hooked", "Plan", "Walk", "compiled", "flat_lines", "flat_runner", "hooked"]

# After hooks a generated chain nests (one `try` each); Python allows 20 nested blocks.
FLAT_AFTERS_MAX = 12

Before = Callable[["Request", "Response"], bool]
After = Callable[["Request", "Response", "BaseException | None"], "bool | None"]


class Hooked:
    """A `(req, res, next)` middleware written as `before`/`after` hooks (see `hooked`)."""

    __slots__ = ("__name__", "after", "before", "before_may_end")

    def __init__(
        self, before: Before | None, after: After | None, name: str, before_may_end: bool = True
    ) -> None:
        self.before = before
        self.after = after
        self.__name__ = name
        self.before_may_end = before_may_end

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
            if after(req, res, exc) is not True:
                raise
        else:
            after(req, res, None)

    def __repr__(self) -> str:
        return f"<middleware {self.__name__}>"


def hooked(
    before: Before | None = None,
    after: After | None = None,
    *,
    name: str = "",
    before_may_end: bool = True,
) -> Hooked:
    """A middleware from a `before(req, res) -> bool` and/or an `after(req, res, error)`.

    `before_may_end=False` promises that `before` never ends the response when it returns
    True (it answers only by returning False): a chain then skips its check for an ended
    response after it.
    """
    if before is None and after is None:
        raise ValueError("a hooked middleware needs a before or an after hook")
    for hook in (before, after):
        if hook is not None:
            require_blocking(hook, "the middleware hook")
    label = name or getattr(before or after, "__name__", "middleware")
    return Hooked(before, after, label, before_may_end)


class Plan:
    """One frozen chain: its elements, the hooks of those that are `Hooked`, and its runner."""

    __slots__ = ("afters", "befores", "dispatch", "flat", "handlers", "last", "run")

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
        # Every middleware Hooked (and not too many after hooks to nest): the chain runs as
        # one generated function, no Walk at all.
        chain = [h for h in self.handlers[: self.last] if type(h) is Hooked]
        afters = sum(h.after is not None for h in chain)
        self.flat = len(chain) == self.last and afters <= FLAT_AFTERS_MAX
        self.run: Callable[[Request, Response], bool] | None = (
            flat_runner(chain, dispatch or self.handlers[-1]) if self.flat else None
        )


def _go_on(req: Request, res: Response) -> bool:
    return True


def flat_runner(
    chain: Sequence[Hooked], end: Callable[[Request, Response], None]
) -> Callable[[Request, Response], bool]:
    """`run(req, res) -> reached the end`: the chain of hooked middleware, then `end`.

    PERF: resolved once when the chain is frozen, like a dataclass's generated `__init__`:
    the `(req, res, next)` nesting written out as straight-line code that calls each hook by
    name, so a request pays no loop, no `next` and no lookups in the plan (see `flat_lines`).
    """
    lines, names = flat_lines(chain, "    ")
    source = "\n".join(["def run(req, res):", *lines, "    return reached", ""])
    label = ", ".join(m.__name__ for m in chain) or "no middleware"
    return compiled(source, {**names, "end": end}, "run", label)


def flat_lines(chain: Sequence[Hooked], indent: str) -> tuple[list[str], dict[str, Any]]:
    """The code that runs `chain`, then `end(req, res)`, setting `reached` when `end` was
    started; and the hooks it names. For `[after-only a, before-only b, before-only c]`:

        reached = False
        if not res._ended:
            try:
                if before_1(req, res) and not res._ended and before_2(req, res) and not res._ended:
                    reached = True
                    end(req, res)
            except BaseException as exc:
                if after_0(req, res, exc) is not True:
                    raise
            else:
                after_0(req, res, None)

    The rules are those of `Walk.run`: an element starts only while the response is not
    ended (not checked after a before that promised not to end it, see `hooked`); a before
    that returns False stops the chain and its own after does not run; the after hooks of
    the elements that went on run innermost first, each seeing the exception that left the
    chain below it (an after that raises replaces it for the outer ones, one that returns
    True answered it). A middleware with only an after hook is not called on the way in.
    Each after hook nests one `try`, so `Plan` uses this for up to FLAT_AFTERS_MAX of them.
    """
    names: dict[str, Any] = {}
    lines = [f"{indent}reached = False"]
    guard = ["not res._ended"]  # what must hold for the next element to start
    opened: list[tuple[str, int]] = []  # (indent of its try, index) of the after hooks
    for index, middleware in enumerate(chain):
        if middleware.before is not None:
            names[f"before_{index}"] = middleware.before
            guard.append(f"before_{index}(req, res)")
        may_end = middleware.before is not None and middleware.before_may_end
        if middleware.after is None:
            if may_end:
                guard.append("not res._ended")
            continue
        names[f"after_{index}"] = middleware.after
        if guard:
            lines.append(f"{indent}if {' and '.join(guard)}:")
            indent += "    "
        lines.append(f"{indent}try:")
        opened.append((indent, index))
        indent += "    "
        guard = ["not res._ended"] if may_end else []
    if guard:
        lines.append(f"{indent}if {' and '.join(guard)}:")
        indent += "    "
    lines += [f"{indent}reached = True", f"{indent}end(req, res)"]
    for at, index in reversed(opened):
        lines += [
            f"{at}except BaseException as exc:",
            f"{at}    if after_{index}(req, res, exc) is not True:",
            f"{at}        raise",
            f"{at}else:",
            f"{at}    after_{index}(req, res, None)",
        ]
    return lines, names


def compiled(source: str, names: dict[str, Any], function: str, label: str) -> Any:
    """The function `function` that `source` defines, with `names` as its globals.

    Each gets its own file name, with its source in linecache, so tracebacks through it
    show the generated lines.
    """
    filename = f"<socketify chain {next(_chains_made)}: {label}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), names)  # our own source: names and numbers only
    return names[function]


_chains_made = itertools.count(1)


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
                    if after(req, res, exc) is not True:
                        raise
                else:
                    after(req, res, None)
                return
