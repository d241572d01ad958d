"""The API's OpenAPI generator: every operation documents the error bodies it can answer.

DRF answers errors outside the view's own ``@extend_schema(responses=...)``: a 400 from a
serializer, a filter or a query parameter, a 403 from the permission check, a 404 from a lookup
or a page past the end, a 409 from the exception handler (evalhub/api/exceptions.py). This
schema class adds those responses, with their bodies, to each operation that can produce them, so
a client (and the contract fuzzer in tests/test_api_fuzz.py) can rely on the schema for every
status the API returns.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

#: ``{"detail": "..."}``: DRF's body for 403, 404, 405, 409 and a 400 that is about no field.
DETAIL_BODY = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
    "additionalProperties": False,
}

#: A 400: field errors ``{"<field or parameter>": ["..."]}`` (nested objects for nested fields,
#: ``non_field_errors`` for rules over several fields) or ``{"detail": "..."}``.
VALIDATION_BODY = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": {
        "oneOf": [
            {"type": "string"},
            {"type": "array", "items": {}},
            {"type": "object", "additionalProperties": {}},
        ]
    },
}

ERROR_DESCRIPTIONS = {
    "400": 'Invalid input: {"<field or parameter>": ["what to fix", ...]} (nested for nested fields) or {"detail": "..."}.',
    "401": '{"detail": "..."} with WWW-Authenticate: Token: no credentials, or a token that is missing, expired or revoked.',
    "403": '{"detail": "..."}: signed in without the right (a write without a staff account), or a session without its CSRF token.',
    "404": '{"detail": "..."}: no such row, or a page past the end.',
    "409": '{"detail": "..."}: the change conflicts with rows that use this one, or with a write saved at the same moment.',
}


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's ``AutoSchema`` plus the error responses of docs in :data:`ERROR_DESCRIPTIONS`.

    400, 401 and 403 go on every operation; 404 on those with a path parameter or a paginated list;
    409 on writes. A response the view documents itself keeps its description; it gets the body
    schema when it declared none.
    """

    def error_codes(self) -> list[str]:
        codes = ["400", "401", "403"]
        if self.path_regex.count("(?P<") or self._is_list_view():
            codes.append("404")
        if self.method in ("POST", "PUT", "PATCH", "DELETE") and self.path_regex.count("(?P<"):
            codes.append("409")
        return codes

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        """A write serializer's request body also states what its model refuses: unknown keys
        (:class:`evalhub.api.serializers.RejectUnknownFieldsMixin`), blank or over-long text,
        patterns and ranges (:func:`model_field_schema`), so a body the schema calls valid is
        one the model accepts, as far as JSON Schema can say it."""
        from evalhub.api.serializers import ModelCleanSerializer, RejectUnknownFieldsMixin

        schema = super()._map_basic_serializer(serializer, direction)
        instance = serializer if isinstance(serializer, serializers.Serializer) else serializer()
        if direction != "request" or not isinstance(instance, RejectUnknownFieldsMixin):
            return schema
        schema["additionalProperties"] = False
        model = getattr(instance, "model_class", None)
        if model is None:
            model = getattr(getattr(instance, "parent", None), "model_class", None)
        if model is None or not isinstance(instance, ModelCleanSerializer | RejectUnknownFieldsMixin):
            return schema
        bounds = _check_bounds(model)
        names = {field.name for field in model._meta.concrete_fields}
        for name, field in instance.fields.items():
            source = field.source_attrs[0] if field.source_attrs else ""
            if field.read_only or source not in names or name not in schema.get("properties", {}):
                continue
            model_field = model._meta.get_field(source)
            if isinstance(model_field, models.ForeignKey):
                continue
            schema["properties"][name].update(model_field_schema(model_field, bounds.get(source, {})))
        return schema

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code in self.error_codes():
            entry = responses.setdefault(code, {"description": ERROR_DESCRIPTIONS[code]})
            if not entry.get("content"):
                entry["content"] = {"application/json": {"schema": VALIDATION_BODY if code == "400" else DETAIL_BODY}}
        return responses


