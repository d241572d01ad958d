"""API tokens are stored hashed with an expiry (django-rest-knox), made and revoked from the admin
and ``manage.py api_token``; sign-in attempts are rate-limited (django-axes)."""

from __future__ import annotations

import datetime as dt
import hashlib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken

from evalhub.tokens import TokenError, create_token, revoke_tokens

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ci", password="pw-ci-12345")


def api(client, token: str) -> int:
    """The status of an API read with ``token``; a refused token answers 401 or 403 (DRF picks by
    its first authentication class), folded to 401 here."""
    status = client.get(reverse("slot-list"), HTTP_AUTHORIZATION=f"Token {token}").status_code
    return 401 if status in (401, 403) else status


def test_a_token_is_stored_only_as_a_digest_and_expires(client, user) -> None:
    row, secret = create_token(user=user, days=30)
    assert api(client, secret) == 200
    stored = AuthToken.objects.get()
    assert secret not in (stored.digest, stored.token_key) and stored.digest == hashlib.sha512(secret.encode()).hexdigest()
    assert abs(stored.expiry - (timezone.now() + dt.timedelta(days=30))) < dt.timedelta(minutes=1)
    AuthToken.objects.update(expiry=timezone.now() - dt.timedelta(seconds=1))
    assert api(client, secret) == 401


def test_a_revoked_or_made_up_token_is_refused(client, user) -> None:
    _, first = create_token(user=user, days=1)
    _, second = create_token(user=user, days=1)
    assert revoke_tokens(user=user, key=first[:8]) == 1
    assert api(client, first) == 401 and api(client, second) == 200
    assert api(client, "0" * 64) == 401


@pytest.mark.parametrize("days", [0, -1, 3651, True])
def test_a_token_lifetime_out_of_range_is_refused(user, days) -> None:
    with pytest.raises(TokenError, match="whole number of days from 1 to 3650"):
        create_token(user=user, days=days)


