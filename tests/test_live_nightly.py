"""``nightly --execute`` with a Codex candidate and a reachable model endpoint (issue 4, "Done when").

The real ``codex app-server`` runs every selected entry against evalhub's scripted model server on
loopback, configured as an ordinary (measured) provider profile through EVALHUB_MODEL_PROVIDERS —
exactly how a real endpoint is configured. The executions are recorded, scored, reported and shown
on the pages; a provider 503 is retried once; the echoed key leaves no trace anywhere. Also
``manage.py demo_live``: a scripted-lane run, labelled, never history.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import secrets
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from runs.harness.drivers.codex import resolve_codex_binary
from runs.harness.script_schema import load_scripts_dir
from runs.harness.scripted_model import ScriptedModelServer
from runs.harness.session import SCRIPTS_DIR
from runs.harness.trace import read_artifact
from runs.models import Attempt, Execution, Report, Run, RunLane, Scorecard, TraceArtifact
from runs.queries import _comparability

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(resolve_codex_binary() is None, reason="codex is not installed: run `make install` (npm ci)"),
]

TONIGHT = "2026-08-24T00:00:00.000Z"  # rotation day 0: codex-luna plays the codex-strong slot


@pytest.fixture
def model_server():
    server = ScriptedModelServer(load_scripts_dir(SCRIPTS_DIR))
    server.start()
    yield server
    server.stop()


def _point_openai_profile_at(settings, base_url: str) -> None:
    profile = {"openai": {"base_url": base_url, "wire_api": "responses", "env_key": "OPENAI_API_KEY"}}
    settings.EVALHUB = {**settings.EVALHUB, "MODEL_PROVIDERS_JSON": json.dumps(profile)}


def _nightly(*args: str) -> str:
    out = io.StringIO()
    call_command("nightly", "--execute", "--no-progress", "--generated-at", TONIGHT, *args, stdout=out)
    return out.getvalue()


def test_nightly_execute_records_scores_and_shows_real_codex_executions(
    reference_catalog, model_server, settings, monkeypatch, staff_client
) -> None:
    _point_openai_profile_at(settings, model_server.url + "/scripts/{case_id}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key-for-local-test-" + secrets.token_hex(8))
    output = _nightly("--candidate", "codex-luna", "--limit", "3")
    run = Run.objects.get()
    assert run.lane == RunLane.LIVE
    executions = list(run.executions.order_by("position"))
    assert len(executions) == 3 and {e.candidate_key for e in executions} == {"codex-luna"}
    for execution in executions:
        assert execution.classification == "completed", execution.observation
        assert execution.cost_known is False  # no price in the table: unknown, never $0
        assert Scorecard.objects.get(execution=execution).passed is False  # quality_efficiency misses the cost
        artifact = TraceArtifact.objects.get(execution=execution, attempt=1)
        document = read_artifact(bytes(artifact.data), artifact.digest)
        assert artifact.frame_count > 10 and document.count(b'"kind":"frame"') == artifact.frame_count
    report = Report.objects.get(run=run)
    assert report.executions == len(executions) and report.scoreable == len(executions)
    assert f"run {run.pk}:" in output
    page = staff_client.get(reverse("pages:run", args=[run.pk]))
    assert page.status_code == 200 and executions[0].case_key.encode() in page.content
    detail = staff_client.get(reverse("pages:execution", args=[executions[0].pk]))
    assert detail.status_code == 200 and b"Download trace" in detail.content
    download = staff_client.get(reverse("pages:execution-trace", args=[executions[0].pk, 1]))
    assert download.status_code == 200
    assert gzip.decompress(b"".join(download.streaming_content) if download.streaming else download.content)


def test_a_priced_model_passes_every_check(reference_catalog, model_server, settings, monkeypatch) -> None:
    from candidates.models import ModelPrice

    ModelPrice.objects.create(model="gpt-5.6-luna", input_usd=1, cached_input_usd="0.1", output_usd=8, reasoning_usd=8)
    _point_openai_profile_at(settings, model_server.url + "/scripts/{case_id}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key-for-local-test")
    _nightly("--candidate", "codex-luna", "--limit", "1")
    (execution,) = Execution.objects.all()
    assert execution.cost_known is True and execution.cost_usd > 0
    assert Scorecard.objects.get(execution=execution).passed is True


def test_a_provider_503_is_retried_once_and_the_second_attempt_counts(
    reference_catalog, model_server, settings, monkeypatch
) -> None:
    for path in SCRIPTS_DIR.glob("*.json"):  # every case's script, failing its first request once
        flaky = json.loads(path.read_text())
        flaky["name"] = f"flaky-{path.stem}"
        flaky["steps"] = [{"fail": {"status": 503, "times": 1}}, *flaky["steps"]]
        model_server.add_script(flaky, name=flaky["name"])
    _point_openai_profile_at(settings, model_server.url + "/scripts/flaky-{case_id}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key-for-local-test")
    _nightly("--candidate", "codex-luna", "--limit", "1")
    (execution,) = Execution.objects.all()
    attempts = list(Attempt.objects.filter(execution=execution).order_by("number"))
    assert [(a.number, a.outcome, a.error_code) for a in attempts] == [
        (1, "infrastructure_error", "provider_http_503"),
        (2, "observation", ""),
    ]
    assert execution.classification == "completed"
    assert set(TraceArtifact.objects.filter(execution=execution).values_list("attempt", flat=True)) == {1, 2}


def test_an_echoed_key_leaves_no_trace_in_the_database_artifacts_logs_or_pages(
    reference_catalog, model_server, settings, monkeypatch, staff_client, caplog
) -> None:
    key = "sk-proj-" + secrets.token_hex(20)
    echo = {"name": "echo", "steps": [{"outputs": [{"echoKey": True}, {"call": "finish_task", "arguments": {"summary": "done"}}]}]}
    model_server.add_script(echo, name="echo")
    _point_openai_profile_at(settings, model_server.url + "/scripts/echo/v1")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    _nightly("--candidate", "codex-luna", "--limit", "1")
    (execution,) = Execution.objects.all()
    assert model_server.requests, "the runtime reached the scripted model"
    fragments = {key[i : i + 10] for i in range(len(key) - 9)}

    def leaks(text: str) -> list[str]:
        return sorted(fragment for fragment in fragments if fragment in text)

    dump = io.StringIO()
    call_command("dumpdata", "candidates", "schedules", "runs", "django_q", stdout=dump)
    assert leaks(dump.getvalue()) == []
    for artifact in TraceArtifact.objects.all():
        assert leaks(read_artifact(bytes(artifact.data), artifact.digest).decode("utf-8", "replace")) == []
    assert leaks(caplog.text) == []
    run = Run.objects.get()
    for url in (
        reverse("pages:run", args=[run.pk]),
        reverse("pages:execution", args=[execution.pk]),
        f"/api/executions/{execution.pk}/",
        f"/api/runs/{run.pk}/",
    ):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert leaks(response.content.decode()) == [], url


def test_demo_live_is_a_labelled_scripted_run_never_history(reference_catalog, staff_client, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    call_command("setup_schedules", stdout=io.StringIO())
    out = io.StringIO()
    call_command("demo_live", "--no-progress", stdout=out)
    run = Run.objects.get()
    assert run.lane == RunLane.SCRIPTED
    assert run.executions.count() > 0
    assert set(run.executions.values_list("classification", flat=True)) == {"completed"}
    assert all(card.passed for card in Scorecard.objects.filter(execution__run=run))
    report = Report.objects.get(run=run)
    assert report.is_scripted is True and report.comparison is None and report.previous is None
    assert "scripted" in out.getvalue()
    page = staff_client.get(reverse("pages:run", args=[run.pk]))
    assert b"Scripted" in page.content
    # Never history: a second scripted run is not compared with the first.
    call_command("demo_live", "--no-progress", stdout=io.StringIO())
    second = Report.objects.exclude(pk=report.pk).get()
    assert second.previous is None and second.comparison is None
    # ... and a measured run (tonight's nightly: skipped, no credentials) is never compared with it.
    _nightly()
    measured = Run.objects.get(lane=RunLane.LIVE)
    assert Report.objects.get(run=measured).previous is None
    comparable, note = _comparability(measured, run)
    assert not comparable and f"run {run.pk} is scripted" in note
    page = staff_client.get(reverse("pages:compare"), {"a": measured.pk, "b": run.pk})
    assert page.status_code == 200 and b"is scripted" in page.content
