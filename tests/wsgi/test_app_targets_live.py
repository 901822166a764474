"""`socketify run` with the targets Flask and Django users bring from gunicorn and uvicorn:
`module:create_app(...)`, `--factory`, a bare module (`mysite.wsgi`), errors that say what
the module has, and warnings and Django's records printed once, however many workers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.raw_client import get
from tests.support.serve import Launcher, run_cli
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(90)

FLASKR = """
import warnings

from flask import Flask

warnings.warn("flaskr is a test app", UserWarning)


def create_app(name="default", *, greeting="hello"):
    app = Flask(name)

    @app.get("/")
    def index():
        return f"{greeting} from {name}"

    return app


def make():
    return create_app("made")
"""

DJANGO_DEBUG_SITE = """
from django.conf import settings

settings.configure(
    DEBUG=True, SECRET_KEY="tests-only", ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__,
    INSTALLED_APPS=[],
)

from django.core.wsgi import get_wsgi_application
from django.http import HttpResponse
from django.urls import path

urlpatterns = [path("ping", lambda request: HttpResponse("pong"))]
application = get_wsgi_application()
"""


@pytest.fixture
def code(tmp_path: Path) -> Path:
    directory = tmp_path / "code"
    directory.mkdir()
    (directory / "flaskr.py").write_text(FLASKR)
    (directory / "debug_site.py").write_text(DJANGO_DEBUG_SITE)
    return directory


def test_a_factory_call_with_literal_arguments(serve: Launcher, code: Path) -> None:
    server = serve(
        "flaskr:create_app('shop', greeting='hi')", env={"PYTHONPATH": str(code)}, workers=2
    )
    assert get(server.tcp, "/").body == b"hi from shop"
    # The probe says nothing: the warning of the app's import is the first worker's, once.
    assert server.output().count("UserWarning: flaskr is a test app") == 1


def test_the_factory_flag_calls_the_named_attribute(serve: Launcher, code: Path) -> None:
    server = serve("flaskr:make", args=["--factory"], env={"PYTHONPATH": str(code)})
    assert get(server.tcp, "/").body == b"hello from made"


def test_a_module_without_an_app_says_what_it_tried_and_what_it_has(code: Path) -> None:
    result = run_cli("run", "flaskr", "--workers", "1", env={"PYTHONPATH": str(code)})
    assert result.returncode == 1
    error, hint = result.stderr.strip().splitlines()[-2:]
    assert error == (
        "error: cannot load app 'flaskr': module 'flaskr' has none of app, application, server"
        " (it has: create_app, make); name one: flaskr:NAME"
    )
    assert hint.startswith("hint: APP is module, module:attribute or module:factory(args)")
    assert "Traceback" not in result.stderr


def test_a_factory_argument_that_is_not_a_literal_is_refused(code: Path) -> None:
    result = run_cli(
        "run", "flaskr:create_app(open('x'))", "--workers", "1", env={"PYTHONPATH": str(code)}
    )
    assert result.returncode == 1
    assert "a factory's arguments must be literals" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_django_project_is_served_by_its_wsgi_module(serve: Launcher, tmp_path: Path) -> None:
    env = {
        "DJANGO_TEST_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "tests.wsgi.django_site.settings",
    }
    server = serve("tests.wsgi.django_site.wsgi", env=env)
    response = get(server.tcp, "/admin/login/")
    assert response.status == 200
    assert b"csrfmiddlewaretoken" in response.body


def test_django_records_and_import_warnings_are_printed_once(serve: Launcher, code: Path) -> None:
    server = serve("debug_site", env={"PYTHONPATH": str(code)}, workers=2)
    assert get(server.tcp, "/ping").body == b"pong"
    assert get(server.tcp, "/missing").status == 404
    wait_for(lambda: "Not Found: /missing" in server.output(), 5, message="Django's record")
    assert server.output().count("Not Found: /missing") == 1
