"""Building blocks for evalhub's API serializers.

The rule (docs/DESIGN.md, "One validation path"): a write serializer only *parses* (JSON types, known
keys) and maps API names to model attributes; the model decides what is valid. It builds the model
instance, calls ``full_clean()`` and returns the model's own messages under the API's field names.
No serializer carries a validation rule the model does not have, so the admin, the API and the
manifest import accept and refuse the same things with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, ClassVar

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import CheckConstraint, Max, Q, UniqueConstraint
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from evalhub.api.exceptions import Conflict
from evalhub.jsnum import json_number

ErrorTree = dict[str, Any]


class RejectUnknownFieldsMixin:
    """Refuse a body key that is not a field of the serializer: a typo must not be ignored silently.

    Read-only fields are known (a client may send back what it read); they are ignored as DRF
    ignores them. The error is keyed by the unknown key and lists the accepted ones.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            fields = self.fields  # type: ignore[attr-defined]
            unknown = [key for key in data if key not in fields]
            if unknown:
                accepted = ", ".join(name for name, field in fields.items() if not field.read_only)
                raise serializers.ValidationError({str(key): [f"Unknown field. Accepted fields: {accepted}."] for key in unknown})
        return super().to_internal_value(data)  # type: ignore[misc]


class KeyRelatedField(serializers.SlugRelatedField):
    """A row named by its key (``slotId``, ``budgetName``). A name holding a NUL character is
    refused as ``invalid`` before the lookup: PostgreSQL refuses one in a query (a 500)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("invalid")
        return super().to_internal_value(data)


class PassThroughChoiceField(serializers.ChoiceField):
    """A text field whose choices are documented (an OpenAPI enum) but checked by the model.

    Only the JSON type is checked here; an unknown value reaches ``full_clean()`` and gets the
    model's message, the same one the admin shows.
    """

    default_error_messages = {"not_text": "Must be text."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_text")
        return data


@extend_schema_field({"type": "number", "format": "double", "description": "US dollars, a JSON number."})
class UsdField(serializers.Field):
    """US dollars as a JSON number (``1.5``, ``2``), read from and written to a ``DecimalField``.

    Input must be a finite JSON number: text, booleans, ``NaN`` and infinities are refused
    (docs/failure-modes.md B9). Range and precision are the model's to check. ``None`` reads as
    ``null``.
    """

    default_error_messages = {
        "not_number": "Must be a JSON number of US dollars, such as 1.5.",
        "not_finite": "Must be a finite number of US dollars.",
    }

    def to_representation(self, value: Decimal | None) -> int | float | None:
        return None if value is None else json_number(value)

    def to_internal_value(self, data: Any) -> Decimal:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("not_number")
        if isinstance(data, float) and not math.isfinite(data):
            self.fail("not_finite")
        return Decimal(str(data))


def _condition_fields(condition: Q) -> set[str]:
    names: set[str] = set()
    for child in condition.children:
        if isinstance(child, Q):
            names |= _condition_fields(child)
        else:
            names.add(child[0].split("__")[0])
    return names


def _constraint_messages(model: type[models.Model]) -> dict[str, str]:
    """``{violation message: model field}`` for the model's constraints.

    Django files a constraint's custom message under ``__all__``; the API files it under the field
    it is about, so "Max latency must be more than 0 ms." lands on ``maxLatencyMs`` and "A slot
    with this id already exists." on ``id``. A check constraint over several fields stays a
    non-field error; a uniqueness constraint over several fields is filed under its last field,
    the one that clashes inside the scope of the others ("Another candidate in this slot already
    has this position." on ``position``).
    """
    messages: dict[str, str] = {}
    for constraint in model._meta.constraints:
        if isinstance(constraint, CheckConstraint):
            fields = _condition_fields(constraint.condition)
            if len(fields) == 1:
                messages[str(constraint.violation_error_message)] = fields.pop()
        elif isinstance(constraint, UniqueConstraint) and constraint.fields:
            messages[str(constraint.violation_error_message)] = constraint.fields[-1]
    return messages


class ModelCleanSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """A write serializer that validates by building the model instance and calling ``full_clean()``.

    Subclasses set ``model_class`` and declare fields whose ``source`` is the model attribute (nested
    serializers with ``source="*"`` flatten into it). ``position_scope`` lets a row created
    without a ``position`` go to the end of its list. A uniqueness race lost between validation
    and the insert is answered with the constraint's own message (400), or a 409 when no
    constraint explains it; never a 500.
    """

    model_class: ClassVar[type[models.Model]]

    def position_scope(self, instance: models.Model) -> models.QuerySet | None:
        """The rows among which ``position`` must be unique, or ``None`` when it has no position."""
        return None

    # -- field names ---------------------------------------------------------------------------

    def api_names(self) -> dict[str, str]:
        """``{model attribute: dotted API path}``, derived from the declared fields' sources."""
        names: dict[str, str] = {}

        def walk(serializer: serializers.Serializer, prefix: str) -> None:
            for name, field in serializer.fields.items():
                path = f"{prefix}{name}"
                if isinstance(field, serializers.Serializer) and field.source == "*":
                    walk(field, f"{path}.")
                elif field.source != "*":
                    names.setdefault(field.source_attrs[0], path)

        walk(self, "")
        return names

    def api_errors(self, error: DjangoValidationError) -> ErrorTree:
        """The model's ``ValidationError`` under API field names, nested for dotted paths."""
        names = self.api_names()
        constraint_fields = _constraint_messages(self.model_class)
        tree: ErrorTree = {}

        def add(path: str, message: str) -> None:
            *parents, leaf = path.split(".")
            node = tree
            for part in parents:
                node = node.setdefault(part, {})
            messages = node.setdefault(leaf, [])
            if message not in messages:
                messages.append(message)

        for field, messages in error.message_dict.items():
            for message in messages:
                if field == NON_FIELD_ERRORS and message in constraint_fields:
                    field_name = constraint_fields[message]
                    add(names.get(field_name, field_name), message)
                elif field == NON_FIELD_ERRORS:
                    add(api_settings.NON_FIELD_ERRORS_KEY, message)
                else:
                    add(names.get(field, field), message)
        return tree

    # -- validation and saving ----------------------------------------------------------------

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        instance = self.instance if self.instance is not None else self.model_class()
        for attribute, value in attrs.items():
            setattr(instance, attribute, value)
        if instance._state.adding and "position" not in attrs:
            scope = self.position_scope(instance)
            if scope is not None:
                highest = scope.aggregate(highest=Max("position"))["highest"]
                instance.position = 0 if highest is None else highest + 1
        try:
            instance.full_clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(self.api_errors(exc)) from None
        self._clean_instance = instance
        return attrs

    def _save(self) -> models.Model:
        instance = self._clean_instance
        try:
            with transaction.atomic():
                instance.save()
        except IntegrityError:
            # Another writer inserted a clashing row after full_clean(); say which rule it broke.
            try:
                instance.validate_constraints()
            except DjangoValidationError as exc:
                raise serializers.ValidationError(self.api_errors(exc)) from None
            raise Conflict() from None
        return instance

    def create(self, validated_data: dict[str, Any]) -> models.Model:
        return self._save()

    def update(self, instance: models.Model, validated_data: dict[str, Any]) -> models.Model:
        return self._save()
