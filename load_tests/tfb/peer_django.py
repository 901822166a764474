"""Peer: Django ORM on `gunicorn -k gevent` (load_tests/.venv only), settings in this module.

    gunicorn load_tests.tfb.peer_django:application -k gevent

psycopg2 is made cooperative with psycogreen. Django keeps one connection per greenlet, that
is per keep-alive client connection (`CONN_MAX_AGE=None`), so it holds as many as there are
clients; the fortunes are rendered by Django's own template engine.
"""

from psycogreen.gevent import patch_psycopg

patch_psycopg()

import django  # noqa: E402
from django.conf import settings  # noqa: E402

from load_tests.tfb.spec import (  # noqa: E402
    ADDITIONAL_FORTUNE,
    FORTUNE_TEMPLATE,
    HELLO,
    MESSAGE,
    database_url,
    pg_settings,
    queries_count,
    random_id,
    random_ids,
    random_number,
)

_pg = pg_settings()
settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="tfb-peer-only",
    # Sets Content-Length, as a default Django project does.
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    INSTALLED_APPS=[],
    USE_TZ=False,
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates"}],
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _pg["database"],
            "USER": _pg["user"],
            "PASSWORD": _pg["password"],
            "HOST": _pg["host"],
            "PORT": _pg["port"],
            "CONN_MAX_AGE": None,
            "OPTIONS": {"options": f"-c search_path={database_url()[1]}"},
        }
    },
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import models, transaction  # noqa: E402
from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.template import engines  # noqa: E402
from django.urls import path  # noqa: E402


class World(models.Model):
    randomnumber = models.IntegerField()

    class Meta:
        app_label = "tfb"
        db_table = "world"
        managed = False


class Fortune(models.Model):
    message = models.CharField(max_length=2048)

    class Meta:
        app_label = "tfb"
        db_table = "fortune"
        managed = False


fortunes_template = engines["django"].from_string(FORTUNE_TEMPLATE)


def json(request):
    return JsonResponse({"message": MESSAGE})


def plaintext(request):
    return HttpResponse(HELLO, content_type="text/plain")


def single_query(request):
    world = World.objects.get(id=random_id())
    return JsonResponse({"id": world.id, "randomNumber": world.randomnumber})


def queries(request):
    ids = random_ids(queries_count(request.GET.get("queries")))
    worlds = [World.objects.get(id=i) for i in ids]
    answer = [{"id": w.id, "randomNumber": w.randomnumber} for w in worlds]
    return JsonResponse(answer, safe=False)


def fortunes(request):
    rows = list(Fortune.objects.values_list("id", "message"))
    rows.append((0, ADDITIONAL_FORTUNE))
    rows.sort(key=lambda row: row[1])
    return HttpResponse(fortunes_template.render({"fortunes": rows}))


def updates(request):
    ids = random_ids(queries_count(request.GET.get("queries")))
    with transaction.atomic():
        worlds = [World.objects.get(id=i) for i in ids]
        for world in worlds:
            world.randomnumber = random_number()
        World.objects.bulk_update(worlds, ["randomnumber"])
    answer = [{"id": w.id, "randomNumber": w.randomnumber} for w in worlds]
    return JsonResponse(answer, safe=False)


urlpatterns = [
    path("json", json),
    path("plaintext", plaintext),
    path("db", single_query),
    path("queries", queries),
    path("fortunes", fortunes),
    path("updates", updates),
]

application = get_wsgi_application()
