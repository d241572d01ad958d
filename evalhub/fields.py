"""Model fields shared by the apps."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models


def storable_text(text: str) -> str:
    """``text`` with every NUL character replaced by U+FFFD, for a text column written from what
    evalhub did not type itself (a runtime's stderr, a provider's or a webhook's answer).

    PostgreSQL refuses NUL in text (``DataError``) where SQLite stores it: a NUL a runtime
    printed would fail the write that records its execution, there only. What people type is
    refused with a message instead (``evalhub.validation.storage_error_for``); a JSON document
    needs neither, as its text escapes NUL (``\\u0000``)."""
    return text.replace("\x00", "\ufffd")


class EncodedDocument(str):
    """A document's JSON text exactly as :class:`DocumentField` encodes the document
    (``json.dumps`` with ``ensure_ascii=False, allow_nan=False``), given to the field by a caller
    that encoded it already for another use: written as it is, not encoded again."""


class DocumentField(models.TextField):
    """A JSON document stored as text, so its key order survives on every database.

    PostgreSQL's ``jsonb`` re-sorts object keys, which would make a stored reference document
    (a schedule's candidates, an observation, a scorecard, a report) come back in another order
    than it was built in, and exports would no longer be byte-identical to the reference. Values
    are written with ``json.dumps`` (non-finite numbers refused) and read back with ``json.loads``;
    Python dicts keep insertion order. Use ``JSONField`` for data that is queried by key instead.
    """

    description = "A JSON document stored as text (key order preserved)"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        return json.loads(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                raise ValidationError("Enter a valid JSON document.", code="invalid") from None
        return value

    def get_prep_value(self, value: Any) -> Any:
        if value is None:
            return None
        if type(value) is EncodedDocument:
            return str(value)
        return json.dumps(value, ensure_ascii=False, allow_nan=False)

    def value_to_string(self, obj: Any) -> str:
        return self.get_prep_value(self.value_from_object(obj))

    def formfield(self, **kwargs: Any) -> Any:
        from django import forms

        return super().formfield(**{"form_class": forms.JSONField, **kwargs})
