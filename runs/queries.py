"""Read-side queries for the run pages and a candidate's trend: each page's rows in a fixed number of queries.

The history page takes its page of runs first and counts only that page's executions (one grouped
query, :func:`history_rows`); ``/api/runs/`` annotates the same counts as correlated subqueries
(:func:`run_history`). Either way a page costs the same with 3 runs or 3,000, in queries and in time.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db.models import Case, Count, Exists, F, Func, IntegerField, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.functional import cached_property

from candidates.models import Candidate
from evalhub.api.params import MAX_ID
from evalhub.templatetags.evalhub_format import format_usd
from runs.evaluation.reports import DIMENSION_KEYS, percentile_95
from runs.evaluation.stats import wilson_interval
from runs.models import (
    CHAOS_RUN,
    Alert,
    AlertSeverity,
    Attempt,
    Classification,
    Execution,
    ExecutionStatus,
    Report,
    Run,
    RunLane,
    RunStatus,
    TraceArtifact,
    Trigger,
)

ENVIRONMENT_MISSING = "qualification_environment_missing"
RUN_CANCELLED = "run_cancelled"
CEILING_REACHED = "campaign_cost_ceiling_reached"


def count_executions(**lookup: str) -> Coalesce:
    """An annotation for runs: how many of the run's executions match ``lookup`` (field=value).

    A correlated subquery, not a join with ``GROUP BY``: the database counts only the runs a page
    shows (after its ``ORDER BY … LIMIT``), and counting the pages needs no executions at all, so
    the history costs the same at 10 runs or a year of them."""
    rows = Execution.objects.filter(run_id=OuterRef("pk"), **lookup).order_by().values("run_id").annotate(n=Count("id")).values("n")
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


def run_history() -> QuerySet[Run]:
    """Runs, newest first, with their schedule and counts per classification annotated:
    ``execution_count``, ``completed_count``, ``candidate_failure_count``,
    ``infrastructure_failure_count``, ``skipped_count`` and ``environment_missing_count``."""
    return (
        Run.objects.select_related("schedule")
        .annotate(
            execution_count=count_executions(),
            completed_count=count_executions(classification=Classification.COMPLETED),
            candidate_failure_count=count_executions(classification=Classification.CANDIDATE_FAILURE),
            infrastructure_failure_count=count_executions(classification=Classification.INFRASTRUCTURE_FAILURE),
            skipped_count=count_executions(classification=Classification.SKIPPED),
            environment_missing_count=count_executions(failure_code=ENVIRONMENT_MISSING),
        )
        .order_by("-created_at", "-id")
    )


#: The columns the history page prints (``.values()``: no model instances, and none of a
#: schedule's document, which a run's ``select_related("schedule")`` would decode for each row).
_HISTORY_COLUMNS = (
    "id",
    "trigger",
    "lane",
    "refresh_of_id",
    "refresh_of__lane",
    "repeat_of_id",
    "status",
    "spent_usd",
    "cost_ceiling_usd",
    "has_unpriced",
    "stopped_at_ceiling",
    "error",
    "schedule__night",
    "schedule__rotation_day",
)
_TRIGGER_LABELS = dict(Trigger.choices)
_STATUS_LABELS = dict(RunStatus.choices)
#: A run id no run has, reversed once per page: a row's link is the URL around it.
_URL_SENTINEL = 987654321987654321


@dataclass(slots=True)
class HistoryRow:
    """One run of the history page with what its row prints, worked out once in Python: counts
    of its executions (``execution_count`` and one per classification, ``environment_missing_count``
    for the skips of a missing variable, ``cancelled_count`` for those a cancel skipped), money as :func:`evalhub.templatetags.evalhub_format.format_usd`
    prints it (``spent`` is ``"unknown"`` when a cost is unpriced), the night as ``YYYY-MM-DD``."""

    pk: int
    url: str
    night: str
    rotation_day: int
    trigger_label: str
    lane: str
    refresh_of_id: int | None
    #: The refreshed run's page, or None (the row's tag links to it).
    refresh_of_url: str | None
    #: The refreshed run's lane (a refresh of a scripted run is scripted too), or None.
    refresh_of_lane: str | None
    repeat_of_id: int | None
    #: The re-run's original run's page, or None (the row's tag links to it).
    repeat_of_url: str | None
    status: str
    status_label: str
    execution_count: int
    completed_count: int
    candidate_failure_count: int
    infrastructure_failure_count: int
    skipped_count: int
    environment_missing_count: int
    cancelled_count: int
    has_unpriced: bool
    spent: str
    ceiling: str
    stopped_at_ceiling: bool
    has_error: bool


class HistoryPaginator(Paginator):
    """Django's paginator over :func:`history_runs`, whose rows carry the count of all runs
    (``runs_total``): a page is one query, and the paginator takes its count from the page's
    rows. Only a page with no rows (past the end, or no runs yet) counts the runs on its own,
    so Django's answers stay: a page past the end is ``EmptyPage`` (``get_page`` then shows the
    last one), an empty history one empty first page. A page whose rows would start past the
    largest offset a database takes (``MAX_ID``: SQLite's integers and PostgreSQL's ``bigint``
    stop there) holds no rows in any table, so it is counted and is past the end too, without
    asking the database for it (which SQLite answers with ``datatype mismatch``)."""

    def get_page(self, number: Any) -> Page:
        """Django's ``get_page`` (not a number: the first page; out of range: the last), asking
        for the page before counting."""
        try:
            return self.page(number)
        except PageNotAnInteger:
            return self.page(1)
        except EmptyPage:
            return self.page(self.num_pages)

    def page(self, number: Any) -> Page:
        """Page ``number``, read with the count in one statement; Django's errors for a number
        that is not a page's (``validate_number``)."""
        try:
            if isinstance(number, float) and not number.is_integer():
                raise ValueError
            number = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger(self.error_messages["invalid_page"]) from None
        if number < 1:
            raise EmptyPage(self.error_messages["min_page"])
        bottom = (number - 1) * self.per_page
        rows = list(self.object_list[bottom : bottom + self.per_page]) if bottom + self.per_page <= MAX_ID else []
        if rows:
            # The cached properties, from the page's own statement.
            self.count = rows[0]["runs_total"]
            self.__dict__.pop("num_pages", None)
        else:
            self.validate_number(number)  # counts: past the end is EmptyPage; no runs, an empty first page
        return self._get_page(rows, number, self)

    @cached_property
    def count(self) -> int:
        # The count of the page's ``.values()`` queryset would join every run's schedule for nothing.
        return Run.objects.count()


