"""The admins other apps register on evalhub's site (django.contrib.auth's, django-q2's,
django-axes'): a changelist action posted with ids that are not rows' ids, an object URL with one,
or a hostile list query answers with a message, Django's "doesn't exist" redirect or a 404, never
a 500, and changes nothing (evalhub.admin_forms.check_every_admins_actions)."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.messages import get_messages
from django.db import models
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task

from evalhub.admin_forms import CheckedActionsMixin

pytestmark = pytest.mark.django_db

#: The apps whose admins evalhub writes itself (tests/test_admin_actions.py covers them).
EVALHUB_APPS = ("candidates", "schedules", "runs", "knox")
#: The other apps' admins the site shows, with an integer id ...
INTEGER_KEYED = (
    "auth.Group",
    "auth.User",
    "axes.AccessAttempt",
    "axes.AccessLog",
    "axes.AccessFailureLog",
    "django_q.Schedule",
    "django_q.OrmQ",
)
#: ... and with a text id (a task's id is 32 characters of text).
TEXT_KEYED = ("django_q.Success", "django_q.Failure")
FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
NOT_AN_ID = "Select rows with the checkboxes of this list and run the action again. Nothing was changed."


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def rows(django_user_model) -> dict[str, models.Model]:
    """One row in each list, so a post that reached the database could change it."""
    access = {"user_agent": "ua", "ip_address": "192.0.2.1", "username": "someone", "http_accept": "*/*", "path_info": "/admin/login/"}
    now = timezone.now()
    task = {"func": "math.floor", "started": now, "stopped": now}
    return {
        "auth.Group": Group.objects.create(name="reviewers"),
        "auth.User": django_user_model.objects.create_user("someone", password="pw-someone-123"),
        "axes.AccessAttempt": AccessAttempt.objects.create(**access, get_data="", post_data="", failures_since_start=1),
        "axes.AccessLog": AccessLog.objects.create(**access),
        "axes.AccessFailureLog": AccessFailureLog.objects.create(**access),
        "django_q.Schedule": Schedule.objects.create(func="math.floor", name="nightly"),
        "django_q.OrmQ": OrmQ.objects.create(key="evalhub", payload="x"),
        "django_q.Success": Task.objects.create(id="a" * 32, name="done", success=True, **task),
        "django_q.Failure": Task.objects.create(id="b" * 32, name="failed", success=False, **task),
    }


def _admin(label: str) -> admin.ModelAdmin:
    [model_admin] = [model_admin for model, model_admin in admin.site._registry.items() if model._meta.label == label]
    return model_admin


def _changelist(label: str) -> str:
    opts = _admin(label).model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")


def _actions(label: str) -> list[str]:
    request = RequestFactory().get("/")
    request.user = get_user_model()(is_staff=True, is_superuser=True, is_active=True)
    return list(_admin(label).get_actions(request))


def _snapshot(rows: dict[str, models.Model]) -> dict[str, list[tuple]]:
    """Every field of every row of the lists (Success and Failure are both Task rows)."""
    return {
        model._meta.label: sorted(model._base_manager.values_list(*[f.attname for f in model._meta.concrete_fields]))
        for model in {type(row) for row in rows.values()} | {Task}
    }


def test_every_admin_on_the_site_checks_the_ids_its_actions_are_given() -> None:
    labels = {model._meta.label for model in admin.site._registry}
    unchecked = [type(ma).__name__ for ma in admin.site._registry.values() if not isinstance(ma, CheckedActionsMixin)]
    assert unchecked == []
    # Every admin the site registers is either evalhub's own or one of the lists here.
    assert {label for label in labels if label.split(".")[0] not in EVALHUB_APPS} == set(INTEGER_KEYED + TEXT_KEYED)


def test_the_other_apps_admins_keep_their_own_class_and_actions() -> None:
    assert type(_admin("auth.User")).__name__ == "UserAdmin" and _admin("auth.User").list_filter
    assert "resubmit_task" in _actions("django_q.Failure")
    assert "cleanup_expired_attempts" in _actions("axes.AccessAttempt")


@pytest.mark.parametrize("label", INTEGER_KEYED)
@pytest.mark.parametrize("spelling", ["abc", "1.5", "full-width", str(2**63), ""])
def test_an_action_on_an_id_that_is_not_a_rows_id_says_so_and_changes_nothing(staff_client, rows, label: str, spelling: str) -> None:
    # The full-width spelling of the row's own id, which int() would read as that id.
    bad = str(rows[label].pk).translate(FULL_WIDTH) if spelling == "full-width" else spelling
    before = _snapshot(rows)
    url = _changelist(label)
    verbose_name = _admin(label).model._meta.verbose_name
    for action in _actions(label):
        response = staff_client.post(url, {"action": action, "_selected_action": [bad], "index": "0"})
        assert response.status_code == 302 and response.url == url, (label, action)
        *_, message = [str(message) for message in get_messages(response.wsgi_request)]
        assert message == f"Not the id of a {verbose_name}: {bad!r}. {NOT_AN_ID}", (label, action)
    assert _snapshot(rows) == before


@pytest.mark.parametrize("label", TEXT_KEYED)
def test_an_action_on_a_text_id_no_row_can_have_says_so_and_changes_nothing(staff_client, rows, label: str) -> None:
    """A NUL (PostgreSQL refuses it in a query: a 500 there) or more than the column holds."""
    before = _snapshot(rows)
    url = _changelist(label)
    verbose_name = _admin(label).model._meta.verbose_name
    for action in _actions(label):
        for bad in ("\x00", "a" * 33):
            response = staff_client.post(url, {"action": action, "_selected_action": [bad], "index": "0"})
            assert response.status_code == 302 and response.url == url, (label, action, bad)
            *_, message = [str(message) for message in get_messages(response.wsgi_request)]
            assert message == f"Not the id of a {verbose_name}: {bad!r}. {NOT_AN_ID}", (label, action, bad)
    assert _snapshot(rows) == before


@pytest.mark.parametrize("label", TEXT_KEYED)
def test_a_text_id_that_names_no_row_runs_the_action_on_nothing(staff_client, rows, label: str) -> None:
    """``abc`` or ``１`` can be a task's id; naming none, the action has no row to act on."""
    before = _snapshot(rows)
    url = _changelist(label)
    for action in _actions(label):
        for value in ("abc", "１", str(2**63), ""):
            response = staff_client.post(url, {"action": action, "_selected_action": [value], "index": "0"})
            assert response.status_code in (200, 302), (label, action, value)  # delete_selected's page lists no row
            assert not any(str(message).startswith("Not the id") for message in get_messages(response.wsgi_request))
    assert _snapshot(rows) == before


