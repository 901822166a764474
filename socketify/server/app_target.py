"""What `socketify run APP` names, found the way gunicorn and uvicorn users write it.

    module                      the module's `app`, `application` or `server`, in that order
    module:name                 an attribute (dotted for nested ones: `module:api.server`)
    module:create_app()         a factory called with literal arguments: `create_app("prod")`
    module:create_app --factory uvicorn's spelling: the attribute is a zero-argument factory

The arguments of a factory call are Python literals only (strings, numbers, True/False/None,
tuples, lists, dicts), as gunicorn allows: the target is parsed, never evaluated. A target that
names nothing says, in one line, what was tried and what the module has.
"""

from __future__ import annotations

import ast
import importlib
import sys
from dataclasses import dataclass, field
from types import FunctionType, ModuleType
from typing import Any

__all__ = ["DEFAULT_NAMES", "AppLoadError", "AppTarget", "find_app", "import_module"]

DEFAULT_NAMES = ("app", "application", "server")  # a bare module's candidates, in order


class AppLoadError(Exception):
    """The APP argument names neither a Server, a WSGI application nor a TCP service."""


@dataclass(frozen=True)
class AppTarget:
    """A parsed APP: the module, the attribute path (empty: look for the default names), and
    the literal arguments of a factory call (None when it is not called)."""

    module: str
    attribute: str = ""
    args: tuple[Any, ...] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str) -> AppTarget:
        """The target `spec` names; AppLoadError for one that is not `module[:name[(args)]]`."""
        module, _, rest = spec.partition(":")
        if not module or not all(part.isidentifier() for part in module.split(".")):
            raise AppLoadError(f"invalid app {spec!r}: expected module or module:name")
        rest = rest.strip()
        if not rest:
            return cls(module)
        try:
            node = ast.parse(rest, mode="eval").body
        except SyntaxError:
            raise AppLoadError(f"invalid app {spec!r}: {rest!r} is not a name or call") from None
        if not isinstance(node, ast.Call):
            return cls(module, _dotted_name(node, spec))
        try:
            args = tuple(ast.literal_eval(arg) for arg in node.args)
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except ValueError:
            raise AppLoadError(
                f"invalid app {spec!r}: a factory's arguments must be literals"
                " (strings, numbers, True, False, None, lists, dicts)"
            ) from None
        if len(kwargs) != len(node.keywords):
            raise AppLoadError(f"invalid app {spec!r}: **kwargs are not allowed")
        return cls(module, _dotted_name(node.func, spec), args, kwargs)


def _dotted_name(node: ast.expr, spec: str) -> str:
    """`api.server` for the attribute path `api.server`; AppLoadError for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value, spec)}.{node.attr}"
    raise AppLoadError(f"invalid app {spec!r}: expected module:name or module:name(args)")


def import_module(name: str) -> ModuleType:
    """Import the app's module, with the working directory importable (like `python -m`)."""
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    return importlib.import_module(name)


def find_app(module: ModuleType, target: AppTarget, factory: bool = False) -> object:
    """The object `target` names in `module`: called when it is a factory call, or with
    `factory` (uvicorn's --factory)."""
    found: Any
    if target.attribute:
        found = _attribute(module, target.module, target.attribute)
    else:
        for name in DEFAULT_NAMES:
            if hasattr(module, name):
                found = getattr(module, name)
                break
        else:
            raise AppLoadError(
                f"module {target.module!r} has none of {', '.join(DEFAULT_NAMES)}"
                f" ({_contents(module)}); name one: {target.module}:NAME"
            )
    if target.args is not None or factory:
        if not callable(found):
            what = target.attribute or "the app"
            raise AppLoadError(f"{target.module}:{what} is a {type(found).__name__}, not a factory")
        found = found(*(target.args or ()), **target.kwargs)
    return found


def _attribute(module: ModuleType, module_name: str, path: str) -> object:
    found: Any = module
    for part in path.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise AppLoadError(
                f"module {module_name!r} has no attribute {path!r} ({_contents(module)})"
            ) from None
    return found


def _contents(module: ModuleType) -> str:
    """What a module offers as an app: its public names but modules, classes and imported
    functions; a short list."""
    names = [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType | type)
        and not (isinstance(value, FunctionType) and value.__module__ != module.__name__)
    ]
    if not names:
        return "it has no public names"
    shown = ", ".join(sorted(names)[:12])
    return f"it has: {shown}{', ...' if len(names) > 12 else ''}"