#: :func:`format_usd` remembered: a page's ceilings are mostly one amount, and equal amounts print alike.
_usd = functools.lru_cache(maxsize=1024)(format_usd)


@functools.cache
def _history_query() -> QuerySet[Run]:
    """:func:`history_runs`, built once (only ever cloned, never evaluated): setting up twelve
    columns across the schedule's join is a third of the page query's time in the ORM."""
    runs_total = Run.objects.order_by().values(n=Func(F("id"), function="COUNT"))
    return (
        Run.objects.order_by("-created_at", "-id")
        .values(*_HISTORY_COLUMNS)
        .annotate(runs_total=Subquery(runs_total, output_field=IntegerField()))
    )


@functools.cache
def _outcome_counts() -> QuerySet[Execution]:
    """Executions counted per run, classification and failure code (``execution_run_outcome_idx``
    answers it alone), built once like :func:`_history_query`: filter it to a page's runs."""
    return Execution.objects.values_list("run_id", "classification", "failure_code").annotate(n=Count("id")).order_by()


def history_runs() -> QuerySet[Run]:
    """The history's runs, newest first (``run_history_order_idx``), as ``.values()`` dicts of
    :data:`_HISTORY_COLUMNS` and ``runs_total``, how many runs there are (a subquery the database
    computes once per statement): paginate this (:class:`HistoryPaginator`), then
    :func:`history_rows` the page."""
    return _history_query().all()


def _run_url_around() -> tuple[str, str]:
    """The run page's URL before and after the run id (``pages:run``), reversed once per URL
    configuration and script prefix (as ``{% page_url %}`` does)."""
    return _run_url_reversed(get_urlconf() or settings.ROOT_URLCONF, get_script_prefix())