def test_the_sign_in_attempts_clean_up_runs(staff_client, rows, settings) -> None:
    """django-axes' own action raised AttributeError on every post (evalhub.admin.SignInAttemptAdmin)."""
    old = rows["axes.AccessAttempt"]
    AccessAttempt.objects.filter(pk=old.pk).update(attempt_time=timezone.now() - 2 * settings.AXES_COOLOFF_TIME)
    fresh = AccessAttempt.objects.create(
        user_agent="ua", ip_address="192.0.2.2", username="other", http_accept="*/*", path_info="/", failures_since_start=1
    )
    url = _changelist("axes.AccessAttempt")
    response = staff_client.post(url, {"action": "cleanup_expired_attempts", "_selected_action": [fresh.pk], "index": "0"})
    assert response.status_code == 302 and response.url == url
    assert [str(message) for message in get_messages(response.wsgi_request)] == ["Cleaned up 1 expired access attempts."]
    assert list(AccessAttempt.objects.values_list("pk", flat=True)) == [fresh.pk]


@pytest.mark.parametrize("label", INTEGER_KEYED + TEXT_KEYED)
def test_an_object_url_with_an_id_that_is_not_a_rows_id_is_not_a_500(staff_client, rows, label: str) -> None:
    before = _snapshot(rows)
    url = _changelist(label)
    views = ("change", "delete", "history") + (("password",) if label == "auth.User" else ())
    for bad in ("abc", "1.5", "%EF%BC%91x", str(2**63), "a" * 100):
        for view in views:
            for response in (staff_client.get(f"{url}{bad}/{view}/"), staff_client.post(f"{url}{bad}/{view}/", {"post": "yes"})):
                # Django's "doesn't exist" redirect to the admin's index, or a 404 (the password page).
                assert response.status_code in (302, 404), (label, bad, view, response.status_code)
                if response.status_code == 302:
                    assert response.url == reverse("admin:index"), (label, bad, view)
    assert _snapshot(rows) == before


@pytest.mark.parametrize("label", INTEGER_KEYED + TEXT_KEYED)
def test_a_hostile_list_query_is_not_a_500(staff_client, rows, label: str) -> None:
    url = _changelist(label)
    for query in ("id__gt=abc", f"id__gt={2**63}", "o=99", "o=abc", "o=1.-2.x", "p=-1", "p=abc", f"p={10**30}", "q=%27%22", "pk__in=1,abc"):
        response = staff_client.get(f"{url}?{query}")
        # The list, or Django's "?e=1" redirect for a lookup it refuses.
        assert response.status_code in (200, 302), (label, query, response.status_code)
        if response.status_code == 302:
            assert response.url.endswith("?e=1"), (label, query)
