"""The layers import only downward, and no two modules import each other.

    protocol (sans-IO, stdlib only)  <-  core (no IO)  <-  middleware, state, realtime, db
        <-  server (the IO layer: gevent, sockets)  <-  app, cli, testing, systemd unit
    workers (the pre-fork master and shared memory) never imports socketify.

Two kinds of checks. The module graph is read from the source (`import` statements anywhere,
function bodies included, but not under `if TYPE_CHECKING:`), so an import a test never
triggers still counts. Fresh interpreters then show what importing a module really loads.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import socketify

pytestmark = pytest.mark.timeout(60)

PACKAGE = Path(socketify.__file__).resolve().parent
ROOT = PACKAGE.parent

# Modules outside socketify.server that import gevent when they are imported (not only when a
# function runs): each would rather reach the IO layer through socketify.server. A module may
# leave this list, none may join it.
GEVENT_AT_IMPORT_OUTSIDE_SERVER = {
    "socketify.realtime.census",
    "socketify.realtime.pulse.channel",
    "socketify.realtime.sse",
    "socketify.testing.realtime",
}
# Packages whose functions may import gevent when they run (a pool that waits cooperatively,
# a green database driver); everything else (protocol, core, app, cli...) never does.
GEVENT_WHEN_RUN = ("server", "realtime", "state", "db", "drivers", "middleware", "testing")


@dataclass(frozen=True)
class Import:
    """One import statement's target, as written, and whether it runs on module import."""

    name: str  # absolute dotted name: a module, or a module and a name imported from it
    at_import: bool  # False inside a function body


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> source file, for every module of `packages` under `root`."""
    found = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(module: str, path: Path) -> Iterator[Import]:
    """The imports of one module, `if TYPE_CHECKING:` blocks excepted."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, in_function: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                yield from (Import(alias.name, not in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*parent, *([base] if base else [])])
                # `from pkg import sub` runs pkg/__init__.py and may read `sub` from it: it
                # imports the package as well as whatever `pkg.sub` names.
                yield Import(base, not in_function)
                for alias in child.names:
                    yield Import(f"{base}.{alias.name}", not in_function)
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            yield from visit(child, inner)

    yield from visit(ast.parse(path.read_text()), False)