@functools.lru_cache(maxsize=64)
def _run_url_reversed(urlconf: str, prefix: str) -> tuple[str, str]:
    # ``prefix`` is part of the key only: reverse() reads the current script prefix itself.
    before, after = reverse("pages:run", args=[_URL_SENTINEL], urlconf=urlconf).split(str(_URL_SENTINEL))
    return before, after


def history_rows(runs: Iterable[dict[str, Any]]) -> list[HistoryRow]:
    """The rows of a page of :func:`history_runs`, with their executions counted in one grouped
    query over that page's runs only (so a page costs the same at 10 runs or a year of them)."""
    runs = list(runs)
    # Per run: executions by classification ("" while pending), by the missing-environment and
    # cancelled failure codes, and all of them under None (a key no classification has).
    counts: dict[int, dict[str | None, int]] = {run["id"]: {} for run in runs}
    if counts:
        for run_id, classification, failure_code, n in _outcome_counts().filter(run_id__in=counts):
            tally = counts[run_id]
            tally[None] = tally.get(None, 0) + n
            tally[classification] = tally.get(classification, 0) + n
            if failure_code in (ENVIRONMENT_MISSING, RUN_CANCELLED):
                tally[failure_code] = tally.get(failure_code, 0) + n
    url_before, url_after = _run_url_around()
    rows = []
    for run in runs:
        count = counts[run["id"]].get
        night = run["schedule__night"]
        rows.append(
            HistoryRow(
                pk=run["id"],
                url=f"{url_before}{run['id']}{url_after}",
                night=night.isoformat() if night is not None else "",
                rotation_day=run["schedule__rotation_day"],
                trigger_label=_TRIGGER_LABELS.get(run["trigger"], run["trigger"]),
                lane=run["lane"],
                refresh_of_id=run["refresh_of_id"],
                refresh_of_url=None if run["refresh_of_id"] is None else f"{url_before}{run['refresh_of_id']}{url_after}",
                refresh_of_lane=run["refresh_of__lane"],
                repeat_of_id=run["repeat_of_id"],
                repeat_of_url=None if run["repeat_of_id"] is None else f"{url_before}{run['repeat_of_id']}{url_after}",
                status=run["status"],
                status_label=_STATUS_LABELS.get(run["status"], run["status"]),
                execution_count=count(None, 0),
                completed_count=count(Classification.COMPLETED, 0),
                candidate_failure_count=count(Classification.CANDIDATE_FAILURE, 0),
                infrastructure_failure_count=count(Classification.INFRASTRUCTURE_FAILURE, 0),
                skipped_count=count(Classification.SKIPPED, 0),
                environment_missing_count=count(ENVIRONMENT_MISSING, 0),
                cancelled_count=count(RUN_CANCELLED, 0),
                has_unpriced=run["has_unpriced"],
                spent="unknown" if run["has_unpriced"] else _usd(run["spent_usd"]),
                ceiling=_usd(run["cost_ceiling_usd"]),
                stopped_at_ceiling=run["stopped_at_ceiling"],
                has_error=bool(run["error"]),
            )
        )
    return rows


def run_page() -> QuerySet[Run]:
    """Runs with their schedule, report (and the report it was compared with) and, for a
    refresh, the refreshed run loaded in the same query (look one up by pk)."""
    return Run.objects.select_related("schedule", "report", "report__previous", "refresh_of")


def run_executions(run: Run) -> list[Execution]:
    """The run's executions in schedule order with their scorecards, each with
    ``attempt_count`` annotated (one query)."""
    return list(run.executions.select_related("scorecard").annotate(attempt_count=Count("attempts")).order_by("position", "id"))


