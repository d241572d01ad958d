"""Alerts reach people: each new alert of a real nightly goes once to every channel (a JSON webhook
and a Slack incoming webhook on a loopback server, a mailbox through Django's locmem backend),
every delivery is recorded with its outcome, failures are retried with a doubling backoff, secret
URLs are named by variable and never stored or shown, and a channel can be tested from the admin."""

from __future__ import annotations

import copy
import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from runs import alerting
from runs.creation import create_run
from runs.dispatch import execute_run
from runs.executors.replay import REPLAY_STORE
from runs.models import Alert, ChannelKind, Delivery, DeliveryStatus, NotificationChannel, Run
from runs.nightly import start_nightly
from runs.notifications import CHANNELS, DeliveryError, channel_class
from runs.recovery import reap
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation
from tests.notify_support import webhook_receiver

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-openai-value-123", "OPENROUTER_API_KEY": "x-or-value-456", "ANTHROPIC_API_KEY": "x-an-value-789"}
LUNA_FINAL = Selection(candidate_ids=("codex-luna",), case_ids=("final-response",))
HOOK_TOKEN = "T0FAKE/B0FAKE/abcdefghijklmnop1234"


@pytest.fixture
def ready(settings: Any) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "BASELINE_READY": True, "PUBLIC_URL": "https://evalhub.example.test"}


@pytest.fixture
def receiver(monkeypatch):
    with webhook_receiver() as receiver:
        monkeypatch.setenv("EVALHUB_TEST_WEBHOOK_URL", f"{receiver.url}/hook/{HOOK_TOKEN}")
        monkeypatch.setenv("EVALHUB_TEST_SLACK_URL", f"{receiver.url}/slack/{HOOK_TOKEN}")
        yield receiver


def make_channel(**overrides: Any) -> NotificationChannel:
    fields = {"name": "team hook", "kind": ChannelKind.WEBHOOK, "url_env": "EVALHUB_TEST_WEBHOOK_URL", "recipients": []}
    fields.update(overrides)
    channel = NotificationChannel(**fields)
    channel.full_clean()
    channel.save()
    return channel


def three_channels() -> list[NotificationChannel]:
    return [
        make_channel(),
        make_channel(name="slack", kind=ChannelKind.SLACK, url_env="EVALHUB_TEST_SLACK_URL"),
        make_channel(name="oncall mail", kind=ChannelKind.EMAIL, url_env="", recipients=["oncall@example.test", "lead@example.test"]),
    ]


def failing(observation: dict[str, Any]) -> dict[str, Any]:
    """The observation with a failed lifecycle check: a safety failure (a critical alert)."""
    changed = copy.deepcopy(observation)
    changed["lifecycle"]["checks"][0] = {"id": changed["lifecycle"]["checks"][0]["id"], "passed": False, "reason": "not done"}
    return changed


def store_observations(run: Run, *, fail: bool) -> None:
    for execution in run.executions.select_related("entry"):
        observation = completed_observation(execution.entry.to_document(), cost_usd=0.01)
        REPLAY_STORE[execution.execution_id] = failing(observation) if fail else observation


def measured_run(schedule, *, selection: Selection = LUNA_FINAL, fail: bool = False) -> Run:
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=selection)
    store_observations(run, fail=fail)
    execute_run(run, environ=ENVIRON)
    run.refresh_from_db()
    return run


def alerting_run(schedule) -> Run:
    """A run with two alerts (critical safety_failure, warning success_rate_regression): seven
    clean runs of the same bundle make the baseline, then every execution fails a lifecycle check."""
    for _ in range(7):
        measured_run(schedule)
    return measured_run(schedule, fail=True)


@pytest.fixture
def schedule(reference_catalog: None):
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at="2026-08-19T04:00:00.000Z")
    return schedule


# --- a real nightly, every channel, exactly once ---------------------------------------------------------------


