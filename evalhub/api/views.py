"""What every evalhub API view shares: strict JSON bodies, django-filter, natural-key lookups."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import exceptions, viewsets
from rest_framework.settings import api_settings

from evalhub.api.params import reject_repeated_params
from evalhub.api.parsers import StrictJSONParser


class ApiViewMixin:
    """Strict JSON request bodies (docs/failure-modes.md B9) and django-filter query filters.

    There is no client-chosen ordering: each queryset has one fixed order ending in a unique key,
    so page N is always the same rows.
    """

    parser_classes = [StrictJSONParser]
    filter_backends = [DjangoFilterBackend]

    def initial(self, request, *args, **kwargs) -> None:
        """A list or a detail read that does not know a query parameter is a 400 naming it and
        the accepted ones: ``?lane=live`` silently ignored would return every run as if filtered.
        So is one given twice (:func:`~evalhub.api.params.reject_repeated_params`). Other actions
        check their own parameters."""
        super().initial(request, *args, **kwargs)
        action = getattr(self, "action", None)
        if action not in ("list", "retrieve"):
            return
        accepted = [api_settings.URL_FORMAT_OVERRIDE]
        if action == "list":
            filterset_class = getattr(self, "filterset_class", None)
            accepted += [*(filterset_class.base_filters if filterset_class is not None else ()), "page"]
            paginator = getattr(self, "paginator", None)
            for param in ("page_size_query_param", "cursor_query_param"):
                if getattr(paginator, param, None):
                    accepted.append(getattr(paginator, param))
        unknown = [name for name in request.query_params if name not in accepted]
        if unknown:
            listed = ", ".join(name for name in accepted if name)
            raise exceptions.ValidationError({name: [f"Unknown query parameter. Accepted: {listed}."] for name in unknown})
        # Every filter and page parameter takes one value: ``?run=1&run=2`` would quietly mean run 2.
        reject_repeated_params(request)


class CatalogViewSet(ApiViewMixin, viewsets.ModelViewSet):
    """Read for signed-in users, write for staff; rows are addressed by their natural id.

    ``/api/<things>/{id}/`` where ``id`` is the slot, candidate, case or scenario id (a budget's
    name). Ids may contain dots, so the lookup accepts anything but a slash.
    """

    lookup_url_kwarg = "id"
    lookup_value_regex = "[^/]+"


class ReadOnlyViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """History endpoints: list and retrieve only (runs, executions, schedules)."""

    lookup_value_regex = "[0-9]+"
