"""A form behind Django's CSRF protection, and a JSON view."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def contact(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return HttpResponse(f"thanks {request.POST.get('name', '')}", content_type="text/plain")
    return render(request, "contact.html")


def ping(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True, "script_name": request.META["SCRIPT_NAME"]})
