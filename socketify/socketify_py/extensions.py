"""socketify.py's `app.register(extension)`: methods and properties added to the faces.

An extension is `extension(request, response, ws)`: each argument is an `AppExtension` whose
`method` decorator adds a method and whose `property(name, default)` adds an attribute
every new face starts with. Registering makes subclasses of `AppRequest`, `AppResponse` and
`WebSocket` carrying them, once, at start-up; the App then builds its faces from those
classes (`Faces`), so a request without extensions pays nothing for them. As in
socketify.py, extensions are registered before the routes that use them.

A property's default is copied for each new face (`copy.copy`), so a list default is one
list per request, not one shared by every connection.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from socketify.socketify_py.request import AppRequest
from socketify.socketify_py.response import AppResponse
from socketify.socketify_py.websocket import WebSocket

__all__ = ["AppExtension", "Extension", "Faces", "extend"]


@dataclass
class AppExtension:
    """What an extension adds to one kind of face: methods, and attributes with defaults."""

    methods: dict[str, Callable[..., Any]] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)

    def method(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """Add `function` as a method (usable as a decorator)."""
        if not callable(function):
            raise TypeError(f"an extension method must be callable, got {function!r}")
        self.methods[function.__name__] = function
        return function

    def property(self, name: str, default_value: Any = None) -> None:
        """Give every new face the attribute `name`, starting as a copy of `default_value`."""
        if not name.isidentifier():
            raise ValueError(f"{name!r} is not a valid attribute name")
        self.properties[name] = default_value


@dataclass(frozen=True)
class Faces:
    """The classes the App builds its request, response and WebSocket faces from."""

    request: type[AppRequest] = AppRequest
    response: type[AppResponse] = AppResponse
    websocket: type[WebSocket] = WebSocket


Extension = Callable[[AppExtension, AppExtension, AppExtension], Any]


def extend(faces: Faces, extension: Extension) -> Faces:
    """The faces with what `extension(request, response, ws)` adds."""
    request, response, ws = AppExtension(), AppExtension(), AppExtension()
    extension(request, response, ws)
    return replace(
        faces,
        request=_subclass(faces.request, request),
        response=_subclass(faces.response, response),
        websocket=_subclass(faces.websocket, ws),
    )


def _subclass(base: type[Any], added: AppExtension) -> type[Any]:
    """`base` with `added`'s methods, and an `__init__` that sets `added`'s properties."""
    if not added.methods and not added.properties:
        return base
    defaults = dict(added.properties)
    namespace: dict[str, Any] = dict(added.methods)
    if defaults:

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            base.__init__(self, *args, **kwargs)
            for name, value in defaults.items():
                setattr(self, name, copy.copy(value))

        namespace["__init__"] = __init__
    # No __slots__ here: the subclass has a __dict__ for the added attributes.
    return type(base.__name__, (base,), namespace)
