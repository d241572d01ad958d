"""Trace artifacts: stored per attempt by the orchestration (failed attempts included), scrubbed
again before storage, shown and downloaded (digest verified) on the execution page and through
the API, and never copied into reports or exports."""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import logging
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from evalhub import reference_data
from evalhub.secrets import redact
from runs.creation import create_run
from runs.dispatch import execute_run
from runs.executors.base import ExecutionRequest, Executor, InfrastructureError
from runs.executors.trace import TraceRecorder, read_artifact, summarize_ndjson
from runs.models import Attempt, Execution, Run, RunLane, TraceArtifact
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
DAY0 = "2026-08-19T04:00:00.000Z"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
#: Synthetic values, assembled by concatenation.
OPENAI_VALUE = "x-very-" + "secret-value-123"
OPENROUTER_VALUE = "or-plain-" + "value-456789"
ENVIRON = {"OPENAI_API_KEY": OPENAI_VALUE, "OPENROUTER_API_KEY": OPENROUTER_VALUE}
MARKER = "frame-marker-7f3a"

#: Per execution id, one step per attempt: ``step(request) -> observation`` (or raises).
PLAN: dict[str, list[Callable[[ExecutionRequest], dict[str, Any]]]] = {}
SEEN: list[ExecutionRequest] = []


class TracingExecutor(Executor):
    """A test double at the executor edge: plays ``PLAN`` and leaves traces in the request's sink."""

    runtime_name = "tracing test double"

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        SEEN.append(request)
        return PLAN[str(request.entry["executionId"])].pop(0)(request)


def record(
    request: ExecutionRequest,
    frames: int,
    *,
    scrub: Callable[[str], str] | None = None,
    text: str = MARKER,
    cap_bytes: int = 8 * 1024 * 1024,
) -> TraceRecorder:
    recorder = TraceRecorder(scrub=scrub or partial(redact, extra_values=list(request.environment.values())), cap_bytes=cap_bytes)
    for index in range(frames):
        frame = recorder.frame("in", f'{{"n":{index},"text":"{text}"}}'.encode())
        recorder.interpret([frame], "mapped" if index % 2 == 0 else "ignored", [])
    assert request.artifacts is not None
    request.artifacts.store_trace(recorder.artifact())
    return recorder


def succeed(frames: int, **kwargs: Any) -> Callable[[ExecutionRequest], dict[str, Any]]:
    def step(request: ExecutionRequest) -> dict[str, Any]:
        recorder = record(request, frames, **kwargs)
        observation = completed_observation(dict(request.entry))
        observation["traceLineage"] = recorder.summary()
        return observation

    return step


def fail_with(error: BaseException, frames: int) -> Callable[[ExecutionRequest], dict[str, Any]]:
    def step(request: ExecutionRequest) -> dict[str, Any]:
        record(request, frames)
        raise error

    return step


@pytest.fixture(autouse=True)
def tracing_executor(settings) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "EXECUTORS": {"codex_app_server": "tests.test_trace_artifacts.TracingExecutor"}}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    PLAN.clear()
    SEEN.clear()
    yield
    PLAN.clear()
    SEEN.clear()


def one_execution(*steps: Callable[[ExecutionRequest], dict[str, Any]], case: str = "final-response") -> Execution:
    """A run of one codex-luna execution of ``case`` playing ``steps``, executed."""
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at=DAY0)
    selection = Selection(candidate_ids=("codex-luna",), case_ids=(case,), limit=1)
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=selection)
    execution = run.executions.get()
    PLAN[execution.execution_id] = list(steps)
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    return execution


def stored_frames(trace: TraceArtifact) -> list[bytes]:
    document = read_artifact(bytes(trace.data), trace.digest)
    return [base64.b64decode(json.loads(line)["rawBase64"]) for line in document.splitlines() if b'"kind":"frame"' in line]


# --- storage by the orchestration ------------------------------------------------------------------


