"""Text evalhub did not type itself — a runtime's stderr, a provider's or a webhook's answer — may
hold any character: a NUL is stored as U+FFFD (PostgreSQL refuses NUL in a text column, so the
write recording the execution would fail there), and the JUnit export stays well-formed XML
whatever a failure message holds (a colour escape, a NUL).

Executors are replaced at the edge by the replay executor.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any
from xml.dom import minidom

import pytest

from runs import alerting
from runs.creation import create_run
from runs.dispatch import execute_run
from runs.evaluation.renderers import render_junit
from runs.executors import InfrastructureError
from runs.executors.replay import REPLAY_STORE
from runs.models import ChannelKind, DeliveryStatus, NotificationChannel, Run
from runs.reporting import export_report
from schedules.services import Selection, schedule_for_night

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-openai-value-123", "OPENROUTER_API_KEY": "x-or-value-456", "ANTHROPIC_API_KEY": "x-an-value-789"}
#: What a runtime's last stderr lines may look like: a NUL, a colour escape, a form feed.
PRINTED = "HTTP 503 \x00 from the \x1b[31mprovider\x1b[0m\x0c"


@pytest.fixture
def one_failed_run(reference_catalog: None, replay_executors: Any) -> Run:
    schedule, _ = schedule_for_night(seed=SEED, now=NOW)
    run, _ = create_run(
        schedule=schedule, cost_ceiling_usd=Decimal(12), selection=Selection(candidate_ids=("codex-luna",), case_ids=("final-response",))
    )
    for execution in run.executions.all():
        REPLAY_STORE[execution.execution_id] = [InfrastructureError("provider_http_503", False, PRINTED)]
    execute_run(run, environ=ENVIRON)
    run.refresh_from_db()
    return run


def test_a_nul_a_runtime_printed_is_stored_as_a_replacement_character(one_failed_run: Run) -> None:
    executions = list(one_failed_run.executions.all())
    assert executions and {execution.classification for execution in executions} == {"infrastructure_failure"}
    for execution in executions:
        for text in (execution.failure_message, execution.attempts.get().message):
            assert "\x00" not in text
            assert text.startswith("HTTP 503 \ufffd from the \x1b[31mprovider")


def test_the_junit_export_is_well_formed_whatever_a_failure_message_holds(one_failed_run: Run) -> None:
    content, _, _ = export_report(one_failed_run.report, "junit")
    suite = minidom.parseString(content).documentElement
    skipped = suite.getElementsByTagName("skipped")
    assert len(skipped) == one_failed_run.executions.count()
    assert skipped[0].getAttribute("message").startswith("HTTP 503 \ufffd from the \ufffd[31mprovider\ufffd[0m\ufffd")


def test_junit_text_without_such_characters_is_unchanged() -> None:
    row = {
        "scenarioId": "final-response",
        "candidateId": "codex-luna",
        "observation": {"failure": {"message": 'tab\there, new\nline & "quotes" <é> \U0001f600'}},
        "scorecard": {"overall": {"passed": None}, "dimensions": {}},
    }
    assert '<skipped message="tab\there, new\nline &amp; &quot;quotes&quot; &lt;é&gt; \U0001f600" />' in render_junit({"results": [row]})


def test_a_nul_in_a_webhooks_answer_is_stored_as_a_replacement_character(reference_catalog: None, monkeypatch) -> None:
    channel = NotificationChannel(name="team hook", kind=ChannelKind.WEBHOOK, url_env="EVALHUB_TEST_WEBHOOK_URL", recipients=[])
    channel.full_clean()
    channel.save()
    monkeypatch.setattr(alerting, "_send", lambda *args: ("EVALHUB_TEST_WEBHOOK_URL answered HTTP 500: bad\x00gateway", True))
    delivery = alerting.send_test(channel, environ={})
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.last_error == "EVALHUB_TEST_WEBHOOK_URL answered HTTP 500: bad\ufffdgateway"
