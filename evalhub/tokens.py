"""API tokens (django-rest-knox): stored as a SHA-512 digest with an expiry, shown once when made.

One module for the admin and ``manage.py api_token``: both create and revoke through here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth import get_user_model
from knox.models import AuthToken

#: The longest lifetime a token may be given, in days.
MAX_TOKEN_DAYS = 3650


class TokenError(Exception):
    """A token request that cannot be done; the message says what to fix."""


def token_user(username: str) -> Any:
    """The active user called ``username``; :class:`TokenError` otherwise."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise TokenError(f"no user called {username!r}; create one first (manage.py createsuperuser, or the admin)")
    if not user.is_active:
        raise TokenError(f"user {username!r} is inactive; activate it in the admin first")
    return user


def create_token(*, user: Any, days: int) -> tuple[AuthToken, str]:
    """A new token for ``user`` expiring in ``days`` days (1..MAX_TOKEN_DAYS): the stored row and
    the token itself, which is never stored and cannot be shown again."""
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_TOKEN_DAYS:
        raise TokenError(f"a token's lifetime must be a whole number of days from 1 to {MAX_TOKEN_DAYS}, not {days!r}")
    return AuthToken.objects.create(user=user, expiry=dt.timedelta(days=days))


def revoke_tokens(*, user: Any, key: str | None = None) -> int:
    """Delete ``user``'s tokens, or only the one whose first characters are ``key`` (the
    ``token_key`` that ``manage.py api_token list`` shows); returns how many were revoked."""
    tokens = AuthToken.objects.filter(user=user)
    if key is not None:
        key = key.strip()
        if len(key) < 8:
            raise TokenError("give at least the first 8 characters of the token (as `api_token list` shows them)")
        tokens = tokens.filter(token_key__startswith=key[:15])
    count, _ = tokens.delete()
    return count