def report_of(run: Run) -> Report | None:
    """The run's report, or None while it has none (no query when loaded by :func:`run_page`)."""
    try:
        return run.report
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
    executions = Execution.objects.filter(run__in=[before.pk, after.pk]).select_related("scorecard").order_by("run_id", "position", "id")
    for execution in executions:
        card = execution.scorecard_or_none
        side = Side(
            execution.classification or execution.status,
            card.passed if card is not None else None,
            card.overall_score if card is not None else None,
        )
        sides[execution.run_id].setdefault((execution.case_key, execution.candidate_key, execution.repetition), (execution.position, side))
    repeated = _repeated_side(before, after)
    # A re-run repeats some of its original's executions: only those two measurements compare.
    present = set(sides[repeated.pk]) if repeated is not None else set(sides[before.pk]) | set(sides[after.pk])
    keys = sorted(present, key=lambda key: (key[0], key[1], key[2]))
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


def _repeated_side(before: Run, after: Run) -> Run | None:
    """The one of ``before`` and ``after`` that re-runs (``repeat_of``) the other, or None."""
    if after.repeat_of_id == before.pk:
        return after
    if before.repeat_of_id == after.pk:
        return before
    return None


def _comparability(before: Run, after: Run) -> tuple[bool, str]:
    """Whether the two runs' results may be compared, and the note that says why not (or what is
    compared): both measured (not a refresh or a scripted run) with the same bundle — or one re-runs
    the other, which repeats the same schedule's executions (its bundle differs only by naming
    them) and is compared on those. A run against itself is refused: every row would be the same
    measurement twice, a table of no changes that reads like a stable night."""
    for run in (before, after):
        if run.lane == RunLane.CHAOS:  # never reported: "no report yet" would promise one
            return False, f"Not comparable: run {run.pk} is {CHAOS_RUN}; compare measured runs only."
    reports = {run.pk: report_of(run) for run in (before, after)}
    missing = [str(pk) for pk, report in reports.items() if report is None]
    if missing:
        return False, f"Run {' and '.join(dict.fromkeys(missing))} has no report yet, so its bundle is unknown."
    a, b = reports[before.pk], reports[after.pk]
    for run in (before, after):
        if reason := reports[run.pk].not_a_measurement():
            return False, f"Not comparable: run {run.pk} is {reason}; compare measured runs only."
    # After the reasons a run is no measurement at all, which say more about it than this.
    if before.pk == after.pk:
        return False, f"Run {before.pk} is both A and B: a run compared with itself has no changes; pick two different runs."
    if (repeated := _repeated_side(before, after)) is not None:
        original = after if repeated is before else before
        return True, (
            f"Run {repeated.pk} re-runs {repeated.executions.count()} execution(s) of run {original.pk}: "
            "only those are compared (the rest of the night was not repeated)."
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
class BundleReports:
    """The newest measured bundle and how many measured reports it has (alerts need seven)."""

    bundle_id: str
    reports: int


def newest_bundle_reports() -> BundleReports | None:
    """The bundle of the newest measured (not refresh, not scripted) report and its report count
    (two queries), or None before the first report."""
    measured = Report.objects.filter(is_refresh=False, is_scripted=False)
    bundle = measured.order_by("-created_at", "-id").values_list("bundle_id", flat=True).first()
    if bundle is None:
        return None
    return BundleReports(bundle, measured.filter(bundle_id=bundle).count())


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


def waiting_for_a_worker(executions: Iterable[Execution]) -> int:
    """How many of ``executions`` sit on the queue for a worker (pending, their task queued:
    ``dispatched_at`` set) while no worker cluster says it is alive; 0 when one does or none is
    queued. A run queued with no worker running would otherwise read "0 of 40 settled, updating as
    they settle" for ever. Alive is django-q2's own word: each cluster's sentinel saves its status
    (``django_q.status.Stat``) to the broker's cache every guard cycle, kept for 3 s. No query
    when nothing is queued; a status that cannot be read (the cache down) says nothing rather than
    fail the page."""
    queued = sum(1 for execution in executions if execution.status == ExecutionStatus.PENDING and execution.dispatched_at is not None)
    if not queued:
        return 0
    from django_q.status import Stat

    try:
        alive = Stat.get_all()
    except Exception:
        return 0
    return 0 if alive else queued


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
    card = execution.scorecard_or_none
    document = card.document if card is not None and isinstance(card.document, dict) else {}
    dimensions = document.get("dimensions") if isinstance(document.get("dimensions"), dict) else {}
    ordered = [key for key in DIMENSION_KEYS if key in dimensions] + [key for key in dimensions if key not in DIMENSION_KEYS]
    rows = [{**dimensions[key], "label": str(key).replace("_", " ")} for key in ordered if isinstance(dimensions[key], dict)]
    return ExecutionPage(execution, attempts, traces, observation_checks(execution.observation), rows)


# --- one candidate's history ---------------------------------------------------------------------

#: How many of the candidate's newest runs its page charts.
HISTORY_RUNS = 30


@dataclass(frozen=True)
class TrendPoint:
    """One non-refresh run as the candidate's charts plot it (None: nothing to plot that night).

    ``pass_rate`` is passed / scoreable; ``mean_score`` the mean overall score of the scored
    executions; ``p95_latency_ms`` the nearest-rank 95th percentile of the observations'
    ``metrics.settlementMs`` (as the reference's latency alert computes it); ``cost_usd`` the
    priced executions' cost, with ``unpriced`` counting those whose cost is unknown.
    """

    run_id: int
    night: Any
    executions: int
    scoreable: int
    passed: int
    pass_rate: float | None
    mean_score: float | None
    p95_latency_ms: float | None
    cost_usd: float | None
    unpriced: int
    skipped: int = 0  # executions that never reached the runtime (nothing measured)
    model: str = ""  # the model the schedule named for the candidate that night

    @property
    def label(self) -> str:
        return f"run {self.run_id} · {self.night:%Y-%m-%d}" if self.night else f"run {self.run_id}"


@dataclass(frozen=True)
class CaseRate:
    """A case's pass rate across every scored repetition in the charted runs, with its 95% Wilson interval."""

    case_key: str
    trials: int
    passed: int
    interval: tuple[float, float] | None

    @property
    def rate(self) -> float | None:
        return self.passed / self.trials if self.trials else None


@dataclass(frozen=True)
class CandidateHistory:
    key: str
    candidate: Candidate | None  # None: no longer in the catalog, history kept
    points: list[TrendPoint]  # oldest first
    cases: list[CaseRate]

    @property
    def measured_models(self) -> list[str]:
        """The models the charted runs measured, oldest first (one, unless the model was changed)."""
        return list(dict.fromkeys(point.model for point in self.points if point.model))

    @property
    def model_changed(self) -> bool:
        """True when the catalog's model is not the one the newest charted run measured."""
        return bool(self.candidate and self.points and self.points[-1].model and self.points[-1].model != self.candidate.model)


def candidate_history(key: str, *, runs: int = HISTORY_RUNS) -> CandidateHistory | None:
    """The candidate's newest ``runs`` live, non-refresh runs (a replay-lane refresh re-scores
    old observations and is not a new measurement), oldest first, and its per-case pass rates
    over them. Two queries; None when the key is neither in the catalog nor in any run.
    """
    candidate = Candidate.objects.select_related("slot", "budget").filter(key=key).first()
    newest = (
        Run.objects.filter(lane=RunLane.LIVE, refresh_of__isnull=True)
        .filter(Exists(Execution.objects.filter(run=OuterRef("pk"), candidate_key=key)))
        .order_by("-created_at", "-id")
        .values("pk")[:runs]
    )
    rows = (
        Execution.objects.filter(run__in=newest, candidate_key=key)
        .order_by("run__created_at", "run_id", "position")
        .values(
            "run_id",
            "run__schedule__night",
            "case_key",
            "classification",
            "cost_usd",
            "cost_known",
            "scorecard__passed",
            "scorecard__overall_score",
            "settlement_ms",
            "entry__candidate",
        )
    )
    by_run: dict[int, list[dict[str, Any]]] = {}
    cases: dict[str, list[int]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
        verdict = row["scorecard__passed"]
        if verdict is not None:
            tally = cases.setdefault(row["case_key"], [0, 0])
            tally[0] += 1
            tally[1] += 1 if verdict else 0
    if candidate is None and not by_run:
        return None
    points = []
    for run_id, run_rows in by_run.items():
        # A skipped execution never reached the runtime: it has no latency and spent nothing,
        # so it is left out of what the charts plot (a night of skips plots no point at all).
        measured = [row for row in run_rows if row["classification"] and row["classification"] != Classification.SKIPPED]
        verdicts = [row["scorecard__passed"] for row in measured if row["scorecard__passed"] is not None]
        scores = [row["scorecard__overall_score"] for row in measured if row["scorecard__overall_score"] is not None]
        latencies = [value for row in measured if isinstance(value := row["settlement_ms"], int)]
        priced = [row["cost_usd"] for row in measured if row["cost_known"] and row["cost_usd"] is not None]
        models = {str(row["entry__candidate"].get("model")) for row in run_rows if isinstance(row["entry__candidate"], dict)}
        points.append(
            TrendPoint(
                run_id=run_id,
                night=run_rows[0]["run__schedule__night"],
                executions=len(run_rows),
                scoreable=len(verdicts),
                passed=sum(1 for verdict in verdicts if verdict),
                pass_rate=sum(1 for verdict in verdicts if verdict) / len(verdicts) if verdicts else None,
                mean_score=sum(scores) / len(scores) if scores else None,
                p95_latency_ms=percentile_95(latencies) if latencies else None,
                cost_usd=float(sum(priced)) if priced else None,
                unpriced=sum(1 for row in measured if not row["cost_known"]),
                skipped=sum(1 for row in run_rows if row["classification"] == Classification.SKIPPED),
                model=", ".join(sorted(models)),
            )
        )
    return CandidateHistory(
        key=key,
        candidate=candidate,
        points=points,
        cases=[CaseRate(case, trials, passed, wilson_interval(passed, trials)) for case, (trials, passed) in sorted(cases.items())],
    )


# --- the leaderboard -----------------------------------------------------------------------------

#: How many of the newest live nights the leaderboard covers by default, and at most.
LEADERBOARD_NIGHTS = 7
MAX_LEADERBOARD_NIGHTS = 90
#: The leaderboard's sort keys (``-key`` sorts descending); a missing value always sorts last.
LEADERBOARD_SORTS = ("candidate", "pass_rate", "mean_score", "p95_latency_ms", "cost_per_pass", "scoreable")


#: Cost per pass is kept to a millionth of a dollar (a cheap model's pass costs $0.0031).
USD_PER_PASS_PLACES = Decimal("0.000001")


@dataclass(frozen=True)
class LeaderboardRow:
    """One candidate over the leaderboard's nights.

    ``pass_rate`` is passed / scoreable with its 95% Wilson ``interval``; ``mean_score`` the mean
    overall score of the scored executions; ``p95_latency_ms`` the nearest-rank 95th percentile of
    ``settlement_ms`` over the executions that reached the runtime (skipped ones never did);
    ``cost_usd`` what the priced executions cost (USD) and ``unpriced`` how many have an unknown
    cost; ``cost_per_pass`` is ``cost_usd / passed`` (USD per passed execution), None when nothing
    passed or some cost is unknown (then ``cost_per_pass_at_least`` is the priced part's share).
    """

    candidate_key: str
    model: str
    slot_key: str
    nights: int
    executions: int
    skipped: int
    scoreable: int
    passed: int
    interval: tuple[float, float] | None
    mean_score: float | None
    p95_latency_ms: int | None
    cost_usd: Decimal
    unpriced: int
    best_value: bool = False

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scoreable if self.scoreable else None

    @property
    def cost_per_pass(self) -> Decimal | None:
        if not self.passed or self.unpriced:
            return None
        return (self.cost_usd / self.passed).quantize(USD_PER_PASS_PLACES)

    @property
    def cost_per_pass_at_least(self) -> Decimal | None:
        return (self.cost_usd / self.passed).quantize(USD_PER_PASS_PLACES) if self.passed and self.unpriced else None


@dataclass(frozen=True)
class Leaderboard:
    """The candidates over the newest ``nights`` (dates, newest first) that had a live nightly run."""

    nights: list[Any]
    rows: list[LeaderboardRow]
    sort: str

    @property
    def best(self) -> LeaderboardRow | None:
        return next((row for row in self.rows if row.best_value), None)


def sort_leaderboard(rows: list[LeaderboardRow], sort: str) -> list[LeaderboardRow]:
    """``rows`` sorted by ``sort`` (one of :data:`LEADERBOARD_SORTS`, ``-`` for descending), ties by
    candidate id; a missing value (no scoreable execution, an unknown cost) sorts last either way.
    Raises ``ValueError`` for another key."""
    key = sort.removeprefix("-")
    if key not in LEADERBOARD_SORTS:
        raise ValueError(f"sort must be one of {', '.join(LEADERBOARD_SORTS)} (with - for descending), not {sort!r}")
    if key == "candidate":
        return sorted(rows, key=lambda row: row.candidate_key, reverse=sort.startswith("-"))
    present = sorted((row for row in rows if getattr(row, key) is not None), key=lambda row: row.candidate_key)
    present.sort(key=lambda row: getattr(row, key), reverse=sort.startswith("-"))
    return present + sorted((row for row in rows if getattr(row, key) is None), key=lambda row: row.candidate_key)


def leaderboard(*, nights: int = LEADERBOARD_NIGHTS, sort: str = "-pass_rate") -> Leaderboard:
    """Every candidate measured by the live nightly runs of the newest ``nights`` nights (refreshes,
    scripted, chaos and manual runs left out), in three queries: the nights, their executions,
    the catalog's models. The best value is the lowest known cost per passed execution (ties: the
    higher pass rate). Raises ``ValueError`` for a bad ``sort``."""
    measured_runs = Run.objects.filter(lane=RunLane.LIVE, trigger="nightly", refresh_of__isnull=True)
    dates = list(measured_runs.order_by("-schedule__night").values_list("schedule__night", flat=True).distinct()[:nights])
    rows = (
        Execution.objects.filter(run__in=measured_runs.filter(schedule__night__in=dates))
        .order_by("candidate_key", "run_id", "position")
        .values(
            "candidate_key",
            "slot_key",
            "run__schedule__night",
            "classification",
            "cost_usd",
            "cost_known",
            "settlement_ms",
            "scorecard__passed",
            "scorecard__overall_score",
        )
    )
    by_candidate: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_candidate.setdefault(row["candidate_key"], []).append(row)
    models = dict(Candidate.objects.filter(key__in=list(by_candidate)).values_list("key", "model"))
    board = []
    for key, executions in by_candidate.items():
        reached = [row for row in executions if row["classification"] and row["classification"] != Classification.SKIPPED]
        verdicts = [row["scorecard__passed"] for row in reached if row["scorecard__passed"] is not None]
        scores = [row["scorecard__overall_score"] for row in reached if row["scorecard__overall_score"] is not None]
        latencies = [row["settlement_ms"] for row in reached if isinstance(row["settlement_ms"], int)]
        passed = sum(1 for verdict in verdicts if verdict)
        board.append(
            LeaderboardRow(
                candidate_key=key,
                model=models.get(key, ""),
                slot_key=executions[-1]["slot_key"],
                nights=len({row["run__schedule__night"] for row in executions}),
                executions=len(executions),
                skipped=len(executions) - len(reached),
                scoreable=len(verdicts),
                passed=passed,
                interval=wilson_interval(passed, len(verdicts)),
                mean_score=sum(scores) / len(scores) if scores else None,
                p95_latency_ms=percentile_95(latencies) if latencies else None,
                cost_usd=sum(
                    (Decimal(row["cost_usd"]) for row in reached if row["cost_known"] and row["cost_usd"] is not None), Decimal(0)
                ),
                unpriced=sum(1 for row in reached if not row["cost_known"]),
            )
        )
    valued = [row for row in board if row.cost_per_pass is not None]
    if valued:
        best = min(valued, key=lambda row: (row.cost_per_pass, -(row.pass_rate or 0), row.candidate_key))
        board = [replace(row, best_value=True) if row is best else row for row in board]
    return Leaderboard(nights=dates, rows=sort_leaderboard(board, sort), sort=sort)