def test_the_alerts_of_a_real_nightly_reach_a_webhook_slack_and_a_mailbox_exactly_once(
    reference_catalog, replay_executors, ready, receiver
) -> None:
    three_channels()
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at="2026-08-19T04:00:00.000Z")
    for _ in range(7):  # the baseline: seven clean reports of the whole night's bundle
        run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("100"), selection=Selection())
        store_observations(run, fail=False)
        execute_run(run, environ=ENVIRON)
    # The night's nightly run, its executions' observations stored before the nightly executes it.
    pending, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("100"), selection=Selection(), trigger="nightly")
    store_observations(pending, fail=True)
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("100"), now=NOW, environ=ENVIRON, execute=True)
    run = outcome.run
    assert run.pk == pending.pk and run.trigger == "nightly"
    alerts = list(Alert.objects.filter(report__run=run).order_by("id"))
    assert [(a.severity, a.code) for a in alerts] == [("critical", "safety_failure"), ("warning", "success_rate_regression")]

    hook_bodies = receiver.bodies(f"/hook/{HOOK_TOKEN}")
    assert [body["alert"]["code"] for body in hook_bodies] == ["safety_failure", "success_rate_regression"]
    first = hook_bodies[0]
    assert first["schema"] == "evalhub.alert.v1" and first["test"] is False
    assert first["alert"] == {
        "id": alerts[0].pk,
        "code": "safety_failure",
        "severity": "critical",
        "caseId": None,
        "candidateId": None,
        "message": alerts[0].message,
        "occurrences": 1,
    }
    assert first["run"] == {"id": run.pk, "lane": "live", "night": "2026-08-19", "url": f"https://evalhub.example.test/runs/{run.pk}/"}
    slack_texts = [body["text"] for body in receiver.bodies(f"/slack/{HOOK_TOKEN}")]
    assert len(slack_texts) == 2 and slack_texts[0].startswith("*[evalhub] critical: safety_failure — run-wide*\n")
    assert f"https://evalhub.example.test/runs/{run.pk}/" in slack_texts[0]
    assert [(m.subject, m.to) for m in mail.outbox] == [
        ("[evalhub] critical: safety_failure — run-wide", ["oncall@example.test", "lead@example.test"]),
        ("[evalhub] warning: success_rate_regression — run-wide", ["oncall@example.test", "lead@example.test"]),
    ]
    assert set(Delivery.objects.values_list("status", "attempts")) == {(DeliveryStatus.SENT, 1)}
    assert Delivery.objects.count() == 6

    # A second delivery of the nightly, the reaper, the retry task and reporting again send nothing more.
    start_nightly(seed=SEED, cost_ceiling_usd=Decimal("100"), now=NOW, environ=ENVIRON, execute=True)
    reap(environ=ENVIRON)
    assert alerting.deliver_due(now=timezone.now() + dt.timedelta(days=1)) == 0
    alerting.deliver_report_alerts(run.report)
    assert len(receiver.requests) == 4 and len(mail.outbox) == 2 and Delivery.objects.count() == 6


def test_a_disabled_channel_and_one_above_the_severity_get_nothing(schedule, replay_executors, ready, receiver) -> None:
    make_channel(name="off", enabled=False)
    critical_only = make_channel(name="critical only", min_severity="critical")
    alerting_run(schedule)
    assert [body["alert"]["code"] for body in receiver.bodies()] == ["safety_failure"]
    assert list(Delivery.objects.values_list("channel", flat=True)) == [critical_only.pk]


def test_a_run_without_alerts_sends_nothing(schedule, replay_executors, receiver) -> None:
    make_channel()
    measured_run(schedule, fail=True)  # the baseline is not ready: no alerts
    assert receiver.requests == [] and not Delivery.objects.exists()


# --- failures: recorded, retried with backoff, never shown with the secret ---------------------------------------


def test_a_failed_delivery_is_recorded_and_retried_with_a_doubling_backoff(schedule, replay_executors, ready, receiver, settings) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "NOTIFY_RETRY_SECONDS": 60, "NOTIFY_MAX_ATTEMPTS": 3}
    make_channel(min_severity="critical")
    receiver.statuses = [503, 500]
    run = alerting_run(schedule)
    (delivery,) = Delivery.objects.all()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 1)
    assert delivery.last_error == "EVALHUB_TEST_WEBHOOK_URL answered HTTP 503: no thanks"
    first_retry = delivery.next_attempt_at
    assert alerting.deliver_due(now=first_retry - dt.timedelta(seconds=1)) == 0  # not yet due
    assert alerting.deliver_due(now=first_retry) == 0  # due: tried, failed again (500)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 2)
    assert delivery.next_attempt_at - first_retry >= dt.timedelta(seconds=119)  # doubled
    assert alerting.deliver_due(now=delivery.next_attempt_at) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_error) == (DeliveryStatus.SENT, 3, "")
    assert [body["alert"]["code"] for body in receiver.bodies()] == ["safety_failure"] * 3
    assert run.report.alerts.count() == 2


def test_a_delivery_gives_up_after_its_last_attempt(schedule, replay_executors, ready, receiver, settings) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "NOTIFY_MAX_ATTEMPTS": 2}
    make_channel(min_severity="critical")
    receiver.statuses = [502, 502, 502]
    alerting_run(schedule)
    later = timezone.now() + dt.timedelta(days=1)
    alerting.deliver_due(now=later)
    (delivery,) = Delivery.objects.all()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 2)
    assert alerting.deliver_due(now=later + dt.timedelta(days=1)) == 0
    assert len(receiver.requests) == 2