def test_every_attempt_keeps_its_trace_even_the_one_that_failed(reference_catalog) -> None:
    execution = one_execution(fail_with(InfrastructureError("provider_http_503", True, "HTTP 503"), 2), succeed(3))

    traces = list(execution.traces.order_by("attempt"))
    outcomes = list(execution.attempts.order_by("number").values_list("number", "outcome"))
    assert outcomes == [(1, "infrastructure_error"), (2, "observation")]
    assert [(trace.attempt, trace.frame_count, trace.truncated) for trace in traces] == [(1, 2, False), (2, 3, False)]
    for trace in traces:
        document = read_artifact(bytes(trace.data), trace.digest)
        assert (trace.raw_bytes, trace.stored_bytes) == (len(document), len(bytes(trace.data)))
        assert summarize_ndjson(document)["digestVerified"] is True
    assert execution.observation["traceLineage"]["traceRef"] == traces[1].digest


def test_a_final_infrastructure_failure_and_a_crash_keep_their_traces(reference_catalog) -> None:
    failed = one_execution(fail_with(InfrastructureError("provider_auth_refused", False, "HTTP 401"), 4))
    crashed = one_execution(fail_with(RuntimeError("driver bug"), 1), case="verification-policy")

    assert (failed.classification, failed.traces.get().frame_count) == ("infrastructure_failure", 4)
    assert (crashed.failure_code, crashed.traces.get().frame_count) == ("executor_crashed", 1)


def test_a_trace_its_recorder_left_dirty_is_scrubbed_before_it_is_stored(reference_catalog, caplog) -> None:
    leaky = succeed(2, scrub=lambda text: text, text=f"keys {OPENAI_VALUE} {OPENROUTER_VALUE}")

    with caplog.at_level(logging.WARNING, logger="runs.settlement"):
        execution = one_execution(leaky)

    trace = execution.traces.get()
    frames = stored_frames(trace)
    assert frames and all(b"keys [REDACTED] [REDACTED]" in frame for frame in frames)
    document = read_artifact(bytes(trace.data), trace.digest)
    assert summarize_ndjson(document)["digestVerified"] is True
    for value in (OPENAI_VALUE, OPENROUTER_VALUE):
        assert value.encode() not in document
        assert value not in caplog.text
    assert (
        f"run {execution.run_id} execution {execution.execution_id} attempt 1: the trace held a secret value its recorder had not scrubbed"
        in caplog.text
    )


def test_a_malformed_artifact_loses_the_trace_not_the_execution(reference_catalog, caplog) -> None:
    def step(request: ExecutionRequest) -> dict[str, Any]:
        request.artifacts.store_trace(object())
        return completed_observation(dict(request.entry))

    with caplog.at_level(logging.WARNING, logger="runs.settlement"):
        execution = one_execution(step)

    assert execution.classification == "completed"
    assert execution.attempts.count() == 1
    assert not execution.traces.exists()
    assert f"run {execution.run_id} execution {execution.execution_id} attempt 1: the trace was not stored" in caplog.text


def test_an_executor_that_records_nothing_stores_no_trace(reference_catalog) -> None:
    execution = one_execution(lambda request: completed_observation(dict(request.entry)))

    assert execution.classification == "completed"
    assert not TraceArtifact.objects.exists()


def test_executors_receive_the_reference_case_plus_its_prompt(reference_catalog) -> None:
    one_execution(succeed(1), case="delegation-return")

    (request,) = SEEN
    case = dict(request.case)
    prompt = case.pop("prompt")
    assert prompt == reference_data.load("case-prompts.json")["delegation-return"]
    reference = next(item for item in reference_data.load("workflow-cases.json")["cases"] if item["id"] == "delegation-return")
    assert case == reference
    assert request.artifacts is not None


# --- the execution page and the download -----------------------------------------------------------


