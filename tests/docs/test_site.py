"""The documentation site builds with `mkdocs build --strict`, and its reference names every
public name of socketify."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs.fences import DOCS

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

REPO = DOCS.parent
DIRECTIVE = re.compile(r"^::: (\S+)", re.MULTILINE)
ANCHOR = re.compile(r'id="((?:socketify|workers)[\w.]*)"')
# The packages whose `__all__` a reader meets first: the top level and the subpackages the
# guide imports from. Every module a reference page renders is checked the same way.
PACKAGES = (
    "socketify",
    "socketify.middleware",
    "socketify.db",
    "socketify.db.documents",
    "socketify.realtime.pulse",
    "socketify.socketify_py",
    "socketify.state.redis",
    "socketify.tcp",
    "socketify.testing",
    "socketify.wsgi",
)


@pytest.fixture(scope="module")
def anchors(site: Path) -> set[str]:
    """The ids of every object the reference rendered (`socketify.app.Server`, ...)."""
    found: set[str] = set()
    for page in (site / "reference").rglob("*.html"):
        found.update(ANCHOR.findall(page.read_text()))
    return found


def referenced_modules() -> list[str]:
    modules = []
    for page in sorted((DOCS / "reference").glob("*.md")):
        modules.extend(DIRECTIVE.findall(page.read_text()))
    return modules


def public_names(module: ModuleType) -> list[str]:
    return list(getattr(module, "__all__", ()))


def documented_as(module: ModuleType, name: str) -> set[str]:
    """The anchors under which `module.name` may be rendered: where it is reached from, and
    where it is defined."""
    paths = {f"{module.__name__}.{name}"}
    value = getattr(module, name)
    if inspect.ismodule(value):
        paths.add(value.__name__)
    elif inspect.isclass(value) or inspect.isfunction(value):
        paths.add(f"{value.__module__}.{value.__qualname__}")
    return paths


def test_the_site_builds_strictly_with_every_page_in_it(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "getting-started" / "index.html").is_file()
    assert (site / "reference" / "server" / "index.html").is_file()


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_of_the_package_is_in_the_reference(
    package: str, anchors: set[str]
) -> None:
    module = importlib.import_module(package)
    names = public_names(module)
    assert names, f"{package} has no __all__"
    missing = [name for name in names if not documented_as(module, name) & anchors]
    assert missing == []


def test_every_public_name_of_each_referenced_module_is_rendered(anchors: set[str]) -> None:
    missing = []
    for module_name in referenced_modules():
        if module_name == "socketify" or not module_name.startswith("socketify."):
            continue  # checked above, each where it is defined; or not ours to list whole
        module = importlib.import_module(module_name)
        assert module_name in anchors, f"{module_name} was not rendered"
        missing += [
            f"{module_name}.{name}"
            for name in public_names(module)
            if not documented_as(module, name) & anchors
        ]
    assert missing == []


# `_name` is private; `__version__` and other dunders are not.
PRIVATE_ANCHOR = re.compile(r'id="(?:socketify|workers)[\w.]*\._[A-Za-z0-9]\w*"')


def test_no_reference_page_shows_a_private_name(site: Path) -> None:
    shown = {
        page.relative_to(site).as_posix(): PRIVATE_ANCHOR.findall(page.read_text())
        for page in (site / "reference").rglob("*.html")
    }
    assert {page: names for page, names in shown.items() if names} == {}


def test_the_route_verbs_are_documented_with_their_signatures(site: Path) -> None:
    page = (site / "reference" / "routing" / "index.html").read_text()
    for verb in ("get", "post", "put", "patch", "delete", "options", "head", "any"):
        assert f'id="socketify.core.routing.Registrar.{verb}"' in page, verb
    assert "_Shorthand" not in page


def test_the_performance_page_is_readmes_section_with_its_charts(site: Path) -> None:
    page = (site / "performance" / "index.html").read_text()
    charts = re.findall(r'src="\.\./(results/[\w.-]+\.png)"', page)
    assert charts, "no chart on the Performance page"
    for chart in charts:
        assert (site / chart).is_file(), chart
    assert "load_tests/run_http.py" in page  # each figure keeps its command
