"""API token authentication: django-rest-knox's, made safe for any bytes a client sends.

knox decodes the token as UTF-8 without a guard, so ``Authorization: Token \\xff\\xfe`` would be a
500; here it is the 401 every other bad token gets.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's ``Authorization: Token <token>``; a token that is not UTF-8 text is a 401
    (``Invalid token.``), never an error."""

    def authenticate_credentials(self, token: bytes) -> Any:
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        return super().authenticate_credentials(token)


class TokenScheme(KnoxTokenScheme):
    """The OpenAPI security scheme of :class:`TokenAuthentication` (knox's, by name ``knoxApiToken``)."""

    target_class = "evalhub.api.authentication.TokenAuthentication"