def test_the_execution_page_shows_checks_attempts_and_the_trace_download(reference_catalog, reader_client) -> None:
    execution = one_execution(fail_with(InfrastructureError("provider_http_503", True, "HTTP 503"), 2), succeed(50, cap_bytes=2000))

    html = reader_client.get(reverse("pages:execution", args=[execution.pk])).content.decode()

    assert execution.execution_id in html
    assert "terminal-authority" in html  # a lifecycle check of the observation
    assert "provider_http_503" in html
    assert html.count("Download trace (NDJSON, gzip)") == 2
    assert reverse("pages:execution-trace", args=[execution.pk, 2]) in html
    assert html.count(">truncated</span>") == 1
    assert "50 frames" in html
    run_page = reader_client.get(reverse("pages:run", args=[execution.run_id])).content.decode()
    assert reverse("pages:execution", args=[execution.pk]) in run_page


def test_the_execution_page_costs_the_same_queries_with_one_attempt_or_two(
    reference_catalog, reader_client, django_assert_num_queries
) -> None:
    single = one_execution(succeed(1))
    retried = one_execution(
        fail_with(InfrastructureError("provider_http_503", True, "HTTP 503"), 1), succeed(1), case="verification-policy"
    )

    for execution in (single, retried):
        with django_assert_num_queries(5):  # session, user, execution with run and scorecard, attempts, traces
            assert reader_client.get(reverse("pages:execution", args=[execution.pk])).status_code == 200


def test_an_unknown_execution_is_a_404_page(reference_catalog, reader_client) -> None:
    assert reader_client.get(reverse("pages:execution", args=[999_999])).status_code == 404


def test_the_trace_downloads_as_a_gzip_attachment(reference_catalog, reader_client) -> None:
    execution = one_execution(succeed(3))
    trace = execution.traces.get()

    response = reader_client.get(reverse("pages:execution-trace", args=[execution.pk, 1]))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    assert (
        response["Content-Disposition"]
        == f'attachment; filename="run-{execution.run_id}-{execution.execution_id}-attempt-1.trace.ndjson.gz"'
    )
    assert gzip.decompress(response.content) == read_artifact(bytes(trace.data), trace.digest)
    assert reader_client.get(reverse("pages:execution-trace", args=[execution.pk, 2])).status_code == 404


def test_a_scripted_run_s_trace_file_names_its_lane(reference_catalog, reader_client) -> None:
    """Every file name of a run that is not a measurement says its lane (its exports are
    run-N-scripted-report.*); the trace of a scripted run's execution was run-N-rwe-….trace.ndjson.gz."""
    execution = one_execution(succeed(2))
    Run.objects.filter(pk=execution.run_id).update(lane=RunLane.SCRIPTED)  # the lane alone decides the name
    expected = f'attachment; filename="run-{execution.run_id}-scripted-{execution.execution_id}-attempt-1.trace.ndjson.gz"'

    page = reader_client.get(reverse("pages:execution-trace", args=[execution.pk, 1]))
    api = reader_client.get(f"/api/executions/{execution.pk}/trace/")

    assert (page.status_code, api.status_code) == (200, 200)
    assert page["Content-Disposition"] == expected
    assert api["Content-Disposition"] == expected


def test_a_damaged_trace_is_a_clear_409_page_never_the_bytes(reference_catalog, reader_client) -> None:
    execution = one_execution(succeed(3))
    TraceArtifact.objects.filter(execution=execution).update(data=gzip.compress(b'{"kind":"frame","forged":true}\n'))

    response = reader_client.get(reverse("pages:execution-trace", args=[execution.pk, 1]))

    assert response.status_code == 409
    assert response["Content-Type"].startswith("text/html")
    assert "does not match its recorded digest" in response.content.decode()


def test_signed_out_visitors_get_neither_the_page_nor_the_trace(reference_catalog, client) -> None:
    execution = one_execution(succeed(1))

    for url in (reverse("pages:execution", args=[execution.pk]), reverse("pages:execution-trace", args=[execution.pk, 1])):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


# --- the API ---------------------------------------------------------------------------------------


