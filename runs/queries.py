"""Read-side queries for the run pages: each page's rows in a fixed number of queries.

The counts per classification are annotated on the run rows (one query for a whole page of
runs), so the history page costs the same with 3 runs or 3,000.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Case, Count, OuterRef, Q, QuerySet, Subquery, Value, When

from runs.models import Alert, AlertSeverity, Attempt, Classification, Execution, Report, Run, RunLane, Scorecard, TraceArtifact
from runs.reports import DIMENSION_KEYS

ENVIRONMENT_MISSING = "qualification_environment_missing"
CEILING_REACHED = "campaign_cost_ceiling_reached"


def _count(**lookup: str) -> Count:
    return Count("executions", filter=Q(**{f"executions__{name}": value for name, value in lookup.items()}))


def run_history() -> QuerySet[Run]:
    """Runs, newest first, with their schedule and counts per classification annotated:
    ``execution_count``, ``completed_count``, ``candidate_failure_count``,
    ``infrastructure_failure_count``, ``skipped_count`` and ``environment_missing_count``."""
    return (
        Run.objects.select_related("schedule")
        .annotate(
            execution_count=Count("executions"),
            completed_count=_count(classification=Classification.COMPLETED),
            candidate_failure_count=_count(classification=Classification.CANDIDATE_FAILURE),
            infrastructure_failure_count=_count(classification=Classification.INFRASTRUCTURE_FAILURE),
            skipped_count=_count(classification=Classification.SKIPPED),
            environment_missing_count=_count(failure_code=ENVIRONMENT_MISSING),
        )
        .order_by("-created_at", "-id")
    )


def run_page() -> QuerySet[Run]:
    """Runs with their schedule, report (and the report it was compared with) and, for a
    refresh, the refreshed run loaded in the same query (look one up by pk)."""
    return Run.objects.select_related("schedule", "report", "report__previous", "refresh_of")


def run_executions(run: Run) -> list[Execution]:
    """The run's executions in schedule order with their scorecards, each with
    ``attempt_count`` annotated (one query)."""
    return list(
        run.executions.select_related("scorecard").annotate(attempt_count=Count("attempts")).order_by("position", "id")
    )


def report_of(run: Run) -> Report | None:
    """The run's report, or None while it has none (no query when loaded by :func:`run_page`)."""
    try:
        return run.report
    except ObjectDoesNotExist:
        return None


def scorecard_of(execution: Execution) -> Scorecard | None:
    """The execution's scorecard, or None (no query when loaded by :func:`run_executions`)."""
    try:
        return execution.scorecard
    except ObjectDoesNotExist:
        return None


_CRITICAL_FIRST = Case(When(severity=AlertSeverity.CRITICAL, then=Value(0)), default=Value(1))


@dataclass(frozen=True)
class DimensionMean:
    key: str
    label: str
    mean: float | None  # None: no scoreable execution, shown as "not scored"


@dataclass(frozen=True)
class RunReport:
    """What the run page shows of a run's report: the reference aggregate, the dimension means in
    scoring order, its alerts (critical first) and the comparison with the previous report."""

    report: Report
    aggregate: dict[str, Any]
    dimension_means: list[DimensionMean]
    alerts: list[Alert]
    comparison: dict[str, Any] | None
    previous_run_id: int | None

    @property
    def pass_rate(self) -> float | None:
        scoreable = self.aggregate.get("scoreable") or 0
        return (self.aggregate.get("passed") or 0) / scoreable if scoreable else None


def run_report(run: Run) -> RunReport | None:
    """The run's report for its page (one query, for the alerts), or None when it has none."""
    report = report_of(run)
    if report is None:
        return None
    aggregate = dict(report.document.get("aggregate") or {})
    means = aggregate.get("dimensionMeans") or {}
    keys = [key for key in DIMENSION_KEYS if key in means] + [key for key in means if key not in DIMENSION_KEYS]
    alerts = list(report.alerts.order_by(_CRITICAL_FIRST, "id"))
    previous = report.previous
    return RunReport(
        report=report,
        aggregate=aggregate,
        dimension_means=[DimensionMean(key, key.replace("_", " "), means[key]) for key in keys],
        alerts=alerts,
        comparison=report.comparison,
        previous_run_id=previous.run_id if previous is not None else None,
    )


# --- compare two runs ----------------------------------------------------------------------------

#: Scores are rounded to 3 places; a smaller difference is noise, not a change.
SCORE_EPSILON = 0.0005


