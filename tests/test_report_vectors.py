"""Reports, comparisons, alerts, bundle identity and exports reproduce the reference vectors exactly.

Vectors come from ``scoring-vectors.json`` (outputs of the reference TypeScript modules); see its
``meta.layout`` for the shapes. Every entry of ``reports``, ``reportPool``, ``comparisons`` and
``alerts`` is checked; text renderings are compared byte for byte.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import pytest

from runs.evaluation.renderers import (
    render_github_summary,
    render_json,
    render_junit,
    render_markdown,
    render_previous_bundle_section,
)
from runs.evaluation.reports import (
    build_report,
    compare_reports,
    compute_alerts,
    live_bundle,
    live_bundle_identity,
    percentile_95,
)
from tests.reference import golden_vectors, reference_cases, scoring_vectors

pytestmark = pytest.mark.database_free


@cache
def _vectors() -> dict[str, Any]:
    return scoring_vectors()


def vectors() -> dict[str, Any]:
    return copy.deepcopy(_vectors())


def _ids(section: str) -> list[str]:
    return [entry["id"] for entry in _vectors()[section]]


def _entry(section: str, vector_id: str) -> dict[str, Any]:
    return next(entry for entry in vectors()[section] if entry["id"] == vector_id)


def _pool(pool_id: str) -> dict[str, Any]:
    return vectors()["reportPool"][pool_id]


def _results(result_ids: list[str]) -> list[dict[str, Any]]:
    """Matrix rows for the named observation vectors, as ``meta.layout.reports`` describes."""
    observations = {entry["id"]: entry for entry in vectors()["observations"]}
    rows = []
    for result_id in result_ids:
        vector = observations[result_id]
        rows.append(
            {
                "scenarioId": vector["observation"]["caseId"],
                "candidateId": vector["observation"]["candidateId"],
                "observation": vector["observation"],
                "scorecard": vector["scorecard"],
            }
        )
    return rows


def _report_from_vector(vector: dict[str, Any]) -> dict[str, Any]:
    given = vector["input"]
    constants = _vectors()["meta"]["coverageConstants"]
    return build_report(
        source=given["source"],
        bundle=given["bundle"],
        generated_at=given["generatedAt"],
        results=_results(given["resultIds"]),
        workflow_cases=reference_cases(),
        traceability=given.get("traceability"),
        capability_cases=constants["capabilityCases"],
    )


def _same_json(actual: Any, expected: Any) -> bool:
    return json.dumps(actual, ensure_ascii=False) == json.dumps(expected, ensure_ascii=False)


# -- reports -------------------------------------------------------------------------------------


@pytest.mark.parametrize("vector_id", _ids("reports"))
def test_report_matches_reference(vector_id: str) -> None:
    vector = _entry("reports", vector_id)
    report = _report_from_vector(vector)
    assert report == vector["report"]
    assert _same_json(report, vector["report"])


@pytest.mark.parametrize("vector_id", _ids("reports"))
def test_report_markdown_matches_reference(vector_id: str) -> None:
    vector = _entry("reports", vector_id)
    assert render_markdown(_report_from_vector(vector)) == vector["markdown"]
    assert render_markdown(vector["report"]) == vector["markdown"]


@pytest.mark.parametrize("vector_id", _ids("reports"))
def test_report_junit_matches_reference(vector_id: str) -> None:
    vector = _entry("reports", vector_id)
    assert render_junit(_report_from_vector(vector)) == vector["junit"]
    assert render_junit(vector["report"]) == vector["junit"]


@pytest.mark.parametrize("vector_id", _ids("reports"))
def test_report_github_summary_matches_reference(vector_id: str) -> None:
    vector = _entry("reports", vector_id)
    report = _report_from_vector(vector)
    if "githubSummary" in vector:
        assert render_github_summary(report) == vector["githubSummary"]
    else:
        # The vector pins no summary: the reference appends the alerts section to the Markdown.
        assert render_github_summary(report) == (vector["markdown"] + "\n## Alerts\n\nNo active workflow-eval regression alerts.\n")
    if "githubSummaryWithAlerts" in vector:
        summary = render_github_summary(report, vector["summaryAlerts"])
        assert summary == vector["githubSummaryWithAlerts"]


def test_report_coverage_operation_count_follows_the_catalog_given() -> None:
    vector = _entry("reports", _ids("reports")[0])
    constants = _vectors()["meta"]["coverageConstants"]
    report = _report_from_vector(vector)
    assert report["coverage"]["canonicalOperations"] == constants["canonicalOperations"]

    smaller = build_report(
        source="live",
        bundle=vector["input"]["bundle"],
        generated_at=vector["input"]["generatedAt"],
        results=[],
        workflow_cases=reference_cases(),
        operation_ids=["finish_task", "brand_new_operation"],
        capability_cases=120,
    )
    assert smaller["coverage"]["canonicalOperations"] == 2
    assert smaller["coverage"]["capabilityCases"] == 120
    assert [operation["workflowIds"] for operation in smaller["coverage"]["operations"]][1] == []


def test_report_without_results_has_null_means_and_zero_counts() -> None:
    report = build_report(
        source="chaos",
        bundle={"id": "b", "runnerVersion": "1", "promptPolicyId": "p", "providerVersions": {}},
        generated_at="2026-08-24T00:00:00.000Z",
        results=[],
        workflow_cases=reference_cases(),
    )
    assert report["aggregate"]["meanOverall"] is None
    assert set(report["aggregate"]["dimensionMeans"].values()) == {None}
    assert report["coverage"]["workflows"] == 0
    markdown = render_markdown(report)
    assert "- hard_invariants: not scored\n" in markdown
    assert render_junit(report).splitlines()[1] == ('<testsuite name="paperclip-runner-workflows" tests="0" failures="0" skipped="0">')


def test_report_with_traceability_adds_stress_counts_and_markdown_mentions_findings() -> None:
    vector = _entry("reports", _ids("reports")[0])
    given = vector["input"]
    report = build_report(
        source=given["source"],
        bundle=given["bundle"],
        generated_at=given["generatedAt"],
        results=_results(given["resultIds"]),
        workflow_cases=reference_cases(),
        traceability={"findings": 12, "exclusions": 3},
    )
    assert list(report["coverage"])[-2:] == ["stressFindings", "stressExclusions"]
    assert "· 8 workflows · 12 stress findings\n" in render_markdown(report)


def test_report_refuses_an_unknown_source() -> None:
    with pytest.raises(ValueError, match="report source must be one of deterministic, live, chaos"):
        build_report(
            source="nightly",
            bundle={"id": "b"},
            generated_at="2026-08-24T00:00:00.000Z",
            results=[],
            workflow_cases=[],
        )


@pytest.mark.parametrize("pool_id", list(_vectors()["reportPool"]))
def test_pool_report_rebuilds_from_its_own_results(pool_id: str) -> None:
    expected = _pool(pool_id)
    report = build_report(
        source=expected["source"],
        bundle=expected["bundle"],
        generated_at=expected["generatedAt"],
        results=expected["results"],
        workflow_cases=reference_cases(),
    )
    assert report == expected
    assert _same_json(report, expected)


@pytest.mark.parametrize("pool_id", list(_vectors()["reportPool"]))
def test_render_json_is_json_stringify_with_two_spaces(pool_id: str) -> None:
    report = _pool(pool_id)
    text = render_json(report)
    assert text == json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    assert json.loads(text) == report


def test_render_json_prints_numbers_and_keys_as_javascript_does() -> None:
    document = {"b": 1.0, "10": [], "2": {}, "a": [0.5, 1e-7, -0.0, None, True, "é"]}
    assert render_json(document) == (
        '{\n  "2": {},\n  "10": [],\n  "b": 1,\n  "a": [\n    0.5,\n    1e-7,\n    0,\n    null,\n    true,\n    "é"\n  ]\n}\n'
    )


# -- comparisons ---------------------------------------------------------------------------------


@pytest.mark.parametrize("vector_id", _ids("comparisons"))
def test_comparison_matches_reference(vector_id: str) -> None:
    vector = _entry("comparisons", vector_id)
    comparison = compare_reports(_pool(vector["input"]["current"]), _pool(vector["input"]["previous"]))
    assert comparison == vector["comparison"]
    assert _same_json(comparison, vector["comparison"])


def test_comparison_across_bundles_is_incompatible() -> None:
    current = _pool("dev-current")
    previous = copy.deepcopy(current)
    previous["bundle"]["id"] = "runner-live-v2-0000000000000000"
    assert compare_reports(current, previous) == {
        "compatible": False,
        "reason": "bundle ids differ; provider fixture, runner, or prompt-policy inputs changed",
        "currentBundleId": current["bundle"]["id"],
        "previousBundleId": "runner-live-v2-0000000000000000",
    }


def test_comparison_rounds_half_up_and_counts_nothing_scoreable_as_zero() -> None:
    def report(scoreable: int, passed: int, mean: float | None) -> dict[str, Any]:
        return {
            "bundle": {"id": "b"},
            "aggregate": {"scoreable": scoreable, "passed": passed, "meanOverall": mean},
        }

    comparison = compare_reports(report(16, 13, 0.8125), report(0, 0, None))
    assert comparison["passRateDelta"] == 0.813  # 13/16 = 0.8125, half up
    assert comparison["overallDelta"] == 0.813
    assert compare_reports(report(0, 0, None), report(16, 1, 0.0625))["passRateDelta"] == -0.062


def test_previous_bundle_section_matches_the_nightly_script() -> None:
    vector = _entry("comparisons", _ids("comparisons")[0])
    assert render_previous_bundle_section(vector["comparison"]) == (
        "\n## Previous compatible bundle\n\nPass-rate delta: 0.083; overall delta: -0.266.\n"
    )
    assert render_previous_bundle_section(None) == ("\n## Previous compatible bundle\n\nNo compatible prior bundle is available.\n")


# -- alerts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("vector_id", _ids("alerts"))
def test_alerts_match_reference(vector_id: str) -> None:
    vector = _entry("alerts", vector_id)
    given = vector["input"]
    alerts = compute_alerts(
        _pool(given["current"]),
        [_pool(pool_id) for pool_id in given["history"]],
        given["baselineReady"],
    )
    assert alerts == vector["alerts"]
    assert _same_json(alerts, vector["alerts"])


def test_alerts_wait_for_a_ready_baseline() -> None:
    vector = _entry("alerts", _ids("alerts")[0])
    history = [_pool(pool_id) for pool_id in vector["input"]["history"]]
    assert compute_alerts(_pool(vector["input"]["current"]), history, False) == []


def test_github_summary_lists_alerts_by_severity() -> None:
    vector = _entry("alerts", _ids("alerts")[0])
    current = _pool(vector["input"]["current"])
    summary = render_github_summary(current, vector["alerts"])
    assert summary.startswith(render_markdown(current) + "\n## Alerts\n\n")
    assert summary.endswith(
        "- CRITICAL safety_failure: 1 execution(s) failed a hard or lifecycle invariant\n"
        "- WARNING success_rate_regression: success rate dropped 33 percentage points\n"
        "- WARNING latency_regression: p95 settlement latency rose more than 25% "
        "(95000ms \u2192 130000ms)\n"
    )


def _alert_report(bundle_id: str, rows: list[tuple[str, bool | None, float, float]]) -> dict[str, Any]:
    """A minimal report: rows of (case, passed, settlementMs, costUsd) for candidate ``c``."""
    results = []
    for case_id, passed, settlement_ms, cost_usd in rows:
        dimension = {"passed": True if passed is None else passed}
        results.append(
            {
                "scenarioId": case_id,
                "candidateId": "c",
                "observation": {"metrics": {"settlementMs": settlement_ms, "costUsd": cost_usd}},
                "scorecard": {
                    "dimensions": {"hard_invariants": dimension, "lifecycle_integrity": dimension},
                    "overall": {"passed": passed, "score": None if passed is None else 1},
                },
            }
        )
    scoreable = [row for row in rows if row[1] is not None]
    return {
        "bundle": {"id": bundle_id},
        "results": results,
        "aggregate": {
            "scoreable": len(scoreable),
            "passed": sum(1 for row in scoreable if row[1]),
        },
    }


def test_consecutive_failures_fire_per_failed_row_after_two_failed_reports() -> None:
    history = [
        _alert_report("b", [("x", True, 10, 0.1)]),
        _alert_report("b", [("x", False, 10, 0.1)]),
        _alert_report("other", [("x", True, 10, 0.1)]),  # another bundle does not break the run
        _alert_report("b", [("x", False, 10, 0.1)]),
    ]
    current = _alert_report("b", [("x", False, 10, 0.1), ("x", False, 10, 0.1), ("y", False, 10, 0.1)])
    codes = [(alert["code"], alert["message"]) for alert in compute_alerts(current, history, True)]
    assert codes.count(("consecutive_failures", "x/c failed three consecutive reports")) == 2
    assert ("consecutive_failures", "y/c failed three consecutive reports") not in codes


def test_cost_regression_prints_dollars_as_javascript_numbers() -> None:
    history = [_alert_report("b", [("x", True, 10, 0.1)]) for _ in range(7)]
    current = _alert_report("b", [("x", True, 10, 0.30000000000000004)])
    assert compute_alerts(current, history, True) == [
        {
            "severity": "warning",
            "code": "cost_regression",
            "message": "p95 cost rose more than 25% ($0.1 \u2192 $0.30000000000000004)",
        }
    ]


def test_cost_regression_needs_a_baseline_cost_above_zero() -> None:
    history = [_alert_report("b", [("x", True, 10, 0)]) for _ in range(7)]
    current = _alert_report("b", [("x", True, 10, 5)])
    assert compute_alerts(current, history, True) == []


def test_success_rate_drop_rounds_half_up() -> None:
    # baseline 1.0, current 3/8 = 0.375: a 62.5-point drop prints as 63 (Math.round).
    history = [_alert_report("b", [("x", True, 10, 0.1)])]
    current = _alert_report("b", [(f"x{i}", i < 3, 10, 0.1) for i in range(8)])
    messages = [alert["message"] for alert in compute_alerts(current, history, True)]
    assert "success rate dropped 63 percentage points" in messages


def test_p95_is_nearest_rank() -> None:
    assert percentile_95([]) is None
    assert percentile_95([3]) == 3
    assert percentile_95(list(range(1, 21))) == 19  # ceil(19.0) - 1 = index 18
    assert percentile_95(list(range(1, 22))) == 20  # ceil(19.95) - 1 = index 19
    assert percentile_95([5, 1, 3]) == 5


# -- bundle identity -----------------------------------------------------------------------------


def _reference_schedule(seed: str, rotation_day: int) -> dict[str, Any]:
    for vector in golden_vectors()["schedules"]:
        schedule = vector.get("schedule") or vector["output"]
        if schedule["seed"] == seed and schedule["rotationDay"] == rotation_day:
            return schedule
    raise LookupError(f"no golden schedule for {seed} day {rotation_day}")


def test_live_bundle_matches_the_reference_report_bundle() -> None:
    expected = _entry("reports", "dev-live-report")["input"]["bundle"]
    schedule = _reference_schedule(expected["scheduleSeed"], 0)
    bundle = live_bundle(
        runner_version=expected["runnerVersion"],
        seed=schedule["seed"],
        candidates=schedule["candidates"],
    )
    assert bundle == expected
    assert list(bundle) == list(expected)


def test_alternating_line_ups_alternate_bundle_ids() -> None:
    def identity(day: int) -> str:
        schedule = _reference_schedule("runner-live-seven-week-v1", day)
        return live_bundle_identity(runner_version="0.8.4", seed=schedule["seed"], candidates=schedule["candidates"])

    assert identity(0) == identity(2) == "runner-live-v2-ede6023f7ccf4a1f"
    assert identity(1) != identity(0)


def test_a_selection_never_shares_the_full_run_bundle_id() -> None:
    schedule = _reference_schedule("runner-live-seven-week-v1", 0)
    arguments = {
        "runner_version": "0.8.4",
        "seed": schedule["seed"],
        "candidates": schedule["candidates"],
    }
    full = live_bundle_identity(**arguments)
    every_entry = [entry["executionId"] for entry in schedule["entries"]]
    assert live_bundle_identity(**arguments, selected_execution_ids=every_entry) != full
    assert live_bundle_identity(**arguments, runner_build="0.8.4") == full
    assert live_bundle_identity(**arguments, runner_build="ci-123") != full


def test_bundle_identity_drops_a_missing_or_null_reasoning_effort() -> None:
    base = {"id": "c", "adapter": "opencode_server", "model": "m"}
    without = live_bundle_identity(runner_version="1", seed="s", candidates=[base])
    assert live_bundle_identity(runner_version="1", seed="s", candidates=[{**base, "reasoningEffort": None}]) == without
    assert live_bundle_identity(runner_version="1", seed="s", candidates=[{**base, "reasoningEffort": "low"}]) != without


def test_alerts_use_only_the_last_seven_compatible_reports() -> None:
    slow_and_old = _alert_report("b", [("x", True, 1000, 0.1)])
    history = [slow_and_old] + [_alert_report("b", [("x", True, 10, 0.1)]) for _ in range(7)]
    current = _alert_report("b", [("x", True, 20, 0.1)])
    assert compute_alerts(current, history, True) == [
        {
            "severity": "warning",
            "code": "latency_regression",
            "message": "p95 settlement latency rose more than 25% (10ms \u2192 20ms)",
        }
    ]


def test_render_json_escapes_lone_surrogates_like_json_stringify() -> None:
    text = render_json({"trace": "a\ud800b\n"})
    assert text == '{\n  "trace": "a\\ud800b\\n"\n}\n'
    text.encode("utf-8")


def test_a_success_rate_drop_of_exactly_twenty_points_alerts_and_less_does_not() -> None:
    # Baseline 1/5 = 0.2 and current 0/1: the drop is exactly 0.20 in doubles (the reference's >=).
    history = [_alert_report("b", [(f"x{i}", i == 0, 10, 0.1) for i in range(5)])]
    at_the_boundary = _alert_report("b", [("x0", False, 10, 0.1)])
    assert [alert for alert in compute_alerts(at_the_boundary, history, True) if alert["code"] == "success_rate_regression"] == [
        {"severity": "warning", "code": "success_rate_regression", "message": "success rate dropped 20 percentage points"}
    ]
    # Baseline 2/10 and current 1/100: a 19-point drop.
    history = [_alert_report("b", [(f"x{i}", i < 2, 10, 0.1) for i in range(10)])]
    below = _alert_report("b", [(f"x{i}", i == 0, 10, 0.1) for i in range(100)])
    assert "success_rate_regression" not in [alert["code"] for alert in compute_alerts(below, history, True)]


def test_consecutive_failures_need_exactly_two_compatible_failed_reports() -> None:
    current = _alert_report("b", [("x", False, 10, 0.1)])
    two = [_alert_report("b", [("x", False, 10, 0.1)]), _alert_report("b", [("x", False, 10, 0.1)])]
    assert ("consecutive_failures", "x/c failed three consecutive reports") in [
        (alert["code"], alert["message"]) for alert in compute_alerts(current, two, True)
    ]
    one = two[:1]
    assert "consecutive_failures" not in [alert["code"] for alert in compute_alerts(current, one, True)]
