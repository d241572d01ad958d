"""API tokens in the admin: created with a lifetime (shown once, stored hashed), revoked by deleting.

Replaces django-rest-knox's own admin, which lists digests and allows tokens that never expire.
The new token is shown on the page that answers the form, never through the messages framework:
its default storage is a cookie, which would carry the token back on every request until read.

Also django-axes' sign-in attempts list, whose "Clean up expired attempts" action is a 500 as the
library ships it (:class:`SignInAttemptAdmin`).
"""

from __future__ import annotations

from typing import Any

from axes.admin import AccessAttemptAdmin
from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from knox.models import AuthToken

from evalhub.admin_forms import CheckedActionsMixin
from evalhub.tokens import MAX_TOKEN_DAYS, create_token


class TokenCreateForm(forms.ModelForm):
    days = forms.IntegerField(min_value=1, max_value=MAX_TOKEN_DAYS, initial=90, help_text="Days until the token expires.")

    class Meta:
        model = AuthToken
        fields = ["user"]


if admin.site.is_registered(AuthToken):
    admin.site.unregister(AuthToken)


@admin.register(AuthToken)
class AuthTokenAdmin(CheckedActionsMixin, admin.ModelAdmin):
    list_display = ("user", "key_start", "created", "expiry", "expired")
    list_select_related = ("user",)
    search_fields = ("user__username",)
    readonly_fields = ("user", "key_start", "created", "expiry")
    raw_id_fields = ("user",)

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"] = TokenCreateForm
            kwargs["fields"] = ["user", "days"]
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["user", "days"] if obj is None else ["user", "key_start", "created", "expiry"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return () if obj is None else self.readonly_fields

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a token is made and revoked, never edited

    def save_model(self, request: HttpRequest, obj: AuthToken, form: Any, change: bool) -> None:
        token, secret = create_token(user=form.cleaned_data["user"], days=form.cleaned_data["days"])
        obj.pk, obj.digest = token.pk, token.digest
        request._evalhub_new_token = (token, secret)  # read once by response_add, never stored

    def response_add(self, request: HttpRequest, obj: AuthToken, post_url_continue: str | None = None) -> HttpResponse:
        """The token, once, on a page of its own that no cache keeps (``Cache-Control: no-store``)."""
        token, secret = request._evalhub_new_token
        response = TemplateResponse(
            request,
            "admin/knox/authtoken/created.html",
            {**self.admin_site.each_context(request), "opts": self.opts, "token": token, "secret": secret},
        )
        response["Cache-Control"] = "no-store"
        return response

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        return None  # the admin log would store the row's text: nothing of a token goes there

    @admin.display(description="starts with")
    def key_start(self, token: AuthToken) -> str:
        return f"{token.token_key[:8]}…"

    @admin.display(boolean=True)
    def expired(self, token: AuthToken) -> bool:
        return bool(token.expiry and token.expiry < timezone.now())


class SignInAttemptAdmin(CheckedActionsMixin, AccessAttemptAdmin):
    """django-axes' admin of sign-in attempts, with its clean-up action working.

    The action asks axes' handler for the attempts older than the cool-off, counted back from
    ``request.axes_attempt_time``; axes sets that attribute only on the requests of a sign-in
    (its middleware and login signals), so on the admin's POST the action raised AttributeError,
    a 500, whatever rows were selected. Here the request gets axes' attributes first.
    """

    @admin.action(description=_("Clean up expired attempts"))
    def cleanup_expired_attempts(self, request: HttpRequest, queryset: Any) -> None:
        AxesProxyHandler.update_request(request)
        super().cleanup_expired_attempts(request, queryset)


if admin.site.is_registered(AccessAttempt):
    admin.site.unregister(AccessAttempt)
admin.site.register(AccessAttempt, SignInAttemptAdmin)
