"""`Templates`: Jinja2 templates from one folder, for `res.render(name, **context)`.

Jinja2 is optional (the `templates` extra) and imported only when the first template is
rendered, so an app without templates never loads it. The environment is made on that first
render, in the worker that renders, so every worker process has its own (and its own cache
of compiled templates). Templates are autoescaped (plain-text kinds such as `.txt`, `.csv`
or `.json` excepted): a value put into `{{ name }}` cannot inject markup unless the
template marks it `|safe`.

Compiled templates are cached and, in production, never checked again. Under
`socketify run --reload` (which sets `SOCKETIFY_RELOAD=1` for its workers) Jinja2 checks a
template file's modification time on each use, so an edited template shows on the next
request without restarting anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["RELOAD_ENV", "Templates", "TemplatesUnavailable"]

# Set to "1" by `socketify run --reload` for the workers it starts.
RELOAD_ENV = "SOCKETIFY_RELOAD"
# Templates of these kinds are rendered as written; every other one is autoescaped, so a
# template whose extension is unknown (and which is therefore sent as HTML) is escaped too.
UNESCAPED = ("txt", "text", "md", "csv", "json", "js", "css", "ini", "toml", "yaml", "yml")
INSTALL_HINT = "pip install 'socketify-gevent[templates]'"


class TemplatesUnavailable(RuntimeError):
    """Rendering needs Jinja2 (the `templates` extra) or a template folder, and one is missing."""


class Templates:
    """The templates under `folder`, rendered with one lazily made Jinja2 environment."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        path = Path(folder).resolve()
        if not path.is_dir():
            raise ValueError(f"templates: {str(folder)!r} is not a folder (resolved to {path})")
        self.folder = path
        self._environment: Any = None

    @property
    def environment(self) -> Any:
        """The `jinja2.Environment` (made on first use): add filters and globals to it."""
        if self._environment is None:
            self._environment = self._make_environment()
        return self._environment

    def render(self, name: str, /, **context: Any) -> str:
        """Render the template `name` (a path under the folder, `/`-separated) to a string."""
        return str(self.environment.get_template(name).render(**context))

    def _make_environment(self) -> Any:
        try:
            import jinja2
        except ImportError:
            raise TemplatesUnavailable(f"templates need Jinja2: {INSTALL_HINT}") from None
        return jinja2.Environment(
            loader=jinja2.FileSystemLoader(self.folder),
            autoescape=jinja2.select_autoescape(
                enabled_extensions=(), disabled_extensions=UNESCAPED, default=True
            ),
            auto_reload=os.environ.get(RELOAD_ENV) == "1",
        )

    def __repr__(self) -> str:
        return f"Templates({str(self.folder)!r})"
