"""Changelist actions with selected ids that are not rows' ids: a message, never a 500 (evalhub.admin_forms.CheckedActionsMixin)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import RequestFactory
from django.urls import reverse

from evalhub.admin_forms import CheckedActionsMixin
from runs.models import Run

pytestmark = pytest.mark.django_db

EVALHUB_APPS = ("candidates", "schedules", "runs", "knox")


@pytest.fixture
def run(reference_catalog) -> Run:
    from runs.nightly import start_nightly

    night = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)
    schedule = start_nightly(
        seed="runner-live-seven-week-v1", cost_ceiling_usd=Decimal("12"), now=night, environ={}, execute=False
    ).schedule
    return Run.objects.create(schedule=schedule, trigger="manual", cost_ceiling_usd=Decimal("12"))


def _evalhub_admins() -> list[admin.ModelAdmin]:
    return [model_admin for model, model_admin in admin.site._registry.items() if model._meta.app_label in EVALHUB_APPS]


def _actions(model_admin: admin.ModelAdmin) -> list[str]:
    request = RequestFactory().get("/")
    request.user = get_user_model()(is_staff=True, is_superuser=True, is_active=True)
    return list(model_admin.get_actions(request))


def test_every_evalhub_admin_checks_the_ids_its_actions_are_given() -> None:
    admins = _evalhub_admins()
    assert len(admins) >= 15
    assert [type(model_admin).__name__ for model_admin in admins if not isinstance(model_admin, CheckedActionsMixin)] == []


@pytest.mark.parametrize("selected", [["abc"], ["1", "abc"], ["1.5"], [str(2**63)], [""]])
def test_a_run_action_on_an_id_that_is_not_a_run_says_so_and_runs_nothing(staff_client, run: Run, selected: list[str]) -> None:
    url = reverse("admin:runs_run_changelist")
    response = staff_client.post(url, {"action": "rerun_skipped", "_selected_action": selected, "index": "0"})
    assert response.status_code == 302 and response.url == url
    [message] = [str(message) for message in get_messages(response.wsgi_request)]
    assert message.startswith("Not the id of a run: ")
    assert message.endswith("Select rows with the checkboxes of this list and run the action again. Nothing was changed.")
    assert Run.objects.get() == run  # no re-run made


@pytest.mark.parametrize("spelling", ["full-width", "leading zero", "plus sign", "space"])
def test_another_spelling_of_a_runs_id_is_not_that_runs_id(staff_client, run: Run, spelling: str) -> None:
    """int() reads ``１``, ``01``, ``+1`` and `` 1`` as 1; the checkboxes send ``1`` only."""
    pk = str(run.pk)
    selected = {"full-width": pk.translate(str.maketrans("0123456789", "０１２３４５６７８９")), "leading zero": f"0{pk}"}
    selected |= {"plus sign": f"+{pk}", "space": f" {pk}"}
    url = reverse("admin:runs_run_changelist")
    response = staff_client.post(url, {"action": "cancel_runs", "_selected_action": [selected[spelling]], "index": "0"})
    assert response.status_code == 302 and response.url == url
    [message] = [str(message) for message in get_messages(response.wsgi_request)]
    assert message.startswith(f"Not the id of a run: {selected[spelling]!r}. ")
    run.refresh_from_db()
    assert run.status != "cancelled"


def test_the_message_quotes_three_ids_and_counts_the_rest(staff_client) -> None:
    response = staff_client.post(
        reverse("admin:runs_run_changelist"), {"action": "cancel_runs", "_selected_action": ["a", "b", "c", "d", "e"], "index": "0"}
    )
    [message] = [str(message) for message in get_messages(response.wsgi_request)]
    assert message.startswith("Not the id of a run: 'a', 'b', 'c' and 2 more. ")


def test_select_all_ignores_the_ids_as_django_does(staff_client, run: Run) -> None:
    response = staff_client.post(
        reverse("admin:runs_run_changelist"),
        {"action": "cancel_runs", "_selected_action": ["abc"], "select_across": "1", "index": "0"},
    )
    assert response.status_code == 302
    assert not any(str(message).startswith("Not the id") for message in get_messages(response.wsgi_request))
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_every_changelist_action_answers_a_bad_id_with_a_message(staff_client) -> None:
    tried = []
    for model_admin in _evalhub_admins():
        opts = model_admin.model._meta
        if opts.pk.get_internal_type() not in ("AutoField", "BigAutoField"):
            continue  # a token's key is its digest: any text is one
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        for action in _actions(model_admin):
            response = staff_client.post(url, {"action": action, "_selected_action": ["abc"], "index": "0"})
            assert response.status_code == 302, (opts.label, action)
            *_, message = [str(message) for message in get_messages(response.wsgi_request)]  # the earlier posts' too: unread
            assert message.startswith(f"Not the id of a {opts.verbose_name}: 'abc'. "), (opts.label, action)
            tried.append(f"{opts.label}.{action}")
    assert {"runs.Run.rerun_skipped", "runs.NotificationChannel.send_test_notification", "candidates.Candidate.delete_selected"} <= set(
        tried
    )


@pytest.mark.parametrize("selected", [["999999"], ["-1"]])
def test_an_action_on_a_run_that_is_not_in_the_list_says_nothing_was_done(staff_client, run: Run, selected: list[str]) -> None:
    """A well-formed id with no row (deleted since the list was shown): Django ran the action on
    nothing and said nothing, as if the cancel had been done."""
    url = reverse("admin:runs_run_changelist")
    response = staff_client.post(url, {"action": "cancel_runs", "_selected_action": selected, "index": "0"})
    assert response.status_code == 302 and response.url == url
    [message] = [str(message) for message in get_messages(response.wsgi_request)]
    assert (
        message
        == f"No run {selected[0]!r} in this list (deleted since the list was shown, or outside its filters): nothing was done for it."
    )
    run.refresh_from_db()
    assert run.status != "cancelled"


def test_an_action_on_a_run_and_a_missing_one_runs_on_the_run_and_names_the_other(staff_client, run: Run) -> None:
    url = reverse("admin:runs_run_changelist")
    response = staff_client.post(url, {"action": "cancel_runs", "_selected_action": [str(run.pk), "999999"], "index": "0"})
    messages = [str(message) for message in get_messages(response.wsgi_request)]
    assert messages[0].startswith(f"run {run.pk} cancelled: ")
    assert (
        messages[1] == "No run '999999' in this list (deleted since the list was shown, or outside its filters): nothing was done for it."
    )
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_a_foreign_key_lookup_past_every_columns_range_is_not_a_500(staff_client) -> None:
    """Django checks an integer column's range in a list's lookup, not a foreign key's: on SQLite
    ``?run=10**20`` raised OverflowError when the list was counted."""
    tried = []
    for model in admin.site._registry:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for field in model._meta.get_fields():
            if not ((field.many_to_one or field.one_to_one) and field.concrete):
                continue
            response = staff_client.get(f"{url}?{field.name}={10**20}")
            # The list (empty), or Django's "?e=1" redirect for a lookup it refuses.
            assert response.status_code in (200, 302), (model._meta.label, field.name, response.status_code)
            if response.status_code == 302:
                assert response.url.endswith("?e=1"), (model._meta.label, field.name)
            tried.append(f"{model._meta.label}.{field.name}")
    assert {"runs.Execution.run", "runs.Report.run", "candidates.Candidate.slot"} <= set(tried)
