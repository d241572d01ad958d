"""Validation shared by every evalhub model.

Every writer (admin, API, manifest import, shell) reaches these through ``full_clean()``
(docs/DESIGN.md, "One validation path").
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from evalhub.credentials import reserved_name_reason
from evalhub.jsonio import MAX_DEPTH, json_depth, lone_surrogate
from evalhub.scan_views import identity_text_problem
from evalhub.secrets import contains_secret, env_example, redact, redact_data, secret_kinds

#: Positions above this are reserved for the moment of a reorder (:data:`REORDER_OFFSET`).
MAX_POSITION = 999_999
#: Reorders use positions above this offset for a moment, so unique (slot, position) never clashes.
REORDER_OFFSET = MAX_POSITION + 1
#: The largest whole number every supported database stores in an integer column.
MAX_INTEGER = 2_147_483_647

position_validators = [MaxValueValidator(MAX_POSITION, message=f"Position must be at most {MAX_POSITION}.")]


_SECRET_MESSAGE = _(
    "This looks like a secret (%(kinds)s). Store the name of the environment variable that holds it (such as %(example)s), never the value."
)
_FIELD_SECRET_MESSAGE = _(
    "%(field)s looks like it contains a secret (%(kinds)s). Store the name of the environment "
    "variable that holds it (such as %(example)s), never the value."
)


def _params(kinds: list[str]) -> dict[str, str]:
    return {"kinds": ", ".join(kinds), "example": env_example(kinds)}


def validate_no_secrets(value: object) -> None:
    """Django validator: raise ``ValidationError(code="secret_shaped")`` if ``value`` (text or
    JSON-like data, dict keys included) holds a secret shape. The message names the kind(s)
    and what to store instead; it never contains the value or any part of it."""
    kinds = secret_kinds(value)
    if kinds:
        raise ValidationError(_SECRET_MESSAGE, code="secret_shaped", params=_params(kinds))


def secret_error_for(field_label: str, value: object) -> ValidationError | None:
    """The ``secret_shaped`` error for a field, or ``None`` if ``value`` is clean.

    The message starts with ``field_label`` ("Required env looks like it contains a secret
    (OpenAI API key). …") and, like ``validate_no_secrets``, never echoes the value.
    """
    kinds = secret_kinds(value)
    if not kinds:
        return None
    return ValidationError(
        _FIELD_SECRET_MESSAGE,
        code="secret_shaped",
        params={"field": field_label, **_params(kinds)},
    )


# \A and \Z, not ^ and $: "$" also matches before a trailing newline, and "codex-luna\n" would
# be a second candidate beside codex-luna.
KEY_PATTERN = r"\A[a-z0-9][a-z0-9._-]*\Z"
#: The name pattern as JSON Schema / OpenAPI writes it; code matches it with ``fullmatch``.
ENV_NAME_PATTERN = re.compile(r"^[A-Z_][A-Z0-9_]*$")

key_validator = RegexValidator(
    KEY_PATTERN,
    message="Use lowercase letters, digits, '.', '_' and '-' only, starting with a letter or digit (for example codex-strong).",
    code="invalid_key",
)


def validate_identity_text(value: object) -> None:
    """Django validator for text that decides identity — model names, reasoning efforts,
    profiles (see :func:`evalhub.scan_views.identity_text_problem`); raises
    ``ValidationError(code="not_plain_text")`` naming the character to remove or the form to write."""
    if isinstance(value, str):
        problem = identity_text_problem(value)
        if problem is not None:
            raise ValidationError(f"This value {problem}.", code="not_plain_text")


class SecretFreeModel(models.Model):
    """Rejects secret-shaped data in every text and JSON field of the model.

    ``clean_fields()`` scans each ``CharField``/``TextField``/``JSONField`` value (JSON walked
    deeply, keys included) and raises ``ValidationError`` keyed by field, naming the field and the
    kind of secret it resembles but never echoing the value. The secret error is added even when
    the field has other errors (a secret typed into a choice field is still called a secret).

    ``full_clean()`` then redacts every message it raises: Django's own messages echo values
    ("Value '…' is not a valid choice.") and so do the case schema's ("unknown field …"), and a
    validation error must never carry a secret to a page, an API response or a log
    (docs/failure-modes.md B8 and B12).
    """

    class Meta:
        abstract = True

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> Any:
        """A row as loaded, with every secret-shaped string of its text and JSON fields replaced
        by the redaction marker: a row written around ``full_clean()`` (``loaddata``,
        ``objects.update``) never shows its secret on a page, in the API, the admin or a schedule
        built from it, and a schedule built from it carries the marker its executions are refused
        by (schedules/services.py). Clean rows load unchanged."""
        instance = super().from_db(db, field_names, values)
        for field in cls._meta.concrete_fields:
            if isinstance(field, (models.CharField, models.TextField, models.JSONField)) and field.attname in instance.__dict__:
                value = instance.__dict__[field.attname]
                if value and contains_secret(value):
                    instance.__dict__[field.attname] = redact_data(value)
        return instance

    def clean_fields(self, exclude: Any = None) -> None:
        errors: dict[str, list[ValidationError]] = {}
        try:
            super().clean_fields(exclude=exclude)
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        exclude = set(exclude or ())
        for field in self._meta.concrete_fields:
            if field.name in exclude:
                continue
            if not isinstance(field, (models.CharField, models.TextField, models.JSONField)):
                continue
            label = str(field.verbose_name).capitalize()
            value = getattr(self, field.attname)
            shape_error = storage_error_for(label, value)
            if shape_error is not None:
                errors[field.name] = [shape_error]
                continue
            error = secret_error_for(label, value)
            if error is not None:
                errors[field.name] = [error, *errors.get(field.name, [])]
        if errors:
            raise redacted_error(ValidationError(errors))

    def full_clean(self, exclude: Any = None, validate_unique: bool = True, validate_constraints: bool = True) -> None:
        try:
            super().full_clean(exclude=exclude, validate_unique=validate_unique, validate_constraints=validate_constraints)
        except ValidationError as exc:
            raise redacted_error(exc) from None


def storage_error_for(label: str, value: Any) -> ValidationError | None:
    """An error when a text or JSON value cannot be stored the same way on SQLite and PostgreSQL.

    NUL characters (PostgreSQL refuses them in text and jsonb), lone surrogates (no UTF-8 encodes
    them: SQLite's text write or the API's response fails, PostgreSQL refuses them in jsonb) and
    JSON nested deeper than ``evalhub.jsonio.MAX_DEPTH`` are rejected whatever the writer (API,
    admin, import, shell).
    """
    if json_depth(value) > MAX_DEPTH:
        return ValidationError(f"{label} is nested too deeply: at most {MAX_DEPTH} levels are allowed.", code="too_deep")
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return ValidationError(
                    f"{label} contains a NUL character (\\u0000), which cannot be stored; remove it.", code="null_character"
                )
            surrogate = lone_surrogate(item)
            if surrogate is not None:
                return ValidationError(
                    f"{label} contains {surrogate}, half of a surrogate pair, which cannot be stored; remove it.", code="lone_surrogate"
                )
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def redacted_error(error: ValidationError) -> ValidationError:
    """``error`` with every message that holds a secret-shaped string redacted (codes kept)."""

    def scrub(item: ValidationError) -> ValidationError:
        message = str(item.message % item.params) if item.params else str(item.message)
        clean = redact(message)
        if clean == message:
            return item
        return ValidationError(clean, code=item.code)

    if hasattr(error, "error_dict"):
        return ValidationError({field: [scrub(item) for item in items] for field, items in error.error_dict.items()})
    return ValidationError([scrub(item) for item in error.error_list])


def env_name_errors(value: Any, *, label: str) -> list[str]:
    """Problems with a list of environment variable names, as sentences (empty when valid).

    A valid value is a JSON list of unique strings each matching ``^[A-Z_][A-Z0-9_]*$``
    (docs/failure-modes.md B8: a bare string, ``null``, a dict or a number are all rejected), none
    of them a variable a runtime under test must never be handed
    (:func:`evalhub.credentials.reserved_name_reason`: evalhub's own settings, loader and
    interpreter variables, the process basics the harness sets itself).
    """
    if not isinstance(value, list):
        return [f'{label} must be a list of environment variable names such as ["OPENAI_API_KEY"].']
    problems = []
    seen: set[str] = set()
    for index, item in enumerate(value, start=1):
        if not isinstance(item, str):
            problems.append(f"{label} item {index} must be a text name, not {type(item).__name__}.")
        elif not ENV_NAME_PATTERN.fullmatch(item):
            problems.append(
                f"{label} item {index} is not an environment variable name: use capital letters, "
                "digits and underscores, starting with a letter or underscore (for example OPENAI_API_KEY)."
            )
        elif item in seen:
            problems.append(f"{label} lists {item} twice.")
        elif reason := reserved_name_reason(item):
            problems.append(
                f"{label} item {index} ({item}) cannot be a candidate's: {reason}, and the runtime under test "
                "is handed every required variable; remove it and list only the candidate's own keys (for example OPENAI_API_KEY)."
            )
        else:
            seen.add(item)
    return problems