def test_the_api_serves_the_last_attempt_s_trace_or_the_one_asked_for(reference_catalog, reader_client) -> None:
    execution = one_execution(fail_with(InfrastructureError("provider_http_503", True, "HTTP 503"), 2), succeed(3))
    url = f"/api/executions/{execution.pk}/trace/"

    latest = reader_client.get(url, HTTP_ACCEPT="application/gzip")
    first = reader_client.get(url, {"attempt": "1"})

    assert latest.status_code == 200
    assert (
        latest["Content-Disposition"] == f'attachment; filename="run-{execution.run_id}-{execution.execution_id}-attempt-2.trace.ndjson.gz"'
    )
    assert (latest["X-Trace-Frames"], latest["X-Trace-Truncated"]) == ("3", "false")
    assert latest["X-Trace-Digest"] == execution.traces.get(attempt=2).digest
    assert summarize_ndjson(gzip.decompress(first.content))["frameCount"] == 2


def test_the_api_says_clearly_when_there_is_no_trace(reference_catalog, reader_client) -> None:
    execution = one_execution(lambda request: completed_observation(dict(request.entry)))

    none = reader_client.get(f"/api/executions/{execution.pk}/trace/")
    missing = reader_client.get("/api/executions/999999/trace/")
    bad = reader_client.get(f"/api/executions/{execution.pk}/trace/", {"attempt": "first"})

    assert (none.status_code, none.json()) == (404, {"detail": f"There is no recorded trace for execution {execution.pk}."})
    assert (missing.status_code, missing.json()) == (404, {"detail": "There is no execution 999999."})
    assert (bad.status_code, bad.json()) == (400, {"attempt": ["Give an attempt number: 1, 2, ..."]})


def test_the_api_refuses_a_damaged_trace_with_409(reference_catalog, reader_client) -> None:
    execution = one_execution(succeed(2))
    TraceArtifact.objects.filter(execution=execution).update(data=b"not gzip")

    response = reader_client.get(f"/api/executions/{execution.pk}/trace/")

    assert response.status_code == 409
    assert "cannot be served" in response.json()["detail"]


def test_the_api_trace_needs_sign_in(reference_catalog, client) -> None:
    execution = one_execution(succeed(1))

    assert client.get(f"/api/executions/{execution.pk}/trace/").status_code == 401


# --- never in reports or exports -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "markdown", "junit", "github"])
def test_traces_never_reach_reports_or_exports(reference_catalog, reader_client, fmt: str) -> None:
    execution = one_execution(succeed(3))
    run = Run.objects.get(pk=execution.run_id)
    trace = execution.traces.get()
    assert run.report is not None

    export = reader_client.get(f"/api/reports/{run.report.pk}/export/", {"format": fmt}).content.decode()
    report = reader_client.get(f"/api/reports/{run.report.pk}/").content.decode()
    api_execution = reader_client.get(f"/api/executions/{execution.pk}/").content.decode()

    for text in (export, report, api_execution):
        assert MARKER not in text
        assert "rawBase64" not in text
        assert base64.b64encode(stored_frames(trace)[0]).decode() not in text


def test_the_reporting_code_never_reads_trace_artifacts() -> None:
    root = Path(__file__).resolve().parent.parent / "runs"
    for name in ("evaluation/exports.py", "reporting.py", "evaluation/reports.py", "evaluation/renderers.py"):
        source = (root / name).read_text(encoding="utf-8")
        assert "TraceArtifact" not in source and ".traces" not in source, name


def test_a_second_trace_for_the_same_attempt_is_refused(reference_catalog) -> None:
    from django.db import IntegrityError, transaction

    execution = one_execution(succeed(1))
    trace = execution.traces.get()

    with pytest.raises(IntegrityError), transaction.atomic():
        TraceArtifact.objects.create(
            execution=execution, attempt=1, data=b"", raw_bytes=0, stored_bytes=0, frame_count=0, digest=trace.digest
        )
    assert Attempt.objects.filter(execution=execution).count() == 1


def test_the_admin_lists_an_execution_s_traces_without_their_bytes(reference_catalog, staff_client) -> None:
    execution = one_execution(succeed(2))
    trace = execution.traces.get()

    response = staff_client.get(reverse("admin:runs_execution_change", args=[execution.pk]))

    html = response.content.decode()
    assert response.status_code == 200
    assert trace.digest in html
    assert reverse("pages:execution-trace", args=[execution.pk, 1]) in html
    assert MARKER not in html and "rawBase64" not in html
