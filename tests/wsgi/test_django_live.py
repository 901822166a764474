"""A Django project (tests/wsgi/django_site: admin, sessions, CSRF, SQLite) served by the
real `socketify run`, mounted on a Socketify Server that serves its collected static files:
the admin's login page and a login, a CSRF-protected form, static files, HTTP/2.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
import requests

from tests.support.serve import REPO, Launcher, ServerProcess, server_environment

pytestmark = pytest.mark.timeout(90)

SETTINGS = "tests.wsgi.django_site.settings"
PASSWORD = "correct horse battery staple"


# The project's set-up in one interpreter: the migrations, collectstatic, an admin user.
SET_UP = """
import django
django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("collectstatic", interactive=False, verbosity=0)
User.objects.create_superuser("admin", "admin@example.com", PASSWORD)
"""


def set_up_project(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-c", SET_UP.replace("PASSWORD", repr(PASSWORD))],
        cwd=REPO,
        env=server_environment(env),
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("django")
    env = {
        "DJANGO_TEST_DIR": str(data),
        "DJANGO_SETTINGS_MODULE": SETTINGS,
    }
    set_up_project(env)
    with Launcher(tmp_path_factory.mktemp("django-logs")) as launch:
        yield launch("tests.wsgi.django_site.serving:server", env=env)


def csrf_token(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def test_the_admin_login_page(site: ServerProcess) -> None:
    response = requests.get(f"{site.url}/admin/", timeout=10)
    assert response.history and response.history[0].status_code == 302
    assert response.url.endswith("/admin/login/?next=/admin/")
    assert response.status_code == 200
    assert "csrfmiddlewaretoken" in response.text
    assert response.headers["X-Frame-Options"] == "DENY"


def test_an_admin_login_with_its_csrf_token(site: ServerProcess) -> None:
    with requests.Session() as browser:
        page = browser.get(f"{site.url}/admin/login/", timeout=10)
        response = browser.post(
            f"{site.url}/admin/login/?next=/admin/",
            data={
                "csrfmiddlewaretoken": csrf_token(page.text),
                "username": "admin",
                "password": PASSWORD,
                "next": "/admin/",
            },
            headers={"Referer": f"{site.url}/admin/login/"},
            timeout=10,
        )
        assert response.status_code == 200
        assert response.url == f"{site.url}/admin/"
        assert "Site administration" in response.text
        assert "sessionid" in browser.cookies


def test_a_csrf_protected_form(site: ServerProcess) -> None:
    with requests.Session() as browser:
        form = browser.get(f"{site.url}/contact/", timeout=10)
        assert form.status_code == 200
        refused = requests.post(f"{site.url}/contact/", data={"name": "Mallory"}, timeout=10)
        assert refused.status_code == 403
        accepted = browser.post(
            f"{site.url}/contact/",
            data={"csrfmiddlewaretoken": csrf_token(form.text), "name": "Ada"},
            timeout=10,
        )
        assert (accepted.status_code, accepted.text) == (200, "thanks Ada")


def test_collected_static_files_are_served_by_the_socketify_side(site: ServerProcess) -> None:
    own = requests.get(f"{site.url}/static/site/site.css", timeout=10)
    assert (own.status_code, own.text) == (200, "body { color: #333; }\n")
    assert own.headers["Content-Type"].startswith("text/css")
    assert "ETag" in own.headers  # the static middleware answered, not Django
    admin_css = requests.get(f"{site.url}/static/admin/css/base.css", timeout=10)
    assert admin_css.status_code == 200
    assert requests.get(f"{site.url}/static/missing.css", timeout=10).status_code == 404


def test_django_over_http2(site: ServerProcess) -> None:
    with httpx.Client(http1=False, http2=True) as client:
        response = client.get(f"{site.url}/ping")
    assert response.http_version == "HTTP/2"
    assert response.json() == {"ok": True, "script_name": ""}
