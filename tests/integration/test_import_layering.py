"""Import rules of DESIGN §2, checked in fresh interpreters: `import socketify` never imports
gevent, the protocol layer imports only the stdlib, `workers` never imports socketify."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import socketify

pytestmark = pytest.mark.timeout(60)

PACKAGE = Path(socketify.__file__).resolve().parent


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
)
framework = sorted(m for m in new if m.startswith("socketify.")
                   and not m.startswith("socketify.protocol"))
assert not foreign, f"non-stdlib imports: {{foreign}}"
assert not framework, f"imports from upper layers: {{framework}}"
print(len(names))
"""


def test_protocol_layer_imports_only_the_stdlib() -> None:
    result = run_python(PROTOCOL_CHECK.format(package=str(PACKAGE)))
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 1


def test_protocol_check_catches_a_third_party_import(tmp_path: Path) -> None:
    # The check above must be able to fail: a fake package whose protocol imports orjson.
    fake = tmp_path / "socketify"
    (fake / "protocol").mkdir(parents=True)
    (fake / "protocol" / "__init__.py").write_text("")
    (fake / "protocol" / "bad.py").write_text("import orjson\n")
    result = run_python(PROTOCOL_CHECK.format(package=str(fake)))
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