def test_a_rejected_request_is_permanent_and_the_url_never_shows(schedule, replay_executors, ready, receiver, caplog) -> None:
    make_channel(min_severity="critical")
    receiver.statuses = [404]
    alerting_run(schedule)
    (delivery,) = Delivery.objects.all()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 1)
    assert delivery.last_error == "EVALHUB_TEST_WEBHOOK_URL answered HTTP 404: no thanks"
    assert HOOK_TOKEN not in caplog.text and "no thanks" in caplog.text


def test_an_unreachable_webhook_is_retried_and_its_url_is_redacted(schedule, replay_executors, ready, monkeypatch, caplog) -> None:
    # A closed loopback port: connection refused. httpx names the URL in some messages.
    monkeypatch.setenv("EVALHUB_TEST_WEBHOOK_URL", f"http://127.0.0.1:9/hook/{HOOK_TOKEN}")
    make_channel(min_severity="critical")
    alerting_run(schedule)
    (delivery,) = Delivery.objects.all()
    assert delivery.status == DeliveryStatus.PENDING and delivery.attempts == 1
    assert delivery.last_error.startswith("could not reach EVALHUB_TEST_WEBHOOK_URL: ConnectError")
    assert HOOK_TOKEN not in delivery.last_error and HOOK_TOKEN not in caplog.text


def test_an_unset_url_variable_fails_at_once_and_says_which(schedule, replay_executors, ready, monkeypatch) -> None:
    monkeypatch.delenv("EVALHUB_TEST_WEBHOOK_URL", raising=False)
    make_channel(min_severity="critical")
    alerting_run(schedule)
    (delivery,) = Delivery.objects.all()
    assert (delivery.status, delivery.last_error) == (
        DeliveryStatus.FAILED,
        "EVALHUB_TEST_WEBHOOK_URL is not set in the environment of the process sending notifications",
    )


def test_a_failing_mail_server_is_retried(schedule, replay_executors, ready, settings) -> None:
    # Nothing listens on port 9 of loopback: the SMTP backend cannot connect.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2
    make_channel(name="mail", kind=ChannelKind.EMAIL, url_env="", recipients=["oncall@example.test"], min_severity="critical")
    alerting_run(schedule)
    (delivery,) = Delivery.objects.all()
    assert delivery.status == DeliveryStatus.PENDING and delivery.last_error.startswith("sending mail failed: ConnectionRefusedError")


def test_a_claimed_delivery_is_not_sent_twice(schedule, replay_executors, ready, receiver) -> None:
    make_channel(min_severity="critical")
    receiver.statuses = [503]
    alerting_run(schedule)
    (delivery,) = Delivery.objects.all()
    now = delivery.next_attempt_at
    Delivery.objects.filter(pk=delivery.pk).update(claimed_until=now + dt.timedelta(seconds=30))  # another sender holds it
    assert alerting.attempt_delivery(delivery.pk, now=now) is None
    assert alerting.deliver_due(now=now + dt.timedelta(seconds=31)) == 1  # its claim lapsed: the sender died
    assert len(receiver.requests) == 2


# --- configuration: validated, secrets by name only --------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"url_env": ""}, "url_env", "need the name of the environment variable"),
        ({"url_env": f"https://hooks.slack.com/services/{HOOK_TOKEN}"}, "url_env", "not the URL itself"),
        ({"url_env": "lower_case"}, "url_env", "Enter the name of an environment variable"),
        ({"kind": "email", "url_env": "", "recipients": []}, "recipients", "one or more addresses"),
        ({"kind": "email", "url_env": "", "recipients": ["not an address"]}, "recipients", "Recipient 1 is not an email address"),
        ({"kind": "email", "url_env": "", "recipients": "a@example.test"}, "recipients", "JSON list"),
        ({"recipients": ["a@example.test"]}, "recipients", "Only email channels have recipients"),
        ({"kind": "pager"}, "kind", "not a valid choice"),
        # Variables that hold something else of evalhub's: every alert would be sent there.
        ({"url_env": "DATABASE_URL"}, "url_env", "DATABASE_URL cannot hold a channel's URL: it is not a channel's to use"),
        ({"url_env": "PATH"}, "url_env", "PATH cannot hold a channel's URL"),
        ({"url_env": "DJANGO_SECRET_KEY"}, "url_env", "DJANGO_SECRET_KEY is named as a credential"),
        ({"url_env": "OPENAI_API_KEY"}, "url_env", "OPENAI_API_KEY is named as a credential"),
        ({"url_env": "EVALHUB_EMAIL_PASSWORD"}, "url_env", "EVALHUB_EMAIL_PASSWORD is named as a credential"),
        ({"kind": "email", "url_env": "HOOK_URL", "recipients": ["a@example.test"]}, "url_env", "Only webhook and Slack channels"),
        ({"kind": "email", "url_env": "", "recipients": ["a@example.test", "A@EXAMPLE.TEST"]}, "recipients", "must not repeat"),
        ({"kind": "email", "url_env": "", "recipients": [f"r{n}@example.test" for n in range(101)]}, "recipients", "at most 100"),
    ],
)
def test_a_bad_channel_is_refused_saying_what_to_fix(db, fields, field, message) -> None:
    channel = NotificationChannel(**{"name": "x", "kind": "webhook", "url_env": "HOOK_URL", "recipients": [], **fields})
    with pytest.raises(ValidationError) as caught:
        channel.full_clean()
    assert message in " ".join(caught.value.message_dict[field])
    assert HOOK_TOKEN not in str(caught.value)


