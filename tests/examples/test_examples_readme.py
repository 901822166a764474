"""The run commands in README.md and examples/README.md name apps that exist, and every
example is listed."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
RUN = re.compile(r"`socketify run (examples\.[\w.]+):(\w+)[^`]*`|`python -m (examples\.[\w.]+)`")


def _commands(readme: Path) -> list[tuple[str, str]]:
    found = []
    for match in RUN.finditer(readme.read_text()):
        module, attribute, script = match.groups()
        found.append((module, attribute) if module else (script, "__main__"))
    return found


@pytest.mark.parametrize("readme", ["README.md", "examples/README.md"])
def test_every_run_command_names_an_app_that_exists(readme: str) -> None:
    commands = _commands(REPO / readme)
    assert len(commands) >= 10
    for module, attribute in commands:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        source = Path(spec.origin).read_text()
        if attribute == "__main__":
            assert 'if __name__ == "__main__":' in source, module
        else:
            defined = rf"^(?:{attribute}\s*[:=]|def {attribute}\b|class {attribute}\b)"
            assert re.search(defined, source, re.MULTILINE), (module, attribute)


def test_every_example_is_in_the_table() -> None:
    table = (EXAMPLES / "README.md").read_text()
    examples = [
        path.name
        for path in EXAMPLES.iterdir()
        if (path.suffix == ".py" and not path.name.startswith("_"))
        or (path.is_dir() and (path / "__init__.py").exists())
    ]
    missing = [name for name in examples if f"`{name}" not in table]
    assert not missing
