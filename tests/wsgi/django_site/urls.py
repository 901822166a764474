"""The admin, a CSRF-protected form and a JSON view."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from tests.wsgi.django_site import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("contact/", views.contact),
    path("ping", views.ping),
]
