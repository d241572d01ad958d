"""A scripted run reads as scripted everywhere, never as a measurement.

A scripted-lane run drives the real runtime against evalhub's scripted model (``make demo-live``).
Outside the run page it used to pass as a measurement: the execution page, tonight's list of runs,
``/api/executions/…`` (``provenance.source: "live_model"``) and all four exports ("Source: live",
``run-N-live-report.*``, the candidate's real model as the provider). Here a scripted run is made
through the replay executor (no runtime needed) and every place is read. Live runs keep the
reference's bytes (``tests/test_report_vectors.py``, ``tests/test_reporting.py``).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.creation import create_run
from runs.dispatch import execute_run
from runs.evaluation.exports import EXPORT_FORMATS, export_file_name
from runs.evaluation.observations import provenance, unavailable_observation
from runs.evaluation.renderers import SCRIPTED_NOTICE, render_junit, render_markdown
from runs.evaluation.reports import live_bundle, scripted_bundle
from runs.executors.replay import REPLAY_STORE
from runs.models import Report, Run, RunLane
from runs.reporting import export_report, report_run
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
#: Tonight's first two codex-luna entries (whichever cases the rotation gives it tonight).
LUNA = Selection(candidate_ids=("codex-luna",), limit=2)
CANDIDATE = {"id": "codex-luna", "adapter": "codex_app_server", "model": "gpt-5.6-luna"}


def _scripted(observation: dict) -> dict:
    observation["base"]["provenance"] = provenance(observation["caseId"], scripted=True)
    return observation


@pytest.fixture
def scripted_run(reference_catalog, replay_executors) -> Run:
    schedule, _ = schedule_for_night(seed=SEED, now=timezone.now())
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=LUNA, lane=RunLane.SCRIPTED)
    for execution in run.executions.select_related("entry"):
        REPLAY_STORE[execution.execution_id] = _scripted(completed_observation(execution.entry.to_document(), cost_usd=0))
    execute_run(run, environ={"OPENAI_API_KEY": "x-openai-value-123"})
    run.refresh_from_db()
    return run


# --- pure: provenance, bundle, renderings, file names ---------------------------------------------


def test_a_scripted_observation_names_a_fixture_not_a_live_model() -> None:
    assert provenance("final-response") == {"source": "live_model", "behavior": "final-response"}
    assert provenance("final-response", scripted=True) == {"source": "fixture", "behavior": "scripted-model:final-response"}
    fallback = unavailable_observation(
        case={"id": "final-response", "assertions": {}},
        candidate={
            "id": "codex-luna",
            "provider": "codex",
            "budget": {"maxLatencyMs": 1, "maxAttempts": 1, "maxTotalTokens": 1, "maxCostUsd": 1},
        },
        classification="infrastructure_failure",
        code="runtime_missing",
        category="orchestration",
        retryable=False,
        message="codex is not installed",
        scripted=True,
    )
    assert fallback["base"]["provenance"]["source"] == "fixture"


def test_a_scripted_bundle_names_the_scripted_model_and_never_shares_a_live_id() -> None:
    live = live_bundle(runner_version="0.1.0", seed=SEED, candidates=[CANDIDATE])

    scripted = scripted_bundle(live)

    assert list(scripted) == list(live)
    assert live["id"].startswith("runner-live-v2-") and scripted["id"] == "runner-scripted-v2-" + live["id"].removeprefix("runner-live-v2-")
    assert scripted["providerVersions"] == {"codex-luna": "codex_app_server:evalhub-scripted-model"}
    assert "gpt-5.6-luna" not in json.dumps(scripted)


def test_scripted_exports_are_named_for_their_lane_and_live_ones_keep_the_reference_names() -> None:
    assert [export_file_name(fmt) for fmt in EXPORT_FORMATS] == [suffix for _, suffix in EXPORT_FORMATS.values()]
    assert [export_file_name(fmt, lane="scripted") for fmt in EXPORT_FORMATS] == [
        "scripted-report.json",
        "scripted-report.md",
        "scripted-report.junit.xml",
        "github-scripted-summary.md",
    ]


# --- a scripted run, end to end through the database ----------------------------------------------


def test_a_scripted_report_says_scripted_in_every_export(scripted_run: Run) -> None:
    report = report_run(scripted_run, generated_at="2026-12-01T04:00:00.000Z")
    assert (report.source, report.is_scripted) == ("scripted", True)
    assert report.bundle_id.startswith("runner-scripted-v2-")

    exports = {fmt: export_report(Report.objects.get(pk=report.pk), fmt) for fmt in EXPORT_FORMATS}

    for fmt, (content, _, name) in exports.items():
        assert "live" not in name and "scripted" in name, name
        assert "gpt-5.6-luna" not in content, fmt  # the provider is the scripted model, not the real one
        assert "runner-live-v2-" not in content, fmt
    document = json.loads(exports["json"][0])["report"]
    assert document["source"] == "scripted"
    assert set(document["bundle"]["providerVersions"].values()) == {"codex_app_server:evalhub-scripted-model"}
    assert all(row["observation"]["base"]["provenance"]["source"] == "fixture" for row in document["results"])
    for fmt in ("markdown", "github"):
        content = exports[fmt][0]
        assert SCRIPTED_NOTICE in content and "- Source: scripted" in content and "Source: live" not in content
        assert "scoreable 2 · passed 2" in content  # a scripted 2/2 PASS ...
        assert content.index(SCRIPTED_NOTICE) < content.index("| PASS |")  # ... reads as scripted first
    junit = exports["junit"][0]
    assert '<testsuite name="paperclip-runner-workflows-scripted" tests="2" failures="0" skipped="0">' in junit
    assert '<property name="lane" value="scripted" />' in junit
    assert junit.count('classname="runner.workflow.scripted"') == 2 and 'classname="runner.workflow"' not in junit


def test_scripted_exports_download_with_scripted_file_names(scripted_run: Run, reader_client) -> None:
    report = report_run(scripted_run, generated_at="2026-12-01T04:00:00.000Z")
    for fmt in EXPORT_FORMATS:
        page = reader_client.get(reverse("pages:run-export", args=[scripted_run.pk, fmt]))
        api = reader_client.get(f"/api/reports/{report.pk}/export/", {"format": fmt})
        expected = f'attachment; filename="run-{scripted_run.pk}-{export_file_name(fmt, lane="scripted")}"'
        assert page["Content-Disposition"] == api["Content-Disposition"] == expected


def test_the_execution_page_and_the_api_say_scripted(scripted_run: Run, reader_client) -> None:
    execution = scripted_run.executions.order_by("position").first()

    page = reader_client.get(reverse("pages:execution", args=[execution.pk])).content.decode()
    body = reader_client.get(f"/api/executions/{execution.pk}/").json()
    listed = reader_client.get("/api/executions/", {"run": scripted_run.pk}).json()

    assert '<span class="tag tag-warn scripted">scripted</span>' in page and "evalhub's scripted model" in page
    assert body["lane"] == "scripted"
    assert body["observation"]["base"]["provenance"] == {"source": "fixture", "behavior": f"scripted-model:{execution.case_key}"}
    assert {item["lane"] for item in listed["results"]} == {"scripted"}


def test_tonights_list_of_runs_labels_the_scripted_run(scripted_run: Run, reader_client) -> None:
    page = reader_client.get(reverse("pages:tonight")).content.decode()

    assert f"run {scripted_run.pk}</a>" in page
    assert "scripted (not measured)" in page


def test_every_list_of_runs_says_what_kind_each_run_is(scripted_run: Run, reader_client) -> None:
    """The history table, tonight's list and /api/runs/ label a scripted run, a refresh of it
    (scripted too), a chaos run and a re-run — none of them may read as a measured night."""
    from runs.reporting import refresh_run

    refresh = refresh_run(scripted_run, generated_at="2026-12-01T05:00:00.000Z")
    chaos, _ = create_run(schedule=scripted_run.schedule, cost_ceiling_usd=Decimal("1"), selection=LUNA, lane=RunLane.CHAOS)
    rerun, _ = create_run(schedule=scripted_run.schedule, cost_ceiling_usd=Decimal("1"), selection=LUNA)
    Run.objects.filter(pk=rerun.pk).update(repeat_of=scripted_run, repeat_scope="failed")
    history = reader_client.get(reverse("pages:runs")).content.decode()
    tonight = reader_client.get(reverse("pages:tonight")).content.decode()
    for page in (history, tonight):
        rows = {int(pk): text for pk, text in re.findall(r">run (\d+)</a>(.*?)(?:</tr>|</li>)", page, re.S)}
        assert "scripted (not measured)" in rows[scripted_run.pk]
        assert f"refresh of run {scripted_run.pk}" in rows[refresh.pk] and "scripted (not measured)" in rows[refresh.pk]
        assert "chaos (pipeline faults, not measured)" in rows[chaos.pk]
        assert f"re-run of run {scripted_run.pk}" in rows[rerun.pk] and "scripted" not in rows[rerun.pk]
        # Both tags link to the run they refresh or repeat, as the run's own page does.
        original = reverse("pages:run", args=[scripted_run.pk])
        assert f'<a class="tag tag-warn refresh" href="{original}">refresh of run {scripted_run.pk}</a>' in rows[refresh.pk]
        assert f'<a class="tag rerun" href="{original}">re-run of run {scripted_run.pk}</a>' in rows[rerun.pk]
    listed = {run["id"]: run for run in reader_client.get("/api/runs/").json()["results"]}
    assert [listed[run.pk]["scripted"] for run in (scripted_run, refresh, chaos, rerun)] == [True, True, False, False]
    assert (listed[refresh.pk]["refreshOf"], listed[rerun.pk]["repeatOf"]) == (scripted_run.pk, scripted_run.pk)
    assert reader_client.get(f"/api/runs/{refresh.pk}/").json()["scripted"] is True


def test_a_live_report_keeps_the_reference_source_and_names(reference_catalog, replay_executors) -> None:
    schedule, _ = schedule_for_night(seed=SEED, now=timezone.now())
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=LUNA)
    for execution in run.executions.select_related("entry"):
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.entry.to_document(), cost_usd=0)
    execute_run(run, environ={"OPENAI_API_KEY": "x-openai-value-123"})
    report = report_run(run, generated_at="2026-12-01T04:00:00.000Z")

    assert report.source == "live" and report.bundle_id.startswith("runner-live-v2-")
    assert render_markdown(report.document).splitlines()[2] == "- Source: live"
    assert '<testsuite name="paperclip-runner-workflows" ' in render_junit(report.document)
    assert export_report(report, "github")[2] == f"run-{run.pk}-github-live-summary.md"


# --- history: a scripted report is never a measured run's previous, nor a trend point ------------


def _measured_run(schedule) -> Run:
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=LUNA)
    for execution in run.executions.select_related("entry"):
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.entry.to_document())
    execute_run(run, environ={"OPENAI_API_KEY": "x-openai-value-123"})
    run.refresh_from_db()
    return run


def test_a_scripted_report_sharing_the_bundle_id_is_never_the_previous_report(scripted_run: Run) -> None:
    first = _measured_run(scripted_run.schedule)
    # A scripted selection of the same night stored under the measured bundle id (as before
    # scripted bundles had their own prefix) and newer than the measured report.
    Report.objects.filter(run=scripted_run).update(bundle_id=first.report.bundle_id, created_at=timezone.now())

    second = _measured_run(scripted_run.schedule)

    assert second.report.bundle_id == first.report.bundle_id
    assert second.report.previous_id == first.report.pk


def test_a_scripted_run_is_never_a_point_of_the_candidate_trend(scripted_run: Run) -> None:
    from runs.queries import candidate_history

    measured = _measured_run(scripted_run.schedule)

    history = candidate_history("codex-luna")

    assert [point.run_id for point in history.points] == [measured.pk]


def test_a_refresh_of_a_scripted_run_stays_scripted(scripted_run: Run, reader_client) -> None:
    """Re-scoring scripted observations does not make them measurements: the refresh's report,
    its exports and its page say scripted, and its bundle is the scripted one."""
    from runs.reporting import refresh_run

    original = report_run(scripted_run, generated_at="2026-12-01T04:00:00.000Z")
    refresh = refresh_run(scripted_run, generated_at="2026-12-01T05:00:00.000Z")
    report = Report.objects.get(run=refresh)
    assert (report.source, report.is_scripted, report.is_refresh) == ("scripted", True, True)
    assert report.bundle_id == original.bundle_id and report.bundle_id.startswith("runner-scripted-v2-")
    for fmt in EXPORT_FORMATS:
        content, _, name = export_report(report, fmt)
        assert "live" not in name and "scripted" in name, name
        assert "runner-live-v2-" not in content and "gpt-5.6-luna" not in content, fmt
    markdown, _, _ = export_report(report, "markdown")
    assert SCRIPTED_NOTICE in markdown and "- Source: scripted" in markdown and "Source: live" not in markdown
    page = reader_client.get(reverse("pages:run", args=[refresh.pk])).content.decode()
    assert 'class="tag tag-warn scripted"' in page and "The run it refreshes is <strong>scripted</strong>" in page