@dataclass(frozen=True)
class Side:
    """One execution as the compare page shows it."""

    classification: str
    passed: bool | None
    score: float | None

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed is True else "FAIL" if self.passed is False else "not scored"


@dataclass(frozen=True)
class CompareRow:
    case_key: str
    candidate_key: str
    repetition: int
    before: Side | None  # run A
    after: Side | None  # run B
    change: str  # "regression", "improvement" or ""
    reason: str


@dataclass(frozen=True)
class RunComparison:
    """Run A (before) and run B (after) side by side per case, candidate and repetition."""

    before: Run
    after: Run
    rows: list[CompareRow]
    comparable: bool
    note: str
    regressions: int = field(default=0)
    improvements: int = field(default=0)


def compare_change(before: Side | None, after: Side | None) -> tuple[str, str]:
    """``("regression" | "improvement" | "", reason)``: a verdict that flips decides; otherwise a
    score that moves by more than rounding noise. An execution missing or unscored on one side
    is no change (an infrastructure failure says nothing about the candidate)."""
    if before is None or after is None:
        return "", ""
    if before.passed is True and after.passed is False:
        return "regression", "passed → failed"
    if before.passed is False and after.passed is True:
        return "improvement", "failed → passed"
    if before.score is not None and after.score is not None:
        delta = after.score - before.score
        if delta < -SCORE_EPSILON:
            return "regression", "score dropped"
        if delta > SCORE_EPSILON:
            return "improvement", "score rose"
    return "", ""


def compare_runs(before: Run, after: Run) -> RunComparison:
    """Both runs' executions with their scorecards in one query. ``before`` and ``after`` must
    come from :func:`compare_page_runs` (their reports loaded)."""
    sides: dict[int, dict[tuple[str, str, int], tuple[int, Side]]] = {before.pk: {}, after.pk: {}}
    executions = (
        Execution.objects.filter(run__in=[before.pk, after.pk])
        .select_related("scorecard")
        .order_by("run_id", "position", "id")
    )
    for execution in executions:
        card = scorecard_of(execution)
        side = Side(
            execution.classification or execution.status,
            card.passed if card is not None else None,
            card.overall_score if card is not None else None,
        )
        sides[execution.run_id].setdefault(
            (execution.case_key, execution.candidate_key, execution.repetition), (execution.position, side)
        )
    keys = sorted(
        set(sides[before.pk]) | set(sides[after.pk]),
        key=lambda key: (key[0], key[1], key[2]),
    )
    rows = []
    for key in keys:
        a = sides[before.pk].get(key)
        b = sides[after.pk].get(key)
        change, reason = compare_change(a[1] if a else None, b[1] if b else None)
        rows.append(CompareRow(key[0], key[1], key[2], a[1] if a else None, b[1] if b else None, change, reason))
    comparable, note = _comparability(before, after)
    return RunComparison(
        before,
        after,
        rows,
        comparable,
        note,
        regressions=sum(1 for row in rows if row.change == "regression"),
        improvements=sum(1 for row in rows if row.change == "improvement"),
    )


def _comparability(before: Run, after: Run) -> tuple[bool, str]:
    reports = {run.pk: report_of(run) for run in (before, after)}
    missing = [str(pk) for pk, report in reports.items() if report is None]
    if missing:
        return False, f"Run {' and '.join(dict.fromkeys(missing))} has no report yet, so its bundle is unknown."
    a, b = reports[before.pk], reports[after.pk]
    scripted = [str(run.pk) for run in (before, after) if run.lane == RunLane.SCRIPTED]
    if scripted and len(scripted) < 2:
        return False, (
            f"Not comparable: run {scripted[0]} is scripted (the runtime against evalhub's scripted model), "
            "not a measurement; compare it only with another scripted run."
        )
    if a.bundle_id != b.bundle_id:
        return False, (
            f"Not comparable: the runs measured different bundles ({a.bundle_id} and {b.bundle_id}); "
            "provider, runner or prompt-policy inputs changed."
        )
    return True, ""


def compare_page_runs(pks: Iterable[int]) -> dict[int, Run]:
    """The runs to compare by pk, with schedule and report (one query)."""
    return {run.pk: run for run in Run.objects.select_related("schedule", "report").filter(pk__in=list(pks))}


def recent_runs(limit: int = 50) -> list[Run]:
    """The newest runs for the compare form's choices (one query)."""
    return list(Run.objects.select_related("schedule").order_by("-created_at", "-id")[:limit])


# --- alerts --------------------------------------------------------------------------------------


