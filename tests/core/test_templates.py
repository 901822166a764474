"""`res.render` on Jinja2: autoescaping, Content-Types, and the errors for what is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from socketify import Server
from socketify.core.templates import Templates, TemplatesUnavailable
from socketify.testing import TestClient


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "page.html").write_text("<p>{{ text }}</p>")
    (tmp_path / "safe.html").write_text("<p>{{ text|safe }}</p>")
    (tmp_path / "note.txt").write_text("{{ text }}")
    (tmp_path / "feed.xml").write_text("<feed>{{ text }}</feed>")
    (tmp_path / "mail.jinja").write_text("<b>{{ text }}</b>")
    (tmp_path / "broken.html").write_text("{% if %}")
    return tmp_path


def served(folder: Path) -> TestClient:
    server = Server(templates=folder)

    @server.get("/:name")
    def page(req, res):
        res.render(req.params["name"], text=req.query.get("text", "<i>&</i>"))

    return TestClient(server)


def test_html_and_xml_templates_escape_their_values(folder: Path) -> None:
    client = served(folder)
    page = client.get("/page.html")
    assert (page.status, page.text) == (200, "<p>&lt;i&gt;&amp;&lt;/i&gt;</p>")
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    feed = client.get("/feed.xml")
    assert feed.text == "<feed>&lt;i&gt;&amp;&lt;/i&gt;</feed>"
    assert feed.headers["Content-Type"] == "application/xml; charset=utf-8"
    assert client.get("/safe.html").text == "<p><i>&</i></p>"  # the template opted out


def test_text_templates_are_sent_as_written_and_unknown_extensions_as_html(
    folder: Path,
) -> None:
    client = served(folder)
    note = client.get("/note.txt")
    assert (note.text, note.headers["Content-Type"]) == ("<i>&</i>", "text/plain; charset=utf-8")
    mail = client.get("/mail.jinja")
    assert mail.headers["Content-Type"] == "text/html; charset=utf-8"
    assert mail.text == "<b>&lt;i&gt;&amp;&lt;/i&gt;</b>"  # unknown names escape too


def test_a_content_type_set_by_the_handler_wins(folder: Path) -> None:
    server = Server(templates=folder)

    @server.get("/")
    def page(req, res):
        res.set_header("Content-Type", "text/x-fragment; charset=utf-8")
        res.render("page.html", text="x")

    assert TestClient(server).get("/").headers["Content-Type"] == "text/x-fragment; charset=utf-8"


def test_a_missing_or_broken_template_is_a_500_and_the_server_keeps_serving(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = served(folder)
    assert client.get("/absent.html").status == 500
    assert "TemplateNotFound: 'absent.html' not found" in caplog.text
    assert client.get("/broken.html").status == 500
    assert client.get("/page.html?text=ok").text == "<p>ok</p>"


def test_render_without_a_template_folder_says_how_to_set_one() -> None:
    server = Server(debug=True)

    @server.get("/")
    def page(req, res):
        res.render("page.html")

    answer = TestClient(server).get("/")
    assert answer.status == 500
    assert "needs a template folder: Server(templates='templates')" in answer.text


def test_a_template_folder_that_does_not_exist_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a folder"):
        Server(templates=tmp_path / "nowhere")


def test_one_environment_is_made_on_first_render_and_kept(folder: Path) -> None:
    templates = Templates(folder)
    environment = templates.environment
    assert templates.render("page.html", text="a") == "<p>a</p>"
    assert templates.environment is environment
    assert environment.auto_reload is False  # production: compiled once, never re-checked


def test_jinja2_is_imported_only_when_a_template_is_rendered(folder: Path) -> None:
    code = f"""
import sys
from socketify import Server
from socketify.testing import TestClient
server = Server(templates={str(folder)!r})
server.get("/")(lambda req, res: res.render("page.html", text="hi"))
client = TestClient(server)
assert "jinja2" not in sys.modules, "imported before the first render"
assert client.get("/").text == "<p>hi</p>"
assert "jinja2" in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_jinja2_render_names_the_extra_to_install(folder: Path) -> None:
    # `sys.modules["jinja2"] = None` makes `import jinja2` fail as on a machine without it.
    code = f"""
import sys
sys.modules["jinja2"] = None
from socketify import Server
from socketify.core.templates import TemplatesUnavailable
from socketify.testing import TestClient
server = Server(templates={str(folder)!r}, debug=True)
server.get("/")(lambda req, res: res.render("page.html"))
answer = TestClient(server).get("/")
assert answer.status == 500, answer.status
print(answer.text)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    )
    assert "templates need Jinja2: pip install 'socketify-gevent[templates]'" in result.stdout
    assert TemplatesUnavailable.__name__ in result.stdout


def test_info_reports_templates_where_render_works(folder: Path) -> None:
    from socketify.cli import info

    client = served(folder)
    assert "Templates: yes" in info().splitlines()
    assert client.get("/page.html?text=ok").text == "<p>ok</p>"


def test_a_context_key_may_be_called_name(folder: Path) -> None:
    # The template's own name is positional-only: `name=` is the page's, in both builds.
    (folder / "hello.html").write_text("<h1>Hello, {{ name }}!</h1>")
    server = Server(templates=str(folder))
    server.get("/")(lambda req, res: res.render("hello.html", name="<b>Ada</b>"))
    page = TestClient(server).get("/")
    assert page.text == "<h1>Hello, &lt;b&gt;Ada&lt;/b&gt;!</h1>"
