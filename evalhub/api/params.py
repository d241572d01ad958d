"""Query parameters the API parses itself (outside django-filter): unknown names refused, whole
numbers read without ever calling ``int()`` on text it cannot hold.

``int()`` raises on more than 4,300 digits and the database on more than a 64-bit id: both would
be a 500. :class:`WholeNumberParam` checks the digits first, and gives the schema its range, so
the OpenAPI document and the parser refuse the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.settings import api_settings

#: The largest primary key any supported database stores (2**63 - 1, a signed 64-bit integer).
MAX_ID = 2**63 - 1


def reject_unknown_params(request: Request, accepted: tuple[str, ...], *, repeatable: tuple[str, ...] = ()) -> None:
    """A 400 ``{"<name>": ["Unknown query parameter. Accepted: ..."]}`` for any parameter not in
    ``accepted`` (``"This endpoint takes no query parameters."`` when ``accepted`` is empty), then
    :func:`reject_repeated_params` for those given twice that are not ``repeatable``.

    ``format`` (DRF's ``URL_FORMAT_OVERRIDE``) is always accepted, as the viewsets accept it
    (``evalhub/api/views.py``): the browsable API links every page to ``?format=json`` and
    ``?format=api``, and content negotiation has read it before the view runs."""
    errors = unknown_param_errors(request, accepted)
    if errors:
        raise exceptions.ValidationError(errors)
    reject_repeated_params(request, repeatable=repeatable)


def unknown_param_errors(request: Request, accepted: tuple[str, ...]) -> dict[str, list[str]]:
    """``{"<name>": ["Unknown query parameter. Accepted: ..."]}`` for each parameter not in
    ``accepted`` nor ``format`` (see :func:`reject_unknown_params`), for a view that reports them
    with its other parameters' errors; empty when there are none."""
    unknown = [name for name in request.query_params if name not in accepted and name != api_settings.URL_FORMAT_OVERRIDE]
    message = f"Unknown query parameter. Accepted: {', '.join(accepted)}." if accepted else "This endpoint takes no query parameters."
    return {name: [message] for name in unknown}


def reject_repeated_params(request: Request, *, repeatable: tuple[str, ...] = ()) -> None:
    """A 400 ``{"<name>": ["Given 2 times: ..."]}`` for a parameter that takes one value given more
    than once (``?run=1&run=2``): read with ``get``, it would quietly mean the last one."""
    repeated = {name: len(values) for name, values in request.query_params.lists() if len(values) > 1 and name not in repeatable}
    if repeated:
        raise exceptions.ValidationError(
            {name: [f"Given {count} times: this parameter takes one value; give it once."] for name, count in repeated.items()}
        )


def parse_whole_number(text: str, *, minimum: int, maximum: int) -> int | None:
    """``text`` as an int when it is plain ASCII digits (``"10"``; not ``"1e1"``, ``"10.0"``,
    ``" 10"``, ``"-1"``) between ``minimum`` and ``maximum``; else ``None``. Never raises."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > len(str(maximum)):
        return None
    value = int(text)
    return value if minimum <= value <= maximum else None


@dataclass(frozen=True)
class WholeNumberParam:
    """One optional whole-number query parameter: its OpenAPI description and its parser.

    ``message`` is the 400's text, under the parameter's name: ``{"limit": ["..."]}``.
    """

    name: str
    description: str
    message: str
    minimum: int = 1
    maximum: int = MAX_ID
    required: bool = False

    @property
    def openapi(self) -> OpenApiParameter:
        """The parameter for ``@extend_schema(parameters=...)``: an integer with its range."""
        schema = {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}
        return OpenApiParameter(self.name, schema, required=self.required, description=self.description)

    def parse(self, request: Request) -> int | None:
        """The value, ``None`` when absent (or blank); a 400 naming the parameter when it is not a
        whole number in range, or when a required one is missing."""
        text = request.query_params.get(self.name, "")
        if text == "":
            if self.required:
                raise exceptions.ValidationError({self.name: ["This parameter is required."]})
            return None
        value = parse_whole_number(text, minimum=self.minimum, maximum=self.maximum)
        if value is None:
            raise exceptions.ValidationError({self.name: [self.message]})
        return value
