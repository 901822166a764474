"""The project served as Django's deployment docs describe: `collectstatic` into STATIC_ROOT,
and the web server (a Socketify Server here) serves those files itself, in front of the
mounted Django application."""

from __future__ import annotations

from socketify import Server, static_files
from tests.wsgi.django_site.settings import STATIC_ROOT
from tests.wsgi.django_site.wsgi import application

server = Server(workers=1)
server.use(static_files.serve(STATIC_ROOT, "/static"))
server.mount("/", application)
