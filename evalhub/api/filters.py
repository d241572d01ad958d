"""Filter types shared by the API's filter sets."""

from __future__ import annotations

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from evalhub.api.params import MAX_ID


class WholeNumberField(forms.IntegerField):
    """An integer form field for a query parameter: left out, it is not given; given blank
    (``?rotation_day=``), it is an error, as the schema's ``integer`` says."""

    def to_python(self, value: object) -> int | None:
        if value == "":
            raise forms.ValidationError("Give a whole number, or leave the parameter out.", code="blank")
        return super().to_python(value)


class WholeNumberFilter(django_filters.Filter):
    """A whole number within ``min_value``..``max_value`` (no decimals, no exponents); the
    OpenAPI schema states the same range, so the schema and the filter refuse the same values."""

    field_class = WholeNumberField

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        schema = {"type": "integer"}
        if kwargs.get("min_value") is not None:
            schema["minimum"] = kwargs["min_value"]
        if kwargs.get("max_value") is not None:
            schema["maximum"] = kwargs["max_value"]
        extend_schema_field(schema)(self)


class IdFilter(WholeNumberFilter):
    """A row id: a whole number from 1 to 2**63 - 1; anything else is a 400 saying so."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class StrictBooleanField(forms.Field):
    """``true`` or ``false`` (any case; blank means "not given"); anything else is an error.

    django-filter's ``BooleanFilter`` reads an unknown value as "not given", so ``?refresh=yes``
    would quietly list everything while the schema says the parameter is a boolean.
    """

    default_error_messages = {"invalid": "Give true or false."}

    def to_python(self, value: object) -> bool | None:
        if value in (None, ""):
            return None
        text = str(value).lower()
        if text not in ("true", "false"):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return text == "true"


class StrictBooleanFilter(django_filters.BooleanFilter):
    """A boolean filter that refuses what is not ``true`` or ``false`` with a 400 naming it."""

    field_class = StrictBooleanField