def open_alerts() -> list[Alert]:
    """The open alerts: those of the newest non-refresh report of each bundle, newest report
    first, critical before warning, with report, run and schedule loaded (one query).

    A bundle's older reports' alerts are history: the newest measurement supersedes them.
    """
    newest = (
        Report.objects.filter(bundle_id=OuterRef("report__bundle_id"), is_refresh=False, is_scripted=False)
        .order_by("-created_at", "-id")
        .values("pk")[:1]
    )
    alerts = (
        Alert.objects.filter(report__is_refresh=False, report__is_scripted=False, report_id=Subquery(newest))
        .select_related("report__run__schedule")
        .order_by("-report__created_at", "-report_id", _CRITICAL_FIRST, "id")
    )
    return list(alerts)


@dataclass(frozen=True)
class MissingEnvironment:
    """Executions skipped because required variables were not set: the variable names and how
    many executions each one stopped, and which candidates were affected."""

    executions: int
    names: list[tuple[str, int]]
    candidates: list[str]


def missing_environment(executions: list[Execution]) -> MissingEnvironment:
    """Read the names from the skipped executions' failure messages
    ("required qualification environment is missing: A, B"); the values were never recorded."""
    names: Counter[str] = Counter()
    candidates: dict[str, None] = {}
    count = 0
    for execution in executions:
        if execution.failure_code != ENVIRONMENT_MISSING:
            continue
        count += 1
        candidates.setdefault(execution.candidate_key)
        _, _, listed = execution.failure_message.rpartition(": ")
        names.update(name.strip() for name in listed.split(",") if name.strip())
    return MissingEnvironment(count, sorted(names.items()), list(candidates))


# --- one execution -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckRow:
    """One check of an execution's observation, as the execution page lists it."""

    group: str
    id: str
    passed: bool | None
    reason: str


@dataclass(frozen=True)
class ExecutionPage:
    """What the execution page shows: the execution (run, schedule and scorecard loaded), its
    attempts in order, its stored traces by attempt number (without their data), the
    observation's checks by group, and the scorecard's dimensions in scoring order."""

    execution: Execution
    attempts: list[Attempt]
    traces: dict[int, TraceArtifact]
    checks: list[CheckRow]
    dimensions: list[dict[str, Any]]

    @property
    def attempt_rows(self) -> list[tuple[Attempt | None, int, TraceArtifact | None]]:
        """``(attempt or None, number, trace or None)`` per attempt number, with a trace whose
        attempt row is missing still listed."""
        numbers = sorted({attempt.number for attempt in self.attempts} | set(self.traces))
        by_number = {attempt.number: attempt for attempt in self.attempts}
        return [(by_number.get(number), number, self.traces.get(number)) for number in numbers]


CHECK_GROUPS = ("lifecycle", "continuation", "presentation")


def observation_checks(observation: Any) -> list[CheckRow]:
    """The ``checks`` of the observation's lifecycle, continuation and presentation groups, in
    order; anything that is not a check object is skipped (stored observations are trusted, not assumed)."""
    rows: list[CheckRow] = []
    if not isinstance(observation, dict):
        return rows
    for group in CHECK_GROUPS:
        section = observation.get(group)
        checks = section.get("checks") if isinstance(section, dict) else None
        for check in checks if isinstance(checks, list) else []:
            if isinstance(check, dict) and isinstance(check.get("id"), str):
                passed = check.get("passed")
                reason = check.get("reason")
                rows.append(
                    CheckRow(group, check["id"], passed if isinstance(passed, bool) else None, reason if isinstance(reason, str) else "")
                )
    return rows


def execution_page(pk: int) -> ExecutionPage | None:
    """One execution for its page in three queries (execution with run, schedule and scorecard;
    attempts; traces without their data), or None when there is no such execution."""
    execution = Execution.objects.select_related("run__schedule", "scorecard").filter(pk=pk).first()
    if execution is None:
        return None
    attempts = list(execution.attempts.order_by("number", "id"))
    traces = {trace.attempt: trace for trace in execution.traces.defer("data").order_by("attempt")}
    card = scorecard_of(execution)
    document = card.document if card is not None and isinstance(card.document, dict) else {}
    dimensions = document.get("dimensions") if isinstance(document.get("dimensions"), dict) else {}
    ordered = [key for key in DIMENSION_KEYS if key in dimensions] + [key for key in dimensions if key not in DIMENSION_KEYS]
    rows = [
        {**dimensions[key], "label": str(key).replace("_", " ")}
        for key in ordered
        if isinstance(dimensions[key], dict)
    ]
    return ExecutionPage(execution, attempts, traces, observation_checks(execution.observation), rows)
