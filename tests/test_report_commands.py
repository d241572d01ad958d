"""``manage.py score`` and ``manage.py report`` reproduce the reference vectors.

Both commands are thin shells over ``runs.evaluation.scoring`` / ``runs.evaluation.reports`` / ``runs.evaluation.renderers``; the
inputs are built from ``scoring-vectors.json`` as its ``meta.layout`` describes and the outputs
compared with the reference's, JSON by value and text byte for byte.
"""

from __future__ import annotations

import copy
import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.evaluation.renderers import render_json, render_previous_bundle_section
from tests.reference import scoring_vectors

pytestmark = pytest.mark.django_db


@cache
def _vectors() -> dict[str, Any]:
    return scoring_vectors()


def vectors() -> dict[str, Any]:
    return copy.deepcopy(_vectors())


def _entry(section: str, vector_id: str) -> dict[str, Any]:
    return next(entry for entry in vectors()[section] if entry["id"] == vector_id)


def _pool(pool_id: str) -> dict[str, Any]:
    return vectors()["reportPool"][pool_id]


def write(tmp_path: Path, name: str, document: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return str(path)


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def run_failing(*args: str) -> tuple[str, str]:
    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(*args, stdout=out)
    return out.getvalue(), str(caught.value)


def report_input(vector: dict[str, Any]) -> dict[str, Any]:
    """The command input for a ``reports`` vector: its rows built from the named observations."""
    observations = {entry["id"]: entry for entry in vectors()["observations"]}
    given = vector["input"]
    results = [
        {
            "scenarioId": observations[result_id]["observation"]["caseId"],
            "candidateId": observations[result_id]["observation"]["candidateId"],
            "observation": observations[result_id]["observation"],
            "scorecard": observations[result_id]["scorecard"],
        }
        for result_id in given["resultIds"]
    ]
    document = {key: given[key] for key in ("source", "bundle", "generatedAt") if key in given}
    document["results"] = results
    if "traceability" in given:
        document["traceability"] = given["traceability"]
    return document


# --- score ----------------------------------------------------------------------------------------------------


def test_score_prints_every_vector_scorecard_in_order_and_errors_in_place(tmp_path: Path) -> None:
    items = vectors()["observations"]
    path = write(tmp_path, "observations.json", [{"observation": v["observation"], "options": v["options"]} for v in items])
    output, error = run_failing("score", path)
    printed = json.loads(output)
    expected = [v["scorecard"] if "scorecard" in v else {"error": v["error"]} for v in items]
    assert printed == expected
    invalid = sum(1 for v in items if "error" in v)
    assert invalid == 5
    assert error == f"{invalid} of {len(items)} observation(s) could not be scored"


def test_score_output_is_json_stringify_of_the_scorecards(tmp_path: Path) -> None:
    valid = [v for v in vectors()["observations"] if "scorecard" in v]
    path = write(tmp_path, "observations.json", [{"observation": v["observation"], "options": v["options"]} for v in valid])
    output = run("score", path)
    assert output == render_json([v["scorecard"] for v in valid])


def test_score_of_nothing_prints_an_empty_array(tmp_path: Path) -> None:
    assert run("score", write(tmp_path, "empty.json", [])) == "[]\n"


def test_score_reports_a_malformed_item_in_place(tmp_path: Path) -> None:
    output, error = run_failing("score", write(tmp_path, "bad.json", [42, {"observation": {}, "options": {"nope": 1}}]))
    printed = json.loads(output)
    assert printed[0] == {"error": "item 0 must be an object with observation and options"}
    # The observation is checked before the options, as the reference does.
    assert printed[1]["error"] == "unsupported workflow observation schema for undefined"
    assert error == "2 of 2 observation(s) could not be scored"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"observation": 1}', "must hold a JSON array of {observation, options} objects"),
        ("[NaN]", "is not valid JSON: NaN is not allowed in JSON: use a finite number"),
        ("[1e309]", "is not valid JSON: 1e309 is too large: use a finite number"),
        pytest.param(
            "[" + "9" * 5000 + "]",
            "is not valid JSON: a whole number of 5000 digits is too long: use at most 4300 digits",
            id="5000 digits",
        ),
        ("[", "is not valid JSON: "),
    ],
)
def test_score_refuses_a_bad_file_without_a_traceback(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    _, error = run_failing("score", str(path))
    assert message in error


def test_score_names_a_missing_file(tmp_path: Path) -> None:
    _, error = run_failing("score", str(tmp_path / "missing.json"))
    assert error == f"cannot read {tmp_path / 'missing.json'}: No such file or directory"


# --- report ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vector_id", [entry["id"] for entry in _vectors()["reports"]])
def test_report_json_reproduces_the_reference_report(tmp_path: Path, reference_catalog: None, vector_id: str) -> None:
    vector = _entry("reports", vector_id)
    output = run("report", write(tmp_path, "input.json", report_input(vector)))
    assert json.loads(output) == {"report": vector["report"], "alerts": [], "comparison": None}
    assert output == render_json({"report": vector["report"], "alerts": [], "comparison": None})


@pytest.mark.parametrize("vector_id", [entry["id"] for entry in _vectors()["reports"]])
@pytest.mark.parametrize(("fmt", "key"), [("markdown", "markdown"), ("junit", "junit")])
def test_report_renderings_are_byte_identical(tmp_path: Path, reference_catalog: None, vector_id: str, fmt: str, key: str) -> None:
    vector = _entry("reports", vector_id)
    assert run("report", write(tmp_path, "input.json", report_input(vector)), "--format", fmt) == vector[key]


def test_report_github_summary_appends_the_alerts_section(tmp_path: Path, reference_catalog: None) -> None:
    vector = _entry("reports", "dev-live-report")
    output = run("report", write(tmp_path, "input.json", report_input(vector)), "--format", "github")
    assert output == vector["markdown"] + "\n## Alerts\n\nNo active workflow-eval regression alerts.\n"


def test_report_works_from_the_shipped_catalog_without_stored_cases(tmp_path: Path) -> None:
    vector = _entry("reports", "dev-live-report")
    assert run("report", write(tmp_path, "input.json", report_input(vector)), "--format", "markdown") == vector["markdown"]


def _pool_input(pool_id: str) -> dict[str, Any]:
    report = _pool(pool_id)
    return {key: report[key] for key in ("source", "bundle", "generatedAt", "results")}


@pytest.mark.parametrize("vector_id", [entry["id"] for entry in _vectors()["comparisons"]])
def test_report_compare_reproduces_the_reference_comparison(tmp_path: Path, reference_catalog: None, vector_id: str) -> None:
    vector = _entry("comparisons", vector_id)
    current = write(tmp_path, "current.json", _pool_input(vector["input"]["current"]))
    previous = write(tmp_path, "previous.json", _pool(vector["input"]["previous"]))
    printed = json.loads(run("report", current, "--compare", previous))
    assert printed["comparison"] == vector["comparison"]
    github = run("report", current, "--compare", previous, "--format", "github")
    assert github.endswith(render_previous_bundle_section(vector["comparison"]))


def test_report_compare_accepts_an_export_and_says_when_bundles_differ(tmp_path: Path, reference_catalog: None) -> None:
    current_input = _pool_input("dev-current")
    other = _pool("dev-previous")
    other["bundle"] = {**other["bundle"], "id": "runner-live-v2-0000000000000000"}
    current = write(tmp_path, "current.json", current_input)
    previous = write(tmp_path, "previous.json", {"report": other, "alerts": [], "comparison": None})
    comparison = json.loads(run("report", current, "--compare", previous))["comparison"]
    assert comparison["compatible"] is False
    assert comparison["previousBundleId"] == "runner-live-v2-0000000000000000"


@pytest.mark.parametrize("vector_id", [entry["id"] for entry in _vectors()["alerts"]])
def test_report_alerts_from_history_reproduce_the_reference(tmp_path: Path, reference_catalog: None, vector_id: str) -> None:
    vector = _entry("alerts", vector_id)
    document = _pool_input(vector["input"]["current"])
    document["history"] = [_pool(pool_id) for pool_id in vector["input"]["history"]]
    document["baselineReady"] = vector["input"]["baselineReady"]
    path = write(tmp_path, "input.json", document)
    assert json.loads(run("report", path))["alerts"] == vector["alerts"]
    github = run("report", path, "--format", "github")
    for alert in vector["alerts"]:
        assert f"- {alert['severity'].upper()} {alert['code']}: {alert['message']}\n" in github


def test_report_without_baseline_ready_raises_no_alerts(tmp_path: Path, reference_catalog: None) -> None:
    vector = _entry("alerts", "dev-alerts")
    document = _pool_input(vector["input"]["current"])
    document["history"] = [_pool(pool_id) for pool_id in vector["input"]["history"]]
    assert json.loads(run("report", write(tmp_path, "input.json", document)))["alerts"] == []


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "the input must be a JSON object"),
        ({"results": {}, "bundle": {"id": "b"}}, "results must be a list"),
        ({"results": [], "bundle": {"id": "b"}, "baselineReady": "yes"}, "baselineReady must be true or false"),
        ({"results": [], "bundle": {"id": "b"}, "source": "nightly"}, "report source must be one of deterministic, live, chaos"),
        ({"results": [{"scenarioId": "x"}], "bundle": {"id": "b"}}, "results item 1 must be an object with scenarioId"),
        ({"results": [], "bundle": {}}, "bundle must be an object with a text id"),
        ({"results": [], "bundle": {"id": "b"}, "generatedAt": 5}, "generatedAt must be an ISO 8601 timestamp string"),
        ({"results": [], "bundle": {"id": "b"}, "traceability": "x"}, "traceability must be an object"),
        (
            {"results": [{"scenarioId": "x", "observation": {"classification": "nope"}}], "bundle": {"id": "b"}},
            "results item 1 has an invalid observation",
        ),
        ({"results": [], "bundle": {"id": "b"}, "history": [{"x": 1}]}, "history[0] is not a report"),
    ],
)
def test_report_refuses_bad_input_without_a_traceback(tmp_path: Path, reference_catalog: None, document: Any, message: str) -> None:
    _, error = run_failing("report", write(tmp_path, "input.json", document))
    assert message in error