def test_the_command_creates_lists_and_revokes(client, user) -> None:
    out, err = StringIO(), StringIO()
    call_command("api_token", "create", "ci", "--days", "7", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert "shown once" in err.getvalue() and api(client, secret) == 200
    listed = StringIO()
    call_command("api_token", "list", "ci", stdout=listed)
    assert listed.getvalue().startswith(f"{secret[:8]}…") and "active" in listed.getvalue() and secret not in listed.getvalue()
    revoked = StringIO()
    call_command("api_token", "revoke", "ci", stdout=revoked)
    assert revoked.getvalue().strip() == "revoked 1 token(s) of ci" and api(client, secret) == 401


def test_the_command_says_what_to_fix(user) -> None:
    with pytest.raises(CommandError, match="no user called 'nobody'"):
        call_command("api_token", "create", "nobody")
    with pytest.raises(CommandError, match="whole number of days"):
        call_command("api_token", "create", "ci", "--days", "0")
    with pytest.raises(CommandError, match="at least the first 8 characters"):
        call_command("api_token", "revoke", "ci", "--key", "abc")


def test_the_admin_makes_a_token_shown_once_and_revokes_it(staff_client, user) -> None:
    response = staff_client.post(reverse("admin:knox_authtoken_add"), {"user": user.pk, "days": 14})
    text = response.content.decode()
    assert response.status_code == 200 and "only time the token is shown" in text
    assert "no-store" in response["Cache-Control"].split(", ")
    (row,) = AuthToken.objects.filter(user=user)
    secret = text.split('id="new-token" type="text" readonly size="72" value="')[1].split('"')[0]
    # Never through the messages framework: its cookie would carry the token on every request.
    assert all(secret not in morsel.value for morsel in response.cookies.values())
    assert secret not in str(staff_client.cookies) and secret not in staff_client.get(reverse("admin:index")).content.decode()
    assert hashlib.sha512(secret.encode()).hexdigest() == row.digest
    assert abs(row.expiry - (timezone.now() + dt.timedelta(days=14))) < dt.timedelta(minutes=1)
    changelist = staff_client.get(reverse("admin:knox_authtoken_changelist")).content.decode()
    assert secret not in changelist and f"{secret[:8]}…" in changelist
    staff_client.post(reverse("admin:knox_authtoken_delete", args=[row.pk]), {"post": "yes"})
    assert not AuthToken.objects.exists()


def test_the_admin_refuses_a_lifetime_out_of_range(staff_client, user) -> None:
    response = staff_client.post(reverse("admin:knox_authtoken_add"), {"user": user.pk, "days": 0})
    assert response.status_code == 200 and "greater than or equal to 1" in response.content.decode()
    assert not AuthToken.objects.exists()


def test_sign_in_is_locked_after_five_failures_even_with_the_right_password(client, user, settings) -> None:
    for _ in range(4):
        assert client.post(reverse("login"), {"username": "ci", "password": "wrong"}).status_code == 200
    assert client.post(reverse("login"), {"username": "ci", "password": "wrong"}).status_code == 429  # the fifth
    locked = client.post(reverse("login"), {"username": "ci", "password": "pw-ci-12345"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    # Another user name from the same address is not locked out.
    assert client.post(reverse("login"), {"username": "other", "password": "wrong"}).status_code == 200


def test_the_admin_sign_in_is_rate_limited_too(client, user) -> None:
    for _ in range(5):
        client.post(reverse("admin:login"), {"username": "ci", "password": "wrong"})
    assert client.post(reverse("admin:login"), {"username": "ci", "password": "pw-ci-12345"}).status_code == 429


def test_a_success_resets_the_count(client, user) -> None:
    for _ in range(4):
        client.post(reverse("login"), {"username": "ci", "password": "wrong"})
    assert client.post(reverse("login"), {"username": "ci", "password": "pw-ci-12345"}).status_code == 302
    client.logout()
    for _ in range(4):
        client.post(reverse("login"), {"username": "ci", "password": "wrong"})
    assert client.post(reverse("login"), {"username": "ci", "password": "pw-ci-12345"}).status_code == 302


def test_the_admin_names_the_token_and_lockout_sections_for_people(staff_client) -> None:
    index = staff_client.get(reverse("admin:index")).content.decode()
    assert "API tokens" in index and "Sign-in lockouts" in index
    assert ">Knox<" not in index and ">Axes<" not in index


def test_a_token_that_is_not_utf8_is_a_401_not_an_error(client, user) -> None:
    response = client.get(
        reverse("slot-list"), HTTP_AUTHORIZATION="Token \udcff\udcfe".encode("utf-8", "surrogateescape").decode("latin-1")
    )
    assert response.status_code == 401 and response.json() == {"detail": "Invalid token."}


def test_a_key_typed_as_the_user_name_is_not_stored_by_the_lockout(client, user) -> None:
    from axes.models import AccessAttempt

    pasted = "sk-" + "proj-" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd"
    client.post(reverse("login"), {"username": pasted, "password": "wrong"})
    (attempt,) = AccessAttempt.objects.all()
    assert pasted not in attempt.username and "[REDACTED]" in attempt.username
    client.post(reverse("login"), {"username": "ci", "password": "wrong"})
    assert AccessAttempt.objects.filter(username="ci").exists()  # a plain name is kept as typed


def test_a_key_typed_as_the_user_name_is_not_shown_back_by_the_sign_in_page(client, user) -> None:
    pasted = "sk-" + "proj-" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd"
    again = client.post(reverse("login"), {"username": pasted, "password": "wrong"})
    assert again.status_code == 200
    page = again.content.decode()
    assert "didn't match" in page and pasted not in page
    assert 'name="username" value=' not in page  # the field is empty
    plain = client.post(reverse("login"), {"username": "ci", "password": "wrong"}).content.decode()
    assert 'name="username" value="ci"' in plain  # a plain name is kept for the next try
    assert client.post(reverse("login"), {"username": "ci", "password": "pw-ci-12345"}).status_code == 302


def test_a_locked_out_sign_in_is_a_page_saying_for_how_long(client, user, settings) -> None:
    """It was a bare line of text ("Account locked: too many login attempts. Please try again
    later.") with no way back and no word of how long."""
    statuses = [
        client.post(reverse("login"), {"username": "ci", "password": "wrong"}).status_code for _ in range(settings.AXES_FAILURE_LIMIT)
    ]
    assert statuses == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]
    response = client.post(reverse("login"), {"username": "ci", "password": "pw-ci-12345"})
    assert response.status_code == 429
    page = response.content.decode()
    assert "<title>Sign-in locked · evalhub</title>" in page
    assert "Too many failed sign-ins (5) for this user name from this address." in page
    assert "Try again in 15 minutes." in page
    assert f'<a href="{reverse("login")}">Back to sign in</a>' in page


@pytest.mark.parametrize("url", ["/api/candidates/a%00b/", "/candidates/a%00b/", "/api/runs/?status=a%00b", "/api/slots/a\x00b/"])
def test_a_nul_character_in_the_address_is_a_400_before_any_view(staff_client, url: str) -> None:
    response = staff_client.get(url)
    assert response.status_code == 400 and b"NUL character" in response.content
    # The API answers in its documented shape, the pages in plain text.
    assert response["Content-Type"] == ("application/json" if url.startswith("/api/") else "text/plain")
