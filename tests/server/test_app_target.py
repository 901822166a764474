"""`socketify run APP`'s target, parsed and found without a server: names, factory calls
with literal arguments, the default names of a bare module, and errors that say what exists."""

from __future__ import annotations

import sys
from types import ModuleType

import pytest

from socketify.server.app_target import AppLoadError, AppTarget, find_app


def module_with(**names: object) -> ModuleType:
    module = ModuleType("shop")
    vars(module).update(names)
    return module


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("shop", AppTarget("shop")),
        ("shop.wsgi", AppTarget("shop.wsgi")),
        ("shop:app", AppTarget("shop", "app")),
        ("shop:api.server", AppTarget("shop", "api.server")),
        ("shop:create_app()", AppTarget("shop", "create_app", ())),
        (
            "shop:create_app('prod', workers=2, debug=False)",
            AppTarget("shop", "create_app", ("prod",), {"workers": 2, "debug": False}),
        ),
        ("shop:make([1, 2], {'a': None})", AppTarget("shop", "make", ([1, 2], {"a": None}))),
    ],
)
def test_targets_parse_as_gunicorn_writes_them(spec: str, expected: AppTarget) -> None:
    assert AppTarget.parse(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("shop:create_app(os.getenv('X'))", "a factory's arguments must be literals"),
        ("shop:create_app(__import__('os'))", "a factory's arguments must be literals"),
        ("shop:create_app(**opts)", "**kwargs are not allowed"),
        ("shop:1 + 2", "expected module:name"),
        ("shop:app(", "is not a name or call"),
        (":app", "expected module or module:name"),
        ("my shop:app", "expected module or module:name"),
    ],
)
def test_a_target_that_is_not_a_name_or_a_literal_call_is_refused(spec: str, message: str) -> None:
    with pytest.raises(AppLoadError, match=message.replace("*", r"\*").replace("(", r"\(")):
        AppTarget.parse(spec)


def test_a_bare_module_finds_app_then_application_then_server() -> None:
    first, second, third = object(), object(), object()
    target = AppTarget.parse("shop")
    assert find_app(module_with(server=third, application=second, app=first), target) is first
    assert find_app(module_with(server=third, application=second), target) is second
    assert find_app(module_with(server=third), target) is third


def test_a_module_without_an_app_lists_what_was_tried_and_what_it_has() -> None:
    def create_app() -> object:
        return object()

    create_app.__module__ = "shop"
    module = module_with(create_app=create_app, db=object(), sys=sys, _private=1, Model=type)
    with pytest.raises(AppLoadError) as caught:
        find_app(module, AppTarget.parse("shop"))
    message = str(caught.value)
    assert message == (
        "module 'shop' has none of app, application, server (it has: create_app, db);"
        " name one: shop:NAME"
    )


def test_a_missing_attribute_says_what_the_module_has() -> None:
    with pytest.raises(AppLoadError, match=r"has no attribute 'ap' \(it has: app\)"):
        find_app(module_with(app=object()), AppTarget.parse("shop:ap"))


def test_a_factory_call_passes_its_literal_arguments() -> None:
    def create_app(name: str, *, workers: int = 1) -> tuple[str, int]:
        return name, workers

    module = module_with(create_app=create_app)
    target = AppTarget.parse("shop:create_app('prod', workers=4)")
    assert find_app(module, target) == ("prod", 4)


def test_the_factory_flag_calls_the_attribute_without_arguments() -> None:
    made = object()
    module = module_with(make=lambda: made)
    assert find_app(module, AppTarget.parse("shop:make"), factory=True) is made


def test_calling_what_is_not_callable_is_refused() -> None:
    with pytest.raises(AppLoadError, match="shop:app is a int, not a factory"):
        find_app(module_with(app=42), AppTarget.parse("shop:app"), factory=True)
