"""Error views: JSON under ``/api/`` (a client there never gets an HTML page), templates elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """400, e.g. a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (Django raises before any view runs)."""
    if _is_api(request):
        return JsonResponse({"detail": "The request could not be read: it is malformed or larger than the 2.5 MB limit."}, status=400)
    return defaults.bad_request(request, exception)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: a JSON ``{"detail"}`` for API paths (such as ``/api/runs/abc/``)."""
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Something went wrong on the server; it has been logged."}, status=500)
    return defaults.server_error(request)
