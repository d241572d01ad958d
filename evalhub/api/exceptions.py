"""The API's error handler: every error is JSON with a readable message, never a 500, never a secret.

* Django ``ValidationError`` → 400 with field errors (serializers normally convert these first,
  renaming model fields to API fields; this is the fallback for anything that escapes).
* ``ProtectedError``/``RestrictedError`` (deleting a row others still use) → 409 naming the users.
* ``IntegrityError`` (a concurrent write won the race after validation passed) → 409.
* Every string in an error body is passed through :func:`evalhub.secrets.redact`, so an echoed
  value (an unknown field name, a query parameter, a choice) can never carry a secret-shaped
  string back to the client (docs/failure-modes.md B12).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import ProtectedError, RestrictedError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from evalhub.secrets import redact_data

CONFLICT_MESSAGE = "This change conflicts with another change saved at the same moment; reload and try again."


class Conflict(exceptions.APIException):
    """409: the request is valid on its own but clashes with the current state of the data."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = CONFLICT_MESSAGE
    default_code = "conflict"


def protected_message(exc: ProtectedError | RestrictedError) -> str:
    """ "Cannot delete: still used by candidate codex-luna, candidate opencode-kimi. ..." (five named at most)."""
    objects = exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
    users = sorted({f"{obj._meta.verbose_name} {obj}" for obj in objects})
    shown = ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
    return f"Cannot delete: still used by {shown}. Move or delete those first."


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail=detail)
    elif isinstance(exc, (ProtectedError, RestrictedError)):
        exc = Conflict(protected_message(exc))
    elif isinstance(exc, IntegrityError):
        exc = Conflict()
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = redact_data(response.data)
    return response
