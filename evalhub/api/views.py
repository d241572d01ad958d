"""What every evalhub API view shares: strict JSON bodies, django-filter, natural-key lookups."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import viewsets

from evalhub.api.parsers import StrictJSONParser


class ApiViewMixin:
    """Strict JSON request bodies (B9) and django-filter query filters.

    There is no client-chosen ordering: each queryset has one fixed order ending in a unique key,
    so page N is always the same rows.
    """

    parser_classes = [StrictJSONParser]
    filter_backends = [DjangoFilterBackend]


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