def test_report_refuses_an_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="invalid choice: 'html'"):
        call_command("report", write(tmp_path, "input.json", {}), "--format", "html", stdout=io.StringIO())


# --- prune_history, refresh_run and the pruning task ---------------------------------------------------------


def _finished_run(reference_catalog: None) -> Any:
    import datetime as dt
    from decimal import Decimal

    from runs.creation import create_run
    from runs.dispatch import execute_run
    from schedules.services import Selection, schedule_for_night

    schedule, _ = schedule_for_night(
        seed="runner-live-seven-week-v1", now=dt.datetime(2026, 8, 19, 4, tzinfo=dt.UTC), generated_at="2026-08-19T04:00:00.000Z"
    )
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=Selection(candidate_ids=("codex-luna",), limit=2))
    execute_run(run, environ={})
    return run


def test_prune_history_command_and_task_use_the_retention_setting(reference_catalog: None, settings: Any) -> None:
    import datetime as dt

    from django.utils import timezone

    from runs.models import Run
    from runs.tasks import prune_history

    settings.EVALHUB = {**settings.EVALHUB, "RETENTION_DAYS": 30}
    finished = _finished_run(reference_catalog)
    Run.objects.filter(pk=finished.pk).update(created_at=timezone.now() - dt.timedelta(days=40))
    assert prune_history() == "pruned 0 run(s) older than 30 days"  # the last seven reports of a bundle stay
    assert run_command("prune_history", "--days", "10") == "pruned 0 run(s) older than 10 days\n"
    _, error = run_failing("prune_history", "--days", "0")
    assert error == "--days must be from 1 to 36500 (100 years), not 0"


