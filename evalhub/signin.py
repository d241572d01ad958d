"""Sign-in hooks for django-axes, which records every failed sign-in attempt with its user name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest

from evalhub.secrets import contains_secret, redact


def attempted_username(request: HttpRequest, credentials: Mapping[str, Any] | None = None) -> str | None:
    """The user name of a sign-in attempt as django-axes stores and shows it, with anything
    secret-shaped redacted (a key pasted into the wrong field is not kept). ``None`` when none
    was given, as axes' own lookup returns."""
    if credentials:
        name = credentials.get("username")
    else:
        name = getattr(request, "data", request.POST).get("username")
    return redact(name) if isinstance(name, str) else name


class SignInForm(AuthenticationForm):
    """Django's sign-in form, except that a refused user name that looks like a secret (a key
    pasted into the wrong field) is not shown back in the page that asks again: the field is
    left empty, as the password's is."""

    def is_valid(self) -> bool:
        valid = super().is_valid()
        name = self.data.get("username") if self.is_bound else None
        if not valid and isinstance(name, str) and contains_secret(name):
            self.data = self.data.copy()
            self.data["username"] = ""
        return valid
