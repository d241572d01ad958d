"""Stable page-number pagination for every list endpoint (docs/failure-modes.md B11)."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet
from rest_framework import exceptions
from rest_framework.pagination import Cursor, CursorPagination, PageNumberPagination
from rest_framework.request import Request
from rest_framework.utils.urls import replace_query_param

from evalhub.api.params import MAX_ID, parse_whole_number

#: The most digits of one column of a cursor's position (below MAX_ID, so any cursor the
#: schema's pattern allows is one the API reads).
POSITION_DIGITS = 18
#: From this row on, a page reads its rows' ids first (see :class:`IdsFirstPaginator`).
IDS_FIRST_OFFSET = 500


class IdsFirstPaginator(Paginator):
    """Django's paginator, except that a page past the first ``IDS_FIRST_OFFSET`` rows of a
    queryset is read in two steps: the page's primary keys first (``ORDER BY … LIMIT … OFFSET``
    over the ordering's columns only), then those rows with everything the queryset loads
    (related rows, annotations, prefetches). The database then skips the earlier rows without
    reading them whole — an execution row carries its observation — and with an index in the
    list's order (``execution_api_order_idx`` for executions) it skips them in the index alone,
    so a deep page costs about what the first one does (one query more). Earlier pages are read
    as before, in one query. An order across a join (scorecards, by their execution's run and
    position) still visits each skipped row's index entries on both tables.
    """

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        rows = self.object_list
        if bottom < IDS_FIRST_OFFSET or not isinstance(rows, QuerySet) or rows.query.distinct or rows.query.combinator:
            return self._get_page(rows[bottom:top], number, self)
        ids = list(rows.values_list("pk", flat=True)[bottom:top])
        by_id = {row.pk: row for row in rows.filter(pk__in=ids)}
        return self._get_page([by_id[pk] for pk in ids if pk in by_id], number, self)


class StablePageNumberPagination(PageNumberPagination):
    """Page-number pagination: ``{"count", "next", "previous", "results"}``.

    * ``page_size`` defaults to 50 when left out and is clamped to at most 200; anything but a
      whole number from 1 (blank, ``0``, ``-1``, ``abc``, ``1e3``, ``null``) is a 400
      ``{"page_size": ["..."]}``, as the schema's ``minimum: 1`` says.
    * ``page`` is a number from 1, or ``last``; given blank (``?page=``) it is a 400 ``{"page":
      ["..."]}``, as the schema's ``integer`` says; anything else (``0``, ``-1``, ``1e3``, past
      the end) is a 404 ``{"detail": "Invalid page: ..."}`` saying why, never a 500.

    Every viewset orders its queryset by a unique key, so pages never repeat or skip rows. Deep
    pages read their ids first (:class:`IdsFirstPaginator`), so the last page of a year of
    executions costs about what the first does.
    """

    django_paginator_class = IdsFirstPaginator

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    invalid_page_message = "Invalid page: {message}."

    def get_page_number(self, request: Request, paginator: Any) -> Any:
        """``?page=``: DRF reads a blank one as page 1; here it is an error, as ``page_size`` is."""
        if request.query_params.get(self.page_query_param) == "":
            raise exceptions.ValidationError({self.page_query_param: ["Give a page number from 1 (or last), or leave the parameter out."]})
        return super().get_page_number(request, paginator)

    def get_page_size(self, request: Request) -> int:
        text = request.query_params.get(self.page_size_query_param)
        if text is None:
            return self.page_size
        size = parse_whole_number(text, minimum=1, maximum=MAX_ID)
        if size is None:
            raise exceptions.ValidationError(
                {
                    self.page_size_query_param: [
                        f"Give a page size: a whole number from 1 to {MAX_ID} (at most {self.max_page_size} rows are returned)."
                    ]
                }
            )
        return min(size, self.max_page_size)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": MAX_ID}
                parameter["description"] = (
                    f"Rows per page, default {self.page_size}; more than {self.max_page_size} return {self.max_page_size}."
                )
        return parameters


class KeysetPagination(CursorPagination):
    """DRF's cursor pagination over a composite, unique ordering of whole-number columns (the
    view's ``cursor_ordering``, e.g. ``("-run_id", "position", "id")``): the keyset half of
    :class:`PageOrCursorPagination`.

    DRF's own filter compares the first ordering column only and skips rows sharing its value by
    an offset, which with forty executions a run breaks when a client turns back (DRF documents
    the artefact). Here a cursor's position is every ordering column of the row at the page's
    edge (``after-12.3.456``), always unique, so DRF's offsets stay 0 and a page is the rows past
    that position in ``(a, b, c)`` row order: ``a`` past ``A``, or ``a = A`` and ``b`` past ``B``,
    or ``a = A, b = B`` and ``c`` past ``C`` — with ``a`` at or past ``A`` stated as well, so the
    database reads the page from the ordering's index wherever it starts. A cursor not of the
    links' form (``after-`` or ``before-`` and one whole number per column) is a 400 saying so.
    """

    invalid_cursor_message = "Invalid cursor: use the next or previous link of an earlier page (or an empty cursor= for the first page)."

    def __init__(self, *, ordering: tuple[str, ...], page_size: int) -> None:
        self.ordering = ordering
        self.page_size = page_size

    def get_page_size(self, request: Request) -> int:
        return self.page_size

    def get_ordering(self, request: Request, queryset: QuerySet, view: Any) -> tuple[str, ...]:
        return self.ordering

    def decode_cursor(self, request: Request) -> Cursor | None:
        """The cursor of ``?cursor=``: ``None`` for an empty one (the first page), else
        ``after-<position>`` or ``before-<position>`` as :meth:`encode_cursor` wrote it; anything
        else is a 400."""
        text = request.query_params.get(self.cursor_query_param)
        if text is None or text == "":
            return None
        direction, _, position = text.partition("-")
        if direction not in ("after", "before") or self._position_values(position) is None:
            raise exceptions.ValidationError({self.cursor_query_param: [self.invalid_cursor_message]})
        return Cursor(offset=0, reverse=direction == "before", position=position)

    def encode_cursor(self, cursor: Cursor) -> str:
        """The URL of the page past ``cursor.position`` (``after-12.3.456``), or before it for a
        previous link. Readable rather than DRF's base64: the schema can then state exactly which
        cursors exist (:meth:`PageOrCursorPagination.cursor_pattern`). Positions are unique, so
        DRF never needs an offset here."""
        assert cursor.offset == 0 and cursor.position is not None, cursor
        return replace_query_param(self.base_url, self.cursor_query_param, f"{'before' if cursor.reverse else 'after'}-{cursor.position}")

    def _position_values(self, position: str) -> list[int] | None:
        parts = position.split(".")
        if len(parts) != len(self.ordering):
            return None
        values = [parse_whole_number(part, minimum=0, maximum=MAX_ID) if len(part) <= POSITION_DIGITS else None for part in parts]
        return None if None in values else values  # type: ignore[return-value]

    def _get_position_from_instance(self, instance: Any, ordering: tuple[str, ...]) -> str:
        values = []
        for field in ordering:
            value = instance
            for name in field.lstrip("-").split("__"):
                value = getattr(value, name)
            values.append(str(int(value)))
        return ".".join(values)

    def paginate_queryset(self, queryset: QuerySet, request: Request, view: Any = None) -> list[Any] | None:
        """DRF's ``CursorPagination.paginate_queryset`` with :meth:`keyset_filter` in place of its
        first-column filter (and no offset: positions are unique)."""
        self.request = request
        self.base_url = request.build_absolute_uri()
        self.cursor = self.decode_cursor(request)
        reverse, current_position = (False, None) if self.cursor is None else (self.cursor.reverse, self.cursor.position)
        ordering = tuple(field[1:] if field.startswith("-") else f"-{field}" for field in self.ordering) if reverse else self.ordering
        queryset = queryset.order_by(*ordering)
        if current_position is not None:
            queryset = self.keyset_filter(queryset)
        results = list(queryset[: self.page_size + 1])
        self.page = results[: self.page_size]
        following = self._get_position_from_instance(results[-1], self.ordering) if len(results) > len(self.page) else None
        if reverse:
            self.page.reverse()
            self.has_next, self.next_position = current_position is not None, current_position
            self.has_previous, self.previous_position = following is not None, following
        else:
            self.has_next, self.next_position = following is not None, following
            self.has_previous, self.previous_position = current_position is not None, current_position
        self.display_page_controls = (self.has_previous or self.has_next) and self.template is not None
        return self.page

    def keyset_filter(self, queryset: QuerySet) -> QuerySet:
        """``queryset`` cut to the rows past the cursor's position, in the cursor's direction."""
        cursor = self.cursor
        assert cursor is not None and cursor.position is not None
        values = self._position_values(cursor.position)
        assert values is not None  # decode_cursor checked it
        condition = Q()
        equal: dict[str, int] = {}
        for field, value in zip(self.ordering, values, strict=True):
            name = field.lstrip("-")
            # Past = after in the ordering, or before it for a previous link (a reversed cursor).
            past = "lt" if field.startswith("-") != cursor.reverse else "gt"
            condition |= Q(**equal, **{f"{name}__{past}": value})
            equal[f"{name}__exact"] = value
        first = self.ordering[0]
        leading = "lte" if first.startswith("-") != cursor.reverse else "gte"
        return queryset.filter(Q(**{f"{first.lstrip('-')}__{leading}": values[0]}) & condition)


class PageOrCursorPagination(StablePageNumberPagination):
    """Page numbers, as every list has them, or keyset pages with ``cursor``, for the long lists
    (executions, scorecards), whose deep pages a year of nights makes costly by number.

    * Without ``cursor``: :class:`StablePageNumberPagination` (``?page=N``), unchanged.
    * With ``cursor``: ``{"next", "previous", "results"}`` (no ``count``), in the same order.
      ``?cursor=`` (empty) is the first page; follow ``next`` and ``previous``, whose cursors
      read ``after-<position>`` or ``before-<position>``. A page costs the same wherever it is
      in the list (:class:`KeysetPagination`).
      ``page_size`` works as with page numbers; ``page`` and ``cursor`` together are a 400, and
      so is a cursor not of that form.

    The view names its order as ``cursor_ordering``, whole-number columns ending in a unique one
    (its queryset's ``order_by``).
    """

    cursor_query_param = "cursor"

    def paginate_queryset(self, queryset: QuerySet, request: Request, view: Any = None) -> list[Any] | None:
        self.keyset: KeysetPagination | None = None
        if self.cursor_query_param not in request.query_params:
            return super().paginate_queryset(queryset, request, view)
        if self.page_query_param in request.query_params:
            raise exceptions.ValidationError({self.cursor_query_param: ["Give page or cursor, not both."]})
        self.keyset = KeysetPagination(ordering=tuple(view.cursor_ordering), page_size=self.get_page_size(request))
        page = self.keyset.paginate_queryset(queryset, request, view)
        self.display_page_controls = self.keyset.display_page_controls
        return page

    def to_html(self) -> str:
        return self.keyset.to_html() if self.keyset is not None else super().to_html()

    @staticmethod
    def cursor_pattern(columns: int) -> str:
        """What a cursor of ``columns`` ordering columns looks like: empty, or ``after-`` /
        ``before-`` and the columns' whole numbers joined by dots."""
        number = f"[0-9]{{1,{POSITION_DIGITS}}}"
        return rf"^(|(after|before)-{number}(\.{number}){{{columns - 1}}})$"

    def get_paginated_response(self, data: Any) -> Any:
        if self.keyset is not None:
            return self.keyset.get_paginated_response(data)
        return super().get_paginated_response(data)

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paginated = super().get_paginated_response_schema(schema)
        paginated["required"] = ["next", "previous", "results"]
        paginated["properties"]["count"]["description"] = "Rows in the whole list (page-number pages only: a cursor page has no count)."
        for link in ("next", "previous"):
            paginated["properties"][link]["description"] = f"The {link} page's URL, or null: a page number, or a cursor after ?cursor=."
        return paginated

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        parameters.append(
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": (
                    "Keyset pages instead of page numbers: empty for the first page, then the cursor of a next or "
                    "previous link (after- or before- a row's position; any other value is a 400). Not with page. A deep page costs what the "
                    "first does; the response has no count."
                ),
                "schema": {"type": "string", "pattern": self.cursor_pattern(len(view.cursor_ordering))},
            }
        )
        return parameters