def run_command(*args: str) -> str:
    return run(*args)


def test_refresh_run_command(reference_catalog: None) -> None:
    from runs.models import Run, RunLane

    original = _finished_run(reference_catalog)
    output = run_command("refresh_run", str(original.pk))
    refresh = Run.objects.get(lane=RunLane.REPLAY)
    assert output.startswith(f"run {refresh.pk} refreshes run {original.pk}: 0/0 scoreable passed (bundle runner-live-v2-")
    _, error = run_failing("refresh_run", str(refresh.pk))
    assert error.startswith(f"run {refresh.pk} is a refresh")
    _, error = run_failing("refresh_run", "999999")
    assert error == "there is no run 999999"


def test_report_rebuilds_from_its_own_export_and_says_so(tmp_path: Path, reference_catalog: None) -> None:
    """A run page's JSON download (``{report, alerts, comparison}``) fed back to ``report`` gives
    the same report; a note on stderr says it was re-built from the report's results."""
    vector = _entry("reports", "dev-live-report")
    exported = json.loads(run("report", write(tmp_path, "input.json", report_input(vector))))
    err = io.StringIO()
    out = io.StringIO()
    call_command("report", write(tmp_path, "export.json", exported), "--format", "markdown", stdout=out, stderr=err)
    assert out.getvalue() == vector["markdown"]
    assert "the input is a report (or its export): re-built from its" in err.getvalue()


def test_report_says_when_a_rendering_leaves_the_comparison_out(tmp_path: Path, reference_catalog: None) -> None:
    current = write(tmp_path, "current.json", _pool_input("dev-current"))
    previous = write(tmp_path, "previous.json", _pool("dev-previous"))
    for fmt in ("markdown", "junit"):
        err = io.StringIO()
        call_command("report", current, "--compare", previous, "--format", fmt, stdout=io.StringIO(), stderr=err)
        assert f"the {fmt} rendering carries no comparison (as the reference's): use --format github or json" in err.getvalue()
    err = io.StringIO()
    call_command("report", current, "--compare", previous, "--format", "github", stdout=io.StringIO(), stderr=err)
    assert "carries no comparison" not in err.getvalue()


def test_report_compare_with_a_report_input_says_to_build_its_report_first(tmp_path: Path, reference_catalog: None) -> None:
    current = write(tmp_path, "current.json", _pool_input("dev-current"))
    _, error = run_failing("report", current, "--compare", current)
    assert "is a report input (results without an aggregate), not a report: build its report first" in error


def test_report_and_score_never_print_a_secret_shaped_id(tmp_path: Path, reference_catalog: None) -> None:
    pasted = "sk-" + "proj-" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd"
    document = _pool_input("dev-current")
    document["bundle"] = {**document["bundle"], "id": pasted}
    output = run("report", write(tmp_path, "input.json", document))
    assert pasted not in output and "[REDACTED]" in output
    assert json.loads(output)["report"]["bundle"]["id"] == "[REDACTED]"
