"""Stable page-number pagination for every list endpoint (known-failure-modes B11)."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination


class StablePageNumberPagination(PageNumberPagination):
    """Page-number pagination: ``{"count", "next", "previous", "results"}``.

    * ``page_size`` defaults to 50 and is clamped to at most 200; ``0``, negative or non-numeric
      values fall back to the default (DRF's ``_positive_int(strict=True, cutoff=...)``).
    * ``page`` is a number from 1, or ``last``; anything else (``0``, ``-1``, ``1e3``, past the
      end) is a 404 ``{"detail": "Invalid page: ..."}`` saying why, never a 500.

    Every viewset orders its queryset by a unique key, so pages never repeat or skip rows.
    """

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    invalid_page_message = "Invalid page: {message}."
