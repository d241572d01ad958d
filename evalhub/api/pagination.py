from rest_framework.pagination import PageNumberPagination


class StablePageNumberPagination(PageNumberPagination):
    """Page-number pagination with a client page size clamped to 1..200 (known-failure-modes B11).

    Querysets are always ordered by a unique key, so pages never repeat or skip rows. An invalid
    or out-of-range page is a 404 with a JSON error; an invalid ``page_size`` falls back to the default.
    """

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
