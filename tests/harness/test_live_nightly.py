"""``nightly --execute`` with a Codex candidate (and the ACP candidates) and a reachable model endpoint.

The real ``codex app-server`` runs every selected entry against evalhub's scripted model server on
loopback, configured as an ordinary (measured) provider profile through EVALHUB_MODEL_PROVIDERS —
exactly how a real endpoint is configured. The executions are recorded, scored, reported and shown
on the pages; a provider 503 is retried once; the echoed key leaves no trace anywhere. Also
``manage.py demo_live``: a scripted-lane run, labelled, never history.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import logging
import secrets

import pytest
from django.core.management import call_command
from django.urls import reverse

from runs.executors.live.runtimes import RUNTIMES
from runs.executors.live.script_schema import load_scripts_dir
from runs.executors.live.scripted_model import ScriptedModelServer
from runs.executors.live.session import SCRIPTS_DIR
from runs.executors.trace import read_artifact
from runs.models import Attempt, Execution, Report, Run, RunLane, Scorecard, TraceArtifact
from runs.queries import _comparability
from runs.reporting import export_report

pytestmark = [
    # Transactional: the heartbeat thread of a live execution (runs/leases.py) writes through its own
    # connection, which must see the run and its executions committed (on PostgreSQL it cannot see
    # a test transaction's rows, so the lease looks lost and the run never finishes).
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(RUNTIMES["codex"].resolve() is None, reason="codex is not installed: run `make install` (npm ci)"),
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
        # No row in the price table: priced from genai-prices' shipped data, a known cost (not the unknown
        # that would be counted at the budget's maximum).
        assert execution.cost_known is True and execution.cost_usd > 0, execution.observation["metrics"]
        assert execution.observation["metrics"]["costUsd"] == float(execution.cost_usd)
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


@pytest.mark.skipif(
    any(RUNTIMES[key].resolve() is None for key in ("claude-acp", "codex-acp")), reason="the ACP agents are not installed: run `npm ci`"
)
def test_nightly_execute_records_scores_and_reports_the_acp_candidates(reference_catalog, model_server, settings, monkeypatch) -> None:
    # Both ACP profiles' model providers pointed at the scripted model like real endpoints: Claude's
    # Anthropic profile (Claude Code appends /v1/messages to the API root) and codex's OpenAI one.
    profiles = {
        "anthropic": {"base_url": model_server.url + "/scripts/{case_id}", "wire_api": "messages", "env_key": "ANTHROPIC_API_KEY"},
        "openai": {"base_url": model_server.url + "/scripts/{case_id}/v1", "wire_api": "responses", "env_key": "OPENAI_API_KEY"},
    }
    settings.EVALHUB = {**settings.EVALHUB, "MODEL_PROVIDERS_JSON": json.dumps(profiles)}
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key-for-local-test-" + secrets.token_hex(8))
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key-for-local-test-" + secrets.token_hex(8))
    output = _nightly("--candidate", "acpx-claude-sonnet,acpx-codex-sol", "--case", "verification-policy,planning-lifecycle")
    run = Run.objects.get()
    assert run.lane == RunLane.LIVE
    executions = list(run.executions.order_by("position"))
    assert {e.candidate_key for e in executions} == {"acpx-claude-sonnet", "acpx-codex-sol"}
    for execution in executions:
        assert execution.classification == "completed", execution.observation
        # priced from the tokens the prompt results reported (price table or shipped price data), or unknown
        assert execution.cost_usd is None or execution.cost_usd > 0
        artifact = TraceArtifact.objects.get(execution=execution, attempt=1)
        document = read_artifact(bytes(artifact.data), artifact.digest)
        assert any(b'"session/prompt"' in base64.b64decode(raw) for raw in _raw_frames(document))
        scorecard = Scorecard.objects.get(execution=execution)
        failed = {name for name, dimension in scorecard.document["dimensions"].items() if not dimension["passed"]}
        assert failed <= {"quality_efficiency"}  # the unknown cost; every check of the case passed
    # Claude's requests went to the Messages route, keyed by the ACP session; codex-acp's to Responses.
    endpoints = {entry["endpoint"] for entry in model_server.requests}
    assert {"messages", "responses"} <= endpoints
    report = Report.objects.get(run=run)
    assert report.executions == len(executions) and report.scoreable == len(executions)
    assert f"run {run.pk}:" in output


def _raw_frames(document: bytes) -> list[bytes]:
    return [json.loads(line)["rawBase64"].encode() for line in document.splitlines() if b'"kind":"frame"' in line]


def test_a_priced_model_passes_every_check(reference_catalog, model_server, settings, monkeypatch) -> None:
    from candidates.models import ModelPrice

    ModelPrice.objects.create(model="gpt-5.6-luna", input_usd=1, cached_input_usd="0.1", output_usd=8, reasoning_usd=8)
    _point_openai_profile_at(settings, model_server.url + "/scripts/{case_id}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key-for-local-test")
    _nightly("--candidate", "codex-luna", "--limit", "1")
    (execution,) = Execution.objects.all()
    assert execution.cost_known is True and execution.cost_usd > 0
    assert Scorecard.objects.get(execution=execution).passed is True


def test_a_provider_503_is_retried_once_and_the_second_attempt_counts(reference_catalog, model_server, settings, monkeypatch) -> None:
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


def test_demo_live_is_a_labelled_scripted_run_never_history(reference_catalog, staff_client, monkeypatch, caplog) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    call_command("setup_schedules", stdout=io.StringIO())
    out = io.StringIO()
    # The night's trace-lineage entries: one through codex, one through opencode (the whole night
    # is `make demo-live`, some 30 executions).
    call_command("demo_live", "--no-progress", "--generated-at", TONIGHT, "--case", "trace-lineage", stdout=out)
    run = Run.objects.get()
    assert run.lane == RunLane.SCRIPTED
    # codex-luna through codex app-server, opencode-glm-flash through opencode serve
    assert sorted(run.executions.values_list("candidate_key", flat=True)) == ["codex-luna", "opencode-glm-flash"]
    assert set(run.executions.values_list("classification", flat=True)) == {"completed"}
    assert all(card.passed for card in Scorecard.objects.filter(execution__run=run))
    report = Report.objects.get(run=run)
    assert report.is_scripted is True and report.comparison is None and report.previous is None
    assert "scripted" in out.getvalue()
    # The summary names the candidates that played, not every candidate of the line-up.
    assert f"scripted run {run.pk} of codex-luna, opencode-glm-flash (lane scripted:" in out.getvalue()
    page = staff_client.get(reverse("pages:run", args=[run.pk]))
    assert b"Scripted" in page.content
    # ... and so does everything outside the run page: the observation, the API, every export.
    execution = run.executions.order_by("position").first()
    assert execution.observation["base"]["provenance"]["source"] == "fixture"
    # The made-up keys are nothing like ordinary text: scrubbing them leaves the evidence whole
    # (a key spelt "evalhub-scripted-demo-key" once scrubbed "scripted-model:" and "evalhub-").
    for each in run.executions.all():
        assert each.observation["base"]["provenance"]["behavior"] == f"scripted-model:{each.case_key}"
        assert "[REDACTED]" not in json.dumps(each.observation)
    assert "had not scrubbed" not in caplog.text
    assert staff_client.get(f"/api/executions/{execution.pk}/").json()["lane"] == "scripted"
    assert b"evalhub's scripted model" in staff_client.get(reverse("pages:execution", args=[execution.pk])).content
    for fmt in ("json", "markdown", "junit", "github"):
        content, _, name = export_report(report, fmt)
        assert "scripted" in name and "live" not in name and "scripted" in content
    assert "Source: live" not in export_report(report, "github")[0]
    # Never history: a second scripted run is not compared with the first.
    call_command(
        "demo_live",
        "--no-progress",
        "--generated-at",
        TONIGHT,
        "--case",
        "trace-lineage",
        "--candidate",
        "codex-luna",
        stdout=io.StringIO(),
    )
    second = Report.objects.exclude(pk=report.pk).get()
    assert second.previous is None and second.comparison is None
    # ... and a measured run (tonight's nightly: skipped, no credentials) is never compared with it.
    _nightly()
    measured = Run.objects.get(lane=RunLane.LIVE)
    assert Report.objects.get(run=measured).previous is None
    comparable, note = _comparability(measured, run)
    assert not comparable and f"run {run.pk} is a scripted run" in note
    page = staff_client.get(reverse("pages:compare"), {"a": measured.pk, "b": run.pk})
    assert page.status_code == 200 and b"is a scripted run" in page.content


@pytest.mark.skipif(RUNTIMES["opencode"].resolve() is None, reason="opencode is not installed: run `make install` (npm ci)")
def test_nightly_execute_records_scores_and_reports_the_opencode_candidates(reference_catalog, model_server, settings, monkeypatch) -> None:
    # The openrouter profile (Chat Completions) pointed at the scripted model, as a real endpoint is configured.
    profile = {"openrouter": {"base_url": model_server.url + "/scripts/{case_id}/v1", "wire_api": "chat", "env_key": "OPENROUTER_API_KEY"}}
    settings.EVALHUB = {**settings.EVALHUB, "MODEL_PROVIDERS_JSON": json.dumps(profile)}
    monkeypatch.setenv("OPENROUTER_API_KEY", "fake-key-for-local-test-" + secrets.token_hex(8))
    output = _nightly("--candidate", "opencode-glm,opencode-glm-flash", "--case", "verification-policy,trace-lineage")
    run = Run.objects.get()
    executions = list(run.executions.order_by("position"))
    assert [(e.candidate_key, e.case_key) for e in executions] == [
        ("opencode-glm", "verification-policy"),
        ("opencode-glm-flash", "trace-lineage"),
    ]
    for execution in executions:
        assert execution.classification == "completed", execution.observation
        assert execution.cost_known is True and execution.cost_usd > 0  # priced from genai-prices (no table row)
        artifact = TraceArtifact.objects.get(execution=execution, attempt=1)
        document = read_artifact(bytes(artifact.data), artifact.digest)
        raw = [base64.b64decode(line["rawBase64"]) for line in map(json.loads, document.splitlines()) if line["kind"] == "frame"]
        assert any(frame.startswith(b"POST /session/ses_") and b"/prompt_async" in frame for frame in raw)
        assert any(b'"type":"session.idle"' in frame for frame in raw)
    assert {request["headers"].get("x-session-id", "")[:4] for request in model_server.requests} == {"ses_"}
    report = Report.objects.get(run=run)
    assert report.executions == 2 and report.scoreable == 2
    assert Scorecard.objects.filter(execution__run=run).count() == 2
    assert f"run {run.pk}:" in output
