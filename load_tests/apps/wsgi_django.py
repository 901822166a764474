"""The Django app of the WSGI benchmark: one JSON view at /ping behind Django's usual
middleware (security, common, CSRF, clickjacking), configured in this one module.

Served as `load_tests.apps.wsgi_django:application` by every contender.
"""

from __future__ import annotations

import django
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.http import HttpRequest, JsonResponse
from django.urls import path

settings.configure(
    DEBUG=False,
    SECRET_KEY="benchmark-only-not-secret",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    USE_TZ=True,
    MIDDLEWARE=[
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    ],
    INSTALLED_APPS=[],
    DATABASES={},
)
django.setup()


def ping(request: HttpRequest) -> JsonResponse:
    """{"ok": true}."""
    return JsonResponse({"ok": True})


urlpatterns = [path("ping", ping)]

application = get_wsgi_application()
