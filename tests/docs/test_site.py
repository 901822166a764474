"""The documentation site builds with `mkdocs build --strict`, and its reference names every
public name of socketify."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs.fences import DOCS

pytestmark = pytest.mark.timeout(120)

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
    "socketify.testing",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `mkdocs build --strict` writes it (a warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=110,
    )
    assert result.returncode == 0, result.stderr
    return out


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
