"""Request checks that belong before every view."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse


class RejectNulMiddleware:
    """A 400 for a request whose path or query string holds a NUL character (``%00``).

    PostgreSQL refuses NUL in text, so a lookup of ``/api/candidates/a%00b/`` would be a database
    error (a 500) instead of a 404; no id, filter or page of evalhub can contain one.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or "\x00" in request.META.get("QUERY_STRING", "") or "%00" in request.META.get("QUERY_STRING", ""):
            message = "The address holds a NUL character (%00): no id, filter or page contains one."
            if request.path.startswith("/api/"):
                # The API's documented 400 body (evalhub/api/schema.py), as JSON like its others.
                return JsonResponse({"detail": message}, status=400)
            return HttpResponseBadRequest(message, content_type="text/plain")
        return self.get_response(request)