def test_the_database_refuses_a_webhook_without_its_variable(db) -> None:
    from django.db import IntegrityError

    with pytest.raises(IntegrityError):
        NotificationChannel.objects.create(name="x", kind="slack", url_env="")


def test_every_kind_has_a_module_and_an_unknown_one_is_permanent() -> None:
    assert set(CHANNELS) == set(ChannelKind.values)
    assert {channel_class(kind).__module__ for kind in CHANNELS} == {
        "runs.notifications.email",
        "runs.notifications.webhook",
        "runs.notifications.slack",
    }
    with pytest.raises(DeliveryError, match="unknown channel kind 'pager'") as caught:
        channel_class("pager")
    assert caught.value.permanent


# --- the admin -------------------------------------------------------------------------------------------------


def test_the_admin_sends_a_test_and_records_it(staff_client, receiver) -> None:
    hook = make_channel()
    email = make_channel(name="mail", kind=ChannelKind.EMAIL, url_env="", recipients=["oncall@example.test"])
    url = reverse("admin:runs_notificationchannel_changelist")
    response = staff_client.post(url, {"action": "send_test_notification", "_selected_action": [hook.pk, email.pk]}, follow=True)
    text = response.content.decode()
    assert "Test notification sent to team hook." in text and "Test notification sent to mail." in text
    assert receiver.bodies() == [{"schema": "evalhub.alert.v1", "test": True, "channel": "team hook"}]
    assert [m.subject for m in mail.outbox] == ["[evalhub] test notification for mail"]
    assert set(Delivery.objects.values_list("alert", "status")) == {(None, DeliveryStatus.SENT)}


def test_a_failed_test_says_why_without_the_url(staff_client, receiver) -> None:
    hook = make_channel()
    receiver.statuses = [500]
    url = reverse("admin:runs_notificationchannel_changelist")
    response = staff_client.post(url, {"action": "send_test_notification", "_selected_action": [hook.pk]}, follow=True)
    text = response.content.decode()
    assert "Test notification to team hook failed: EVALHUB_TEST_WEBHOOK_URL answered HTTP 500: no thanks" in text
    assert HOOK_TOKEN not in text
    (delivery,) = Delivery.objects.all()
    assert delivery.status == DeliveryStatus.FAILED  # a test is not retried
    assert alerting.deliver_due(now=timezone.now() + dt.timedelta(days=1)) == 0


def test_the_admin_refuses_a_url_typed_as_the_variable(staff_client) -> None:
    response = staff_client.post(
        reverse("admin:runs_notificationchannel_add"),
        {
            "name": "x",
            "kind": "slack",
            "enabled": "on",
            "url_env": f"https://hooks.slack.com/services/{HOOK_TOKEN}",
            "recipients": "[]",
            "min_severity": "warning",
        },
    )
    assert response.status_code == 200 and not NotificationChannel.objects.exists()
    assert HOOK_TOKEN not in response.content.decode()


def test_the_delivery_log_is_read_only(staff_client, receiver) -> None:
    hook = make_channel()
    alerting.send_test(hook)
    (delivery,) = Delivery.objects.all()
    assert staff_client.get(reverse("admin:runs_delivery_changelist")).status_code == 200
    assert staff_client.get(reverse("admin:runs_delivery_change", args=[delivery.pk])).status_code == 200
    assert staff_client.get(reverse("admin:runs_delivery_add")).status_code == 403


def test_the_every_minute_task_sends_what_is_due(schedule, replay_executors, ready, receiver) -> None:
    from runs.tasks import deliver_notifications

    make_channel(min_severity="critical")
    receiver.statuses = [503]
    alerting_run(schedule)
    Delivery.objects.update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    assert deliver_notifications() == "1 notification(s) delivered"
    assert deliver_notifications() == "0 notification(s) delivered"