def _pattern(regex: str) -> str:
    """A Python ``\\A...\\Z`` pattern as OpenAPI writes it (``^...$``)."""
    return regex.replace(r"\A", "^").replace(r"\Z", "$")


def _check_bounds(model: type[models.Model]) -> dict[str, dict[str, Any]]:
    """``{field: {"minimum"/"exclusiveMinimum"/...: n}}`` from single-field check constraints such
    as ``Q(max_latency_ms__gt=0)``."""
    keys = {"gt": "exclusiveMinimum", "gte": "minimum", "lt": "exclusiveMaximum", "lte": "maximum"}
    bounds: dict[str, dict[str, Any]] = {}
    for constraint in model._meta.constraints:
        condition = getattr(constraint, "condition", None)
        if not isinstance(constraint, models.CheckConstraint) or condition is None or condition.connector != "AND" or condition.negated:
            continue
        for child in condition.children:
            if isinstance(child, tuple) and "__" in child[0] and isinstance(child[1], int | float | Decimal):
                name, lookup = child[0].rsplit("__", 1)
                if lookup in keys:
                    bounds.setdefault(name, {})[keys[lookup]] = float(child[1]) if isinstance(child[1], Decimal) else child[1]
    return bounds


def model_field_schema(model_field: models.Field, bounds: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema keywords a value must meet for ``model_field``'s own rules: ``minLength: 1``
    for text that may not be blank, ``maxLength``, ``pattern`` from a regex validator, and
    ``minimum``/``maximum`` from value validators and single-field check constraints."""
    schema: dict[str, Any] = {}
    if model_field.choices:
        return schema  # an enum already says it all
    if isinstance(model_field, models.CharField | models.TextField):
        if not model_field.blank:
            schema["minLength"] = 1
        if model_field.max_length:
            schema["maxLength"] = model_field.max_length
    if isinstance(model_field, models.DecimalField):
        # The column's precision: a value with more decimal places or digits is refused.
        schema["multipleOf"] = float(Decimal(1).scaleb(-model_field.decimal_places))
        schema["maximum"] = float(
            Decimal(10) ** (model_field.max_digits - model_field.decimal_places) - Decimal(1).scaleb(-model_field.decimal_places)
        )
    for validator in model_field.validators:
        if isinstance(validator, RegexValidator) and not validator.inverse_match and not validator.flags:
            schema["pattern"] = _pattern(validator.regex.pattern)
        elif isinstance(validator, MinValueValidator) and not callable(validator.limit_value):
            schema["minimum"] = max(schema.get("minimum", validator.limit_value), validator.limit_value)
        elif isinstance(validator, MaxValueValidator) and not callable(validator.limit_value):
            schema["maximum"] = min(schema.get("maximum", validator.limit_value), validator.limit_value)
    # OpenAPI 3.0: exclusiveMinimum/exclusiveMaximum are booleans beside minimum/maximum.
    integral = isinstance(model_field, models.IntegerField)
    for key, value in bounds.items():
        if key == "exclusiveMinimum":
            if integral:
                schema["minimum"] = max(schema.get("minimum", value + 1), value + 1)
            elif schema.get("minimum", value) <= value:
                schema["minimum"], schema["exclusiveMinimum"] = value, True
        elif key == "exclusiveMaximum":
            if integral:
                schema["maximum"] = min(schema.get("maximum", value - 1), value - 1)
            elif schema.get("maximum", value) >= value:
                schema["maximum"], schema["exclusiveMaximum"] = value, True
        elif key == "minimum":
            schema["minimum"] = max(schema.get("minimum", value), value)
        else:
            schema["maximum"] = min(schema.get("maximum", value), value)
    for key in ("minimum", "maximum"):
        if isinstance(schema.get(key), Decimal):
            schema[key] = float(schema[key])
    return schema
