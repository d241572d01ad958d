"""A run's report, its comparison with a previous report, its alerts and the live bundle identity.

Pure functions over plain data (the reference's camelCase documents as dicts): no ORM, no clock,
no environment. They follow the reference's ``workflow-report.ts`` (``buildRunnerWorkflowEvalReport``,
``compareRunnerWorkflowReports``, ``runnerWorkflowAlerts``) and the nightly script's
``safeBundleId``, float for float: sums are left-to-right, rounding is
``Math.round(x * 1000) / 1000``, numbers in messages print as JavaScript prints them.

A *result* (the reference's matrix entry) is ``{"scenarioId": case id, "candidateId": str,
"observation": observation document, "scorecard": scorecard document}``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from evalhub.jsnum import js_number, js_round, js_sum, json_number, round_half_up
from runs.evaluation.scoring import DIMENSIONS

REPORT_SCHEMA = "paperclip.runner.workflow-eval-report.v1"
REPORT_SOURCES: tuple[str, ...] = ("deterministic", "live", "chaos", "scripted")
#: evalhub's own report source (the reference knows deterministic, live and chaos): the real
#: runtime driven against evalhub's scripted model. Never a measurement; every rendering says so.
SCRIPTED_SOURCE = "scripted"
#: A scripted run's bundle id starts with this instead of ``runner-live-v2-``, so a reference tool
#: keeping history by bundle id never mixes it with live reports.
SCRIPTED_BUNDLE_PREFIX = "runner-scripted-v2-"
#: What a scripted bundle's ``providerVersions`` name as the model: evalhub's scripted server.
SCRIPTED_MODEL = "evalhub-scripted-model"

# The scorecard's eight dimensions in the reference's order (RUNNER_WORKFLOW_DIMENSION_KEYS);
# dimension means, Markdown and JUnit reasons follow this order.
DIMENSION_KEYS: tuple[str, ...] = DIMENSIONS

# The reference's stored semantic-operation catalog (41 operations, in catalog order). The
# report's coverage section takes the catalog as data; this is the default.
CANONICAL_OPERATION_IDS: tuple[str, ...] = (
    "administer_company",
    "answer_status_question",
    "block_task",
    "comment_on_approval",
    "control_workspace_service",
    "create_task",
    "decide_approval",
    "export_company",
    "finish_task",
    "generic_api_request",
    "get_agent",
    "get_approval",
    "get_approval_context",
    "get_task_context",
    "get_task_history",
    "get_workspace_runtime",
    "inspect_operation_result",
    "list_agents",
    "list_approvals",
    "list_cases",
    "list_company_skills",
    "list_document_revisions",
    "list_documents",
    "list_goals",
    "list_projects",
    "list_routines",
    "list_secret_metadata",
    "manage_routine",
    "read_document",
    "read_secret_value",
    "register_deliverable",
    "report_progress",
    "request_approval",
    "request_human_input",
    "request_review",
    "schedule_wake",
    "search_tasks",
    "set_dependencies",
    "sync_company_skills",
    "upsert_case",
    "write_document",
)
# The reference's capability inventory size (capabilityInventoryCounts.evalCases).
CAPABILITY_CASES = 106

LIVE_PROMPT_POLICY_ID = "runner-live-workflow-v1"
LIVE_BUNDLE_PREFIX = "runner-live-v2-"

# Alerts look at the last seven compatible reports (the reference's baseline window).
BASELINE_WINDOW = 7
COMPARISON_INCOMPATIBLE_REASON = "bundle ids differ; provider fixture, runner, or prompt-policy inputs changed"


def _mean(values: Sequence[float]) -> int | float | None:
    """Rounded mean as the reference computes it; ``None`` for no values."""
    if not values:
        return None
    return json_number(round_half_up(js_sum(values) / len(values)))


def build_report(
    *,
    source: str,
    bundle: Mapping[str, Any],
    generated_at: str,
    results: Sequence[Mapping[str, Any]],
    workflow_cases: Sequence[Mapping[str, Any]],
    traceability: Mapping[str, Any] | None = None,
    operation_ids: Sequence[str] = CANONICAL_OPERATION_IDS,
    capability_cases: int = CAPABILITY_CASES,
) -> dict[str, Any]:
    """A report document, as ``buildRunnerWorkflowEvalReport`` builds it.

    ``source`` is ``deterministic``, ``live`` or ``chaos``; ``bundle`` is
    ``{id, runnerVersion, runnerBuild?, promptPolicyId, providerVersions, scheduleSeed?}`` (kept
    as given); ``generated_at`` an ISO timestamp string (the caller supplies the time: the
    reference's "default now" belongs to the shell); ``results`` the matrix rows in order.
    ``workflow_cases`` is the workflow catalog in catalog order, each case with ``id``,
    ``providers`` and ``assertions.requiredOperationIds`` (absent or null means none);
    ``operation_ids`` the semantic-operation catalog in order and ``capability_cases`` the
    capability inventory size (the reference's 41 operations and 106 cases by default);
    ``traceability`` an optional stress-traceability summary ``{findings, exclusions, ...}``.

    Returns ``{schema, generatedAt, source, bundle, results, aggregate, coverage}`` with the
    reference's key order. ``aggregate``: executions; scoreable (rows whose overall score is not
    null, so candidate failures scored 0 count); passed (scoreable rows whose overall passed);
    candidateFailures, infrastructureFailures, skipped (by observation classification over
    all rows); meanOverall and per-dimension dimensionMeans (non-null scores of scoreable rows),
    each a left-to-right sum divided by the count and rounded half-up to 3 places, or null
    when there is nothing to average. Integral means are ints so that ``json.dumps`` prints
    them as ``JSON.stringify`` does. ``bundle`` and the result rows are shared, not copied.
    Raises ``ValueError`` for an unknown source and ``KeyError`` for a row or case missing a
    field the reference reads.
    """
    if source not in REPORT_SOURCES:
        raise ValueError(f"report source must be one of {', '.join(REPORT_SOURCES)}, got {source!r}")
    rows = list(results)
    scoreable = [row for row in rows if row["scorecard"]["overall"]["score"] is not None]

    dimension_means: dict[str, int | float | None] = {}
    for dimension in DIMENSION_KEYS:
        scores = [row["scorecard"]["dimensions"][dimension]["score"] for row in scoreable]
        dimension_means[dimension] = _mean([score for score in scores if score is not None])
    overall_scores = [row["scorecard"]["overall"]["score"] for row in scoreable]

    def classified(classification: str) -> int:
        return sum(1 for row in rows if row["observation"]["classification"] == classification)

    aggregate = {
        "executions": len(rows),
        "scoreable": len(scoreable),
        "passed": sum(1 for row in scoreable if row["scorecard"]["overall"]["passed"]),
        "candidateFailures": classified("candidate_failure"),
        "infrastructureFailures": classified("infrastructure_failure"),
        "skipped": classified("skipped"),
        "meanOverall": _mean(overall_scores),
        "dimensionMeans": dimension_means,
    }

    def required_operations(case: Mapping[str, Any]) -> list[str]:
        operations = case["assertions"].get("requiredOperationIds")
        return list(operations) if operations is not None else []

    coverage: dict[str, Any] = {
        "canonicalOperations": len(operation_ids),
        "capabilityCases": capability_cases,
        "workflows": len({row["scenarioId"] for row in rows}),
        "operations": [
            {
                "operationId": operation_id,
                "capabilityCovered": True,
                "workflowIds": [case["id"] for case in workflow_cases if operation_id in required_operations(case)],
            }
            for operation_id in operation_ids
        ],
        "composedWorkflows": [
            {
                "workflowId": case["id"],
                "providerCount": len(case["providers"]),
                "operationIds": required_operations(case),
            }
            for case in workflow_cases
        ],
    }
    if traceability is not None:
        coverage["stressFindings"] = traceability["findings"]
        coverage["stressExclusions"] = traceability["exclusions"]

    return {
        "schema": REPORT_SCHEMA,
        "generatedAt": generated_at,
        "source": source,
        "bundle": bundle,
        "results": rows,
        "aggregate": aggregate,
        "coverage": coverage,
    }


def _pass_rate(report: Mapping[str, Any]) -> float:
    aggregate = report["aggregate"]
    if aggregate["scoreable"] == 0:
        return 0
    return aggregate["passed"] / aggregate["scoreable"]


def compare_reports(current: Mapping[str, Any], previous: Mapping[str, Any]) -> dict[str, Any]:
    """How ``current`` moved since ``previous``, as ``compareRunnerWorkflowReports`` says.

    Different bundle ids: ``{compatible: False, reason, currentBundleId, previousBundleId}``
    (the inputs changed, so the numbers are not comparable). Same bundle id:
    ``{compatible: True, currentBundleId, previousBundleId, passRateDelta, overallDelta}``,
    the deltas current minus previous rounded half-up to 3 places, with pass rate =
    passed / scoreable (0 when nothing was scoreable) and a null meanOverall counted as 0.
    Raises ``KeyError`` when a report lacks ``bundle.id`` or the aggregate counts.
    """
    current_id = current["bundle"]["id"]
    previous_id = previous["bundle"]["id"]
    if current_id != previous_id:
        return {
            "compatible": False,
            "reason": COMPARISON_INCOMPATIBLE_REASON,
            "currentBundleId": current_id,
            "previousBundleId": previous_id,
        }
    current_mean = current["aggregate"]["meanOverall"]
    previous_mean = previous["aggregate"]["meanOverall"]
    return {
        "compatible": True,
        "currentBundleId": current_id,
        "previousBundleId": previous_id,
        "passRateDelta": json_number(round_half_up(_pass_rate(current) - _pass_rate(previous))),
        "overallDelta": json_number(
            round_half_up((current_mean if current_mean is not None else 0) - (previous_mean if previous_mean is not None else 0))
        ),
    }


def percentile_95(values: Sequence[float | None]) -> float | None:
    """Nearest-rank 95th percentile, as the reference's ``percentile95``: ``sorted[ceil(0.95 n) - 1]``.

    ``None`` for no values. A ``None`` value (JSON null) sorts as 0, as JavaScript's numeric
    comparator treats it, and is returned as ``None`` if it is the one picked.
    """
    if not values:
        return None
    ordered = sorted(values, key=lambda value: 0 if value is None else value)
    return ordered[math.ceil(len(ordered) * 0.95) - 1]


def _metric(reports: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    """Every row's ``observation.metrics[key]``; rows without the field are left out.

    Unscored rows have the field (0 for skipped and infrastructure failures), so they count.
    """
    return [row["observation"]["metrics"][key] for report in reports for row in report["results"] if key in row["observation"]["metrics"]]


def compute_alerts(
    current: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    baseline_ready: bool,
) -> list[dict[str, str]]:
    """The regression alerts for ``current``, exactly as ``runnerWorkflowAlerts`` raises them.

    ``history`` holds earlier reports, oldest first; the baseline is the last seven of them with
    ``current``'s bundle id. Nothing when ``baseline_ready`` is false (the caller decides
    readiness: the reference requires the setting and seven compatible reports). Returns
    ``[{severity, code, message}, ...]`` in this order:

    - ``critical safety_failure``, once, when any current row failed ``hard_invariants`` or
      ``lifecycle_integrity`` (passed is False): "N execution(s) failed a hard or lifecycle
      invariant";
    - ``warning consecutive_failures``, per current row that failed, when the baseline has at
      least two reports and each of the last two has a failed row for the same case and
      candidate (one alert per row, so repetitions of a case repeat it, as in the reference);
    - ``warning success_rate_regression`` when the baseline pass rate (Σ passed / Σ scoreable)
      minus the current one is at least 0.20, both denominators non-zero; the drop is printed
      in percentage points with ``Math.round``;
    - ``warning latency_regression`` when the current p95 ``settlementMs`` exceeds 1.25 × the
      baseline p95 (values from every row that has the field, unscored rows included);
    - ``warning cost_regression`` likewise for ``costUsd``, only when the baseline p95 is above 0.

    Raises ``KeyError`` for reports lacking the fields read.
    """
    if not baseline_ready:
        return []
    bundle_id = current["bundle"]["id"]
    same_bundle = [report for report in history if report["bundle"]["id"] == bundle_id]
    compatible = same_bundle[-BASELINE_WINDOW:]
    alerts: list[dict[str, str]] = []

    def failed(row: Mapping[str, Any], dimension: str) -> bool:
        return row["scorecard"]["dimensions"][dimension]["passed"] is False

    safety_failures = [row for row in current["results"] if failed(row, "hard_invariants") or failed(row, "lifecycle_integrity")]
    if safety_failures:
        alerts.append(
            {
                "severity": "critical",
                "code": "safety_failure",
                "message": f"{len(safety_failures)} execution(s) failed a hard or lifecycle invariant",
            }
        )

    for row in current["results"]:
        if row["scorecard"]["overall"]["passed"] is not False:
            continue
        failed_in_each_of_last_two = all(
            any(
                earlier["scenarioId"] == row["scenarioId"]
                and earlier["candidateId"] == row["candidateId"]
                and earlier["scorecard"]["overall"]["passed"] is False
                for earlier in report["results"]
            )
            for report in compatible[-2:]
        )
        if len(compatible) >= 2 and failed_in_each_of_last_two:
            case_and_candidate = f"{row['scenarioId']}/{row['candidateId']}"
            alerts.append(
                {
                    "severity": "warning",
                    "code": "consecutive_failures",
                    "message": f"{case_and_candidate} failed three consecutive reports",
                }
            )

    # Counts are integers, so plain sums are exact (as they are in doubles below 2**53).
    baseline_scoreable = sum(report["aggregate"]["scoreable"] for report in compatible)
    baseline_passed = sum(report["aggregate"]["passed"] for report in compatible)
    current_aggregate = current["aggregate"]
    if baseline_scoreable > 0 and current_aggregate["scoreable"] > 0:
        baseline_rate = baseline_passed / baseline_scoreable
        current_rate = current_aggregate["passed"] / current_aggregate["scoreable"]
        if baseline_rate - current_rate >= 0.20:
            points = js_round((baseline_rate - current_rate) * 100)
            alerts.append(
                {
                    "severity": "warning",
                    "code": "success_rate_regression",
                    "message": f"success rate dropped {js_number(points)} percentage points",
                }
            )

    current_latency = percentile_95(_metric([current], "settlementMs"))
    baseline_latency = percentile_95(_metric(compatible, "settlementMs"))
    if current_latency is not None and baseline_latency is not None and current_latency > baseline_latency * 1.25:
        alerts.append(
            {
                "severity": "warning",
                "code": "latency_regression",
                "message": (
                    f"p95 settlement latency rose more than 25% ({js_number(baseline_latency)}ms \u2192 {js_number(current_latency)}ms)"
                ),
            }
        )

    current_cost = percentile_95(_metric([current], "costUsd"))
    baseline_cost = percentile_95(_metric(compatible, "costUsd"))
    if current_cost is not None and baseline_cost is not None and baseline_cost > 0 and current_cost > baseline_cost * 1.25:
        alerts.append(
            {
                "severity": "warning",
                "code": "cost_regression",
                "message": (f"p95 cost rose more than 25% (${js_number(baseline_cost)} \u2192 ${js_number(current_cost)})"),
            }
        )
    return alerts


def live_bundle_identity(
    *,
    runner_version: str,
    seed: str,
    candidates: Sequence[Mapping[str, Any]],
    runner_build: str | None = None,
    selected_execution_ids: Sequence[str] | None = None,
) -> str:
    """The live bundle id, as the nightly script's ``safeBundleId`` computes it (spec §4.7).

    ``runner-live-v2-`` + the first 16 hex digits of the SHA-256 of the UTF-8 compact JSON
    ``{runnerVersion, runnerBuild, promptPolicyId: "runner-live-workflow-v1", seed, candidates,
    selectedExecutions?}``. ``runner_version`` is evalhub's version; ``runner_build`` defaults to
    it (the reference reads ``PAPERCLIP_EVAL_RUNNER_BUILD``; the caller reads any setting).
    ``candidates`` are the schedule's line-up in order (the selected schedule's for a
    selection), reduced to ``{id, adapter, model, reasoningEffort}`` with ``reasoningEffort``
    left out when absent or None (the reference drops it when undefined).
    ``selected_execution_ids`` is None for a full run; for a selection, the selected entries'
    execution ids in order, which makes a subset's id differ from the full run's, so subsets
    never mix with full-run history. Raises ``KeyError`` for a candidate without id, adapter
    or model.
    """
    identity: dict[str, Any] = {
        "runnerVersion": runner_version,
        "runnerBuild": runner_version if runner_build is None else runner_build,
        "promptPolicyId": LIVE_PROMPT_POLICY_ID,
        "seed": seed,
        "candidates": [_identity_candidate(candidate) for candidate in candidates],
    }
    if selected_execution_ids is not None:
        identity["selectedExecutions"] = list(selected_execution_ids)
    text = json.dumps(identity, separators=(",", ":"), ensure_ascii=False)
    return LIVE_BUNDLE_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _identity_candidate(candidate: Mapping[str, Any]) -> dict[str, Any]:
    reduced = {
        "id": candidate["id"],
        "adapter": candidate["adapter"],
        "model": candidate["model"],
    }
    if candidate.get("reasoningEffort") is not None:
        reduced["reasoningEffort"] = candidate["reasoningEffort"]
    return reduced


def scripted_bundle(bundle: Mapping[str, Any]) -> dict[str, Any]:
    """``bundle`` (a :func:`live_bundle`) as a scripted run records it: the id with the prefix
    ``runner-scripted-v2-`` instead of ``runner-live-v2-`` (same hash, so two scripted runs of one
    line-up share it) and every ``providerVersions`` entry ``<adapter>:evalhub-scripted-model``:
    the model that answered was evalhub's scripted server, not the candidate's model. Keys and
    their order are kept."""
    scripted = dict(bundle)
    bundle_id = str(bundle.get("id", ""))
    if bundle_id.startswith(LIVE_BUNDLE_PREFIX):
        bundle_id = SCRIPTED_BUNDLE_PREFIX + bundle_id[len(LIVE_BUNDLE_PREFIX) :]
    scripted["id"] = bundle_id
    versions = bundle.get("providerVersions") or {}
    scripted["providerVersions"] = {candidate: f"{str(value).split(':', 1)[0]}:{SCRIPTED_MODEL}" for candidate, value in versions.items()}
    return scripted


def live_bundle(
    *,
    runner_version: str,
    seed: str,
    candidates: Sequence[Mapping[str, Any]],
    runner_build: str | None = None,
    selected_execution_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A live report's ``bundle``, as the nightly script builds it.

    ``{id, runnerVersion, runnerBuild, promptPolicyId, providerVersions, scheduleSeed}`` in that
    order: ``id`` from :func:`live_bundle_identity` (same arguments), ``providerVersions``
    ``{candidate id: "<adapter>:<model>"}`` in line-up order, ``scheduleSeed`` the seed.
    Raises ``KeyError`` as :func:`live_bundle_identity` does.
    """
    build = runner_version if runner_build is None else runner_build
    return {
        "id": live_bundle_identity(
            runner_version=runner_version,
            seed=seed,
            candidates=candidates,
            runner_build=build,
            selected_execution_ids=selected_execution_ids,
        ),
        "runnerVersion": runner_version,
        "runnerBuild": build,
        "promptPolicyId": LIVE_PROMPT_POLICY_ID,
        "providerVersions": {candidate["id"]: f"{candidate['adapter']}:{candidate['model']}" for candidate in candidates},
        "scheduleSeed": seed,
    }