def module_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports (function-level imports included)."""
    files = module_files(root, packages)

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        for found in imports_of(module, path):
            target = resolve(found.name)
            if target is not None and target != module:
                graph[module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                strong(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """The import graph of socketify and workers."""
    return module_graph(ROOT, ("socketify", "workers"))


def layer(module: str) -> str:
    """`socketify.core` for `socketify.core.request`; `socketify.app` for `socketify.app`."""
    return ".".join(module.split(".")[:2])


def test_no_import_circles_between_modules(graph: dict[str, set[str]]) -> None:
    assert circles(graph) == []


def test_the_circle_check_finds_a_circle_through_a_function_level_import(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def late():\n    from . import c\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
    )
    (package / "e.py").write_text("import pkg.d\n")
    assert circles(module_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_the_circle_check_counts_from_package_import_module_as_importing_the_package(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import f\n")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text("")
    assert circles(module_graph(tmp_path, ("pkg",))) == [["pkg", "pkg.a"]]


def test_protocol_imports_nothing_of_socketify_above_it(graph: dict[str, set[str]]) -> None:
    upward = {
        f"{module} -> {target}"
        for module, targets in graph.items()
        if layer(module) == "socketify.protocol"
        for target in targets
        if layer(target) != "socketify.protocol"
    }
    assert not upward


def test_core_imports_only_the_protocol_layer(graph: dict[str, set[str]]) -> None:
    upward = {
        f"{module} -> {target}"
        for module, targets in graph.items()
        if layer(module) == "socketify.core"
        for target in targets
        if layer(target) not in ("socketify.core", "socketify.protocol")
    }
    assert not upward


def test_workers_never_imports_socketify(graph: dict[str, set[str]]) -> None:
    offenders = {
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.split(".")[0] == "workers"
        for target in targets
        if target.split(".")[0] == "socketify"
    }
    assert not offenders


def gevent_imports() -> Iterator[tuple[str, Import]]:
    """(module, import) for every gevent or greenlet import in socketify."""
    for module, path in module_files(ROOT, ("socketify",)).items():
        for found in imports_of(module, path):
            if found.name.split(".")[0] in ("gevent", "greenlet"):
                yield module, found


def test_only_the_server_package_imports_gevent_when_imported() -> None:
    at_import = {
        module
        for module, found in gevent_imports()
        if found.at_import and layer(module) != "socketify.server"
    }
    assert at_import == GEVENT_AT_IMPORT_OUTSIDE_SERVER


def test_gevent_is_imported_only_by_the_io_layer_and_the_features_above_core() -> None:
    allowed = {f"socketify.{package}" for package in GEVENT_WHEN_RUN}
    elsewhere = {module for module, _ in gevent_imports() if layer(module) not in allowed}
    assert not elsewhere


# -- in fresh interpreters: what an import really loads ---------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd="/"
    )


def test_import_socketify_does_not_import_gevent() -> None:
    result = run_python("import socketify, sys; assert 'gevent' not in sys.modules")
    assert result.returncode == 0, result.stderr


def test_cli_and_server_entry_modules_do_not_import_gevent() -> None:
    # The `socketify run` process becomes the pre-fork master: it must stay gevent-free.
    result = run_python(
        "import socketify.cli, socketify.server.app_worker, socketify.server.launch, sys\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('gevent', 'greenlet'))\n"
        "assert not bad, bad\n"
    )
    assert result.returncode == 0, result.stderr


PROTOCOL_CHECK = """
import importlib, pkgutil, sys, types
before = set(sys.modules)
# A bare package object stands in for socketify, so its __init__ (the framework) is not run:
# what gets imported below is what the protocol modules themselves import.
stub = types.ModuleType("socketify")
stub.__path__ = [{package!r}]
# A compiled build keeps mypyc's runtime module beside the package: importable from there.
sys.path.insert(0, {root!r})
sys.modules["socketify"] = stub
import socketify.protocol as protocol
names = [m.name for m in pkgutil.walk_packages(protocol.__path__, "socketify.protocol.")]
assert names, "no protocol modules found"
for name in names:
    importlib.import_module(name)
new = set(sys.modules) - before
foreign = sorted(
    m for m in new
    if m.split(".")[0] != "socketify" and m.split(".")[0] not in sys.stdlib_module_names
    and not m.endswith("__mypyc")  # the compiled build's runtime, made by mypyc from our code
)
framework = sorted(m for m in new if m.startswith("socketify.")
                   and not m.startswith("socketify.protocol"))
assert not foreign, f"non-stdlib imports: {{foreign}}"
assert not framework, f"imports from upper layers: {{framework}}"
print(len(names))
"""


def test_protocol_layer_imports_only_the_stdlib() -> None:
    result = run_python(PROTOCOL_CHECK.format(package=str(PACKAGE), root=str(PACKAGE.parent)))
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 1


def test_protocol_check_catches_a_third_party_import(tmp_path: Path) -> None:
    # The check above must be able to fail: a fake package whose protocol imports orjson.
    fake = tmp_path / "socketify"
    (fake / "protocol").mkdir(parents=True)
    (fake / "protocol" / "__init__.py").write_text("")
    (fake / "protocol" / "bad.py").write_text("import orjson\n")
    result = run_python(PROTOCOL_CHECK.format(package=str(fake), root=str(tmp_path)))
    assert result.returncode != 0
    assert "non-stdlib imports: ['orjson'" in result.stderr


def test_workers_package_never_imports_socketify() -> None:
    result = run_python(
        "import importlib, pkgutil, sys, workers\n"
        "for m in pkgutil.walk_packages(workers.__path__, 'workers.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'socketify')\n"
        "assert not bad, bad\n"
    )
    assert result.returncode == 0, result.stderr
