"""Admin for runs and executions: read-only history with search, filters and links to the pages."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.urls import reverse

from runs.models import Execution, Run

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def skipped_run(reference_catalog) -> Run:
    from runs.nightly import start_nightly

    return start_nightly(seed="runner-live-seven-week-v1", cost_ceiling_usd=Decimal("12"), now=NOW, environ={}, execute=True).run


def test_the_run_changelist_lists_runs_with_their_night_and_a_link_to_the_page(staff_client, skipped_run: Run) -> None:
    response = staff_client.get(reverse("admin:runs_run_changelist"))
    html = response.content.decode()
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [skipped_run]
    assert reverse("pages:run", args=[skipped_run.pk]) in html
    assert "2026-11-30" in html or "Nov. 30, 2026" in html


def test_the_run_changelist_filters_by_status_and_trigger(staff_client, skipped_run: Run) -> None:
    url = reverse("admin:runs_run_changelist")
    assert list(staff_client.get(url, {"trigger__exact": "nightly"}).context["cl"].result_list) == [skipped_run]
    assert list(staff_client.get(url, {"trigger__exact": "manual"}).context["cl"].result_list) == []


def test_a_run_can_be_viewed_but_not_changed_added_or_deleted(staff_client, skipped_run: Run) -> None:
    change = reverse("admin:runs_run_change", args=[skipped_run.pk])
    response = staff_client.get(change)
    assert response.status_code == 200
    assert 'name="_save"' not in response.content.decode()
    assert staff_client.post(change, {"status": "failed"}).status_code == 403
    assert staff_client.get(reverse("admin:runs_run_add")).status_code == 403
    assert staff_client.post(reverse("admin:runs_run_delete", args=[skipped_run.pk]), {"post": "yes"}).status_code == 403
    skipped_run.refresh_from_db()
    assert skipped_run.status == "finished"


def test_a_run_s_ceiling_spend_and_reservation_read_as_dollars(staff_client, skipped_run: Run) -> None:
    # The ceiling and the reservation showed as 12.000000 and 0.000000 beside "$0.00" spent.
    page = staff_client.get(reverse("admin:runs_run_change", args=[skipped_run.pk])).content.decode()
    assert "12.000000" not in page and "0.000000" not in page
    for label, amount in (("Cost ceiling (USD)", "$12.00"), ("Spent (USD)", "$0.00"), ("Reserved (USD)", "$0.00")):
        assert re.search(rf"{re.escape(label)}:?</label>\s*<div class=\"readonly\">{re.escape(amount)}</div>", page), label


def test_the_execution_changelist_searches_and_filters(staff_client, skipped_run: Run) -> None:
    url = reverse("admin:runs_execution_changelist")
    execution = skipped_run.executions.order_by("position").first()
    found = staff_client.get(url, {"q": execution.execution_id})
    assert [e.pk for e in found.context["cl"].result_list] == [execution.pk]
    skipped = staff_client.get(url, {"classification__exact": "skipped", "run__id__exact": str(skipped_run.pk)})
    assert skipped.context["cl"].result_count == skipped_run.executions.count()
    assert staff_client.get(url, {"classification__exact": "completed"}).context["cl"].result_count == 0


def test_an_execution_shows_its_attempts_and_an_unknown_cost_as_unknown(staff_client, skipped_run: Run) -> None:
    execution = skipped_run.executions.order_by("position").first()
    Execution.objects.filter(pk=execution.pk).update(cost_usd=Decimal("1.5"), cost_known=False)
    response = staff_client.get(reverse("admin:runs_execution_change", args=[execution.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "unknown" in html
    assert "$1.50" not in html
    assert "qualification_environment_missing" in html
    assert staff_client.get(reverse("admin:runs_execution_add")).status_code == 403
