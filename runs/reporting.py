"""Reporting services: score a run, report it, compare it, raise its alerts, refresh and prune.

Thin services over the pure core (``runs.evaluation.scoring``, ``runs.evaluation.reports``): they load rows, call the
core and save. They follow the reference nightly script's step 4: score every
execution with the run's live bundle id, build the live report, compare it with the newest
previous report of the same bundle and compute the alerts against the last seven of them.

evalhub's decisions:

* History is the database: "compatible reports" are the stored non-refresh reports with the same
  bundle id, oldest first by creation. A refresh (replay lane) and a scripted run (scripted
  lane) are never history.
* Alerts are stored once per (report, code, case, candidate); ``occurrences`` counts the
  repetitions the reference lists one by one. The reference's list itself is kept on the
  report (``alert_documents``) so exports stay byte-identical to the reference.
* Beside the reference's five alert rules, evalhub raises its own ``significant_regression``
  (``runs.signal``, docs/signal.md): stored as an alert row of the report (so it is delivered
  like the others) and never added to ``alert_documents``.
* A stored observation may hold ``null`` where an executor reported a non-finite metric
  (docs/failure-modes.md B9) or an unusable cost (docs/failure-modes.md B5); :func:`scoreable_observation` drops those
  keys ("unknown") before validation and scoring, so they count as missing, never as 0.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, TextField, Window
from django.db.models.functions import Cast, RowNumber
from django.utils import timezone

import evalhub
from evalhub.conf import evalhub_setting
from evalhub.fields import storable_text
from evalhub.secrets import redact
from runs.alerting import deliver_report_alerts
from runs.evaluation.exports import EXPORT_FORMATS, export_document, export_file_name
from runs.evaluation.reports import (
    BASELINE_WINDOW,
    CANONICAL_OPERATION_IDS,
    CAPABILITY_CASES,
    SCRIPTED_SOURCE,
    build_report,
    compare_reports,
    compute_alerts,
    live_bundle,
    scripted_bundle,
)
from runs.evaluation.scoring import REFERENCE_TRACE_EXPECTATIONS, SCORING_VERSION, score_observation
from runs.models import (
    CHAOS_RUN,
    Alert,
    CoverageCatalog,
    Execution,
    ExecutionStatus,
    Report,
    Run,
    RunLane,
    RunStatus,
    Scorecard,
    Trigger,
)
from runs.signal import significant_regression_alerts
from schedules.models import WorkflowCase

logger = logging.getLogger(__name__)

#: The reference's consecutive-failure message: ``<case>/<candidate> failed three consecutive reports``.
_CONSECUTIVE_SUFFIX = " failed three consecutive reports"


def scoreable_observation(observation: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a stored observation as the scorer reads it.

    ``null`` values in ``metrics`` and ``base.efficiency`` (non-finite numbers an executor
    reported, stored as null) and a ``metrics.costUsd`` that is not a finite number >= 0 (an
    unknown price, counted at the budget by the orchestration) are left out: absent means
    unknown, and the scorer counts a missing efficiency value as a miss. Everything else is
    unchanged; a non-dict is returned as is (validation then says so).
    """
    if not isinstance(observation, Mapping):
        return observation  # type: ignore[return-value]
    document = dict(observation)
    metrics = document.get("metrics")
    if isinstance(metrics, Mapping):
        kept = {key: value for key, value in metrics.items() if value is not None}
        cost = kept.get("costUsd")
        if "costUsd" in kept and (isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0):
            del kept["costUsd"]
        document["metrics"] = kept
    base = document.get("base")
    if isinstance(base, Mapping) and isinstance(base.get("efficiency"), Mapping):
        document["base"] = {
            **base,
            "efficiency": {key: value for key, value in base["efficiency"].items() if value is not None},
        }
    return document


def _trace_expectations(cases: Sequence[WorkflowCase] | None = None) -> dict[str, Mapping[str, Any]]:
    """Each stored case's ``assertions.trace`` (the reference catalog's for cases not stored);
    ``cases``: the catalog's rows, when the caller has read them already."""
    expectations: dict[str, Mapping[str, Any]] = dict(REFERENCE_TRACE_EXPECTATIONS)
    rows = [(case.key, case.assertions) for case in cases] if cases is not None else WorkflowCase.objects.values_list("key", "assertions")
    for key, assertions in rows:
        trace = assertions.get("trace") if isinstance(assertions, dict) else None
        if isinstance(trace, dict):
            expectations[key] = trace
        else:
            expectations.pop(key, None)
    return expectations


def run_bundle(run: Run, executions: Sequence[Execution] | None = None) -> dict[str, Any]:
    """The live report bundle of ``run`` (spec §4.7), from evalhub's version, the schedule's seed
    and the run's line-up: the schedule's candidates that have executions in the run, and for a
    selection the selected execution ids in order (so a subset never mixes with full runs).
    A refresh has the bundle of the run it refreshes."""
    if executions is None:
        executions = list(run.executions.order_by("position"))
    present = {execution.candidate_key for execution in executions}
    candidates = [candidate for candidate in run.schedule.candidates if candidate.get("id") in present]
    bundle = live_bundle(
        runner_version=evalhub.__version__,
        seed=run.schedule.seed,
        candidates=candidates,
        runner_build=evalhub_setting("RUNNER_BUILD"),
        selected_execution_ids=[execution.execution_id for execution in executions] if run.selection else None,
    )
    # A scripted run drives the real runtime against evalhub's scripted model: its bundle says so.
    return scripted_bundle(bundle) if is_scripted_run(run) else bundle


def is_scripted_run(run: Run) -> bool:
    """Whether ``run`` measured a scripted model: a scripted-lane run, or a refresh (replay lane)
    of one — re-scoring scripted observations does not make them measurements (one query for a
    refresh, none otherwise)."""
    if run.lane == RunLane.SCRIPTED:
        return True
    return run.lane == RunLane.REPLAY and run.refresh_of_id is not None and run.refresh_of.lane == RunLane.SCRIPTED


def score_run(run: Run) -> int:
    """Score every finished execution of ``run`` that has an observation and no scorecard yet.

    Each scorecard is ``score_observation`` of the stored observation (see
    :func:`scoreable_observation`) with the run's bundle id, stored with ``SCORING_VERSION``.
    Returns how many scorecards were created (0 on a second call). Raises ``ObservationError``
    naming nothing secret when a stored observation is invalid (observations are validated
    before they are stored, so only rows written around the services can be).
    """
    executions = _line_up(run)
    bundle_id = run_bundle(run, executions)["id"]
    pending = list(
        run.executions.filter(status=ExecutionStatus.FINISHED, observation__isnull=False, scorecard__isnull=True).order_by("position")
    )
    return len(_score(pending, bundle_id=bundle_id, case_ids={execution.case_key for execution in executions}))


def _line_up(run: Run) -> list[Execution]:
    """The run's executions in order, with only what its bundle and case ids read (no documents)."""
    return list(run.executions.order_by("position").only("pk", "run_id", "position", "execution_id", "case_key", "candidate_key"))


def _score(
    pending: Sequence[Execution], *, bundle_id: str, case_ids: set[str], cases: Sequence[WorkflowCase] | None = None
) -> list[Scorecard]:
    """Score and store ``pending`` (finished executions with an observation and no scorecard):
    the new scorecards, each also set on its execution. ``cases``: the catalog's rows, if read."""
    if not pending:
        return []
    expectations = _trace_expectations(cases)
    scorecards = []
    for execution in pending:
        observation = scoreable_observation(execution.observation)
        # The column's own text, when the report read it beside the document (``report_run``) and
        # the scorer's copy left nothing out of the document decoded from it: looked up as it is.
        text = getattr(execution, "observation_text", None) if observation == execution.observation else None
        document = score_observation(
            observation,
            {"bundleId": bundle_id},
            trace_expectations=expectations,
            # The run's cases come from its schedule, built from the catalog in the database.
            case_ids=case_ids,
            # Read from its row: checked again unless it is, to the byte, a document checked when stored.
            decoded=True,
            text=text,
        )
        overall = document["overall"]
        scorecard = Scorecard(
            execution=execution,
            scoring_version=SCORING_VERSION,
            document=document,
            overall_score=overall["score"],
            gate_passed=overall["gatePassed"],
            passed=overall["passed"],
        )
        scorecard.full_clean(exclude=["execution"], validate_unique=False)
        scorecards.append(scorecard)
    # A concurrent scorer made some of them already: the one-to-one key keeps the first (scoring
    # is a function of the stored observation and the bundle id, so theirs is the same document).
    Scorecard.objects.bulk_create(scorecards, ignore_conflicts=True)
    for execution, scorecard in zip(pending, scorecards, strict=True):
        execution.scorecard = scorecard
    return scorecards


def _coverage_catalog() -> tuple[list[str], int]:
    row = CoverageCatalog.objects.order_by("pk").first()
    if row is None:
        return list(CANONICAL_OPERATION_IDS), CAPABILITY_CASES
    return list(row.operation_ids), row.capability_cases


def _history_rows(bundle_id: str, *, exclude_run: Run) -> Any:
    return (
        Report.objects.filter(bundle_id=bundle_id, is_refresh=False, is_scripted=False)
        .exclude(run=exclude_run)
        .order_by("-created_at", "-id")[:BASELINE_WINDOW]
    )


def _history(bundle_id: str, *, exclude_run: Run) -> list[Report]:
    """The last seven stored non-refresh reports of ``bundle_id``, oldest first."""
    return list(reversed(list(_history_rows(bundle_id, exclude_run=exclude_run))))


def _history_ids(bundle_id: str, *, exclude_run: Run) -> list[int]:
    """The ids of :func:`_history`'s reports, oldest first (no documents read)."""
    return list(reversed(list(_history_rows(bundle_id, exclude_run=exclude_run).values_list("pk", flat=True))))


def alert_rows(alerts: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The reference alert list folded into one row per (code, case, candidate), in first-seen
    order, with ``occurrences`` counting repeats. A consecutive-failure alert names its case
    and candidate in its message (``<case>/<candidate> failed three consecutive reports``);
    run-wide alerts have blank case and candidate."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for alert in alerts:
        case = candidate = ""
        message = alert["message"]
        if alert["code"] == "consecutive_failures" and message.endswith(_CONSECUTIVE_SUFFIX):
            case, _, candidate = message.removesuffix(_CONSECUTIVE_SUFFIX).partition("/")
        key = (alert["code"], case, candidate)
        if key in rows:
            rows[key]["occurrences"] += 1
        else:
            rows[key] = {
                "code": alert["code"],
                "severity": alert["severity"],
                "case_key": case,
                "candidate_key": candidate,
                "message": message,
                "occurrences": 1,
            }
    return list(rows.values())


#: The columns of an execution its run's report reads (the line-up, the bundle, the results and
#: the scorecards' rows): its timings, costs and lease are not read (nor built, 40 rows a night).
_REPORTED_COLUMNS = ("pk", "run_id", "position", "execution_id", "case_key", "candidate_key", "status", "observation")


def report_run(run: Run, *, generated_at: str) -> Report:
    """The run's report: built, compared and alerted once; a run already reported returns it.

    Scores the run first (:func:`score_run`). Results are the finished executions in order,
    ``{scenarioId, candidateId, observation, scorecard}``; the coverage section uses the
    ``CoverageCatalog`` row (the reference's 41 operations and 106 capability cases without
    one). A live run is compared with the newest previous non-refresh report of its bundle and
    alerted against the last seven of them (``EVALHUB["BASELINE_READY"]`` and seven reports
    required); a refresh (replay lane) is labelled ``is_refresh`` and gets neither.
    ``generated_at`` is the report's ISO timestamp. Raises ``ObservationError`` as
    :func:`score_run` does.
    """
    existing = Report.objects.filter(run=run).first()
    if existing is not None:
        return existing
    # Each row is read once: the line-up with the scorecards, the finished executions being the
    # line-up's settled ones with an observation; the missing scorecards are made from the
    # observations just read.
    executions = list(
        run.executions.select_related("scorecard")
        .only(*_REPORTED_COLUMNS, "scorecard")
        .annotate(observation_text=Cast("observation", TextField()))
        .order_by("position")
    )
    bundle = run_bundle(run, executions)
    finished = [execution for execution in executions if execution.status == ExecutionStatus.FINISHED and execution.observation is not None]
    catalog = list(WorkflowCase.objects.order_by("position", "id"))
    _score(
        [execution for execution in finished if execution.scorecard_or_none is None],
        bundle_id=bundle["id"],
        case_ids={execution.case_key for execution in executions},
        cases=catalog,
    )
    results = [
        {
            "scenarioId": execution.case_key,
            "candidateId": execution.candidate_key,
            "observation": scoreable_observation(execution.observation),
            "scorecard": execution.scorecard.document,
        }
        for execution in finished
    ]
    operation_ids, capability_cases = _coverage_catalog()
    cases = [case.to_document() for case in catalog]
    is_refresh = run.lane == RunLane.REPLAY
    # A scripted run drives the real runtime against a scripted model: labelled, never a measurement.
    is_scripted = is_scripted_run(run)
    document = build_report(
        source=SCRIPTED_SOURCE if is_scripted else "live",
        bundle=bundle,
        generated_at=generated_at,
        results=results,
        workflow_cases=cases,
        operation_ids=operation_ids,
        capability_cases=capability_cases,
    )
    previous: Report | None = None
    comparison: dict[str, Any] | None = None
    alerts: list[dict[str, str]] = []
    if not is_refresh and not is_scripted:
        # The history's documents are whole reports: only the newest is read for the comparison
        # unless the alerts need the baseline (compute_alerts reads nothing else without it).
        history_ids = _history_ids(bundle["id"], exclude_run=run)
        baseline_ready = bool(evalhub_setting("BASELINE_READY")) and len(history_ids) >= BASELINE_WINDOW
        history = _history(bundle["id"], exclude_run=run) if baseline_ready else []
        if history:
            previous = history[-1]
        elif history_ids:
            previous = Report.objects.only("pk", "document").get(pk=history_ids[-1])
        if previous is not None:
            comparison = compare_reports(document, previous.document)
        alerts = compute_alerts(document, history=[report.document for report in history], baseline_ready=baseline_ready)
    aggregate = document["aggregate"]
    report = Report(
        run=run,
        bundle_id=bundle["id"],
        source=document["source"],
        generated_at=generated_at,
        is_refresh=is_refresh,
        is_scripted=is_scripted,
        scoring_version=SCORING_VERSION,
        document=document,
        comparison=comparison,
        alert_documents=alerts,
        previous=previous,
        executions=aggregate["executions"],
        scoreable=aggregate["scoreable"],
        passed=aggregate["passed"],
        mean_overall=aggregate["meanOverall"],
    )
    report.full_clean(exclude=["run", "previous"], validate_unique=False)
    try:
        with transaction.atomic():
            report.save()
            Alert.objects.bulk_create(Alert(report=report, **row) for row in alert_rows(alerts))
            if not is_refresh and not is_scripted and evalhub_setting("BASELINE_READY"):
                _add_signal_alerts(report)
    except IntegrityError:
        # Another worker reported this run first (one report per run): theirs stands.
        existing = Report.objects.filter(run=run).first()
        if existing is None:
            raise
        return existing
    return report


def _add_signal_alerts(report: Report) -> None:
    """evalhub's own ``significant_regression`` alerts for ``report`` (``runs.signal``), beside the
    reference's five and never in ``alert_documents``. In a savepoint, and a failure is logged,
    never raised: evalhub's own alert must not cost the run its reference report."""
    try:
        with transaction.atomic():
            Alert.objects.bulk_create(significant_regression_alerts(report))
    except Exception as exc:  # any failure of the signal layer; the reference report stands
        logger.error("run %s: the significant_regression check failed: %s", report.run_id, redact(f"{type(exc).__name__}: {exc}"))


def finish_reporting(run: Run, *, generated_at: str, secrets: Sequence[str] = ()) -> Report | None:
    """Score and report a finished run, then deliver its new alerts (``runs.alerting``); a
    reporting failure is logged and recorded in ``run.error`` (redacted) and never undoes the
    executions. Returns the report, or None when it failed."""
    try:
        report = report_run(run, generated_at=generated_at)
    except Exception as exc:  # the executions are stored; reporting can be retried
        message = storable_text(redact(f"reporting failed: {type(exc).__name__}: {exc}", extra_values=secrets))
        logger.error("run %s: %s", run.pk, message)
        Run.objects.filter(pk=run.pk).update(error=message)
        run.error = message
        return None
    # The new alerts go out once the report stands; a channel's failure is recorded on its
    # delivery and retried by the every-minute task, never failing the run.
    try:
        deliver_report_alerts(report)
    except Exception as exc:
        logger.error("run %s: delivering alerts failed: %s", run.pk, redact(f"{type(exc).__name__}: {exc}", extra_values=secrets))
    return report


def refresh_run(run: Run, *, generated_at: str) -> Run:
    """A replay-lane refresh of ``run``: its stored observations re-scored under the current rules.

    Creates a new finished run (lane ``replay``, ``refresh_of=run``, trigger manual, same
    schedule, selection and ceiling) whose executions copy the originals' observations,
    classifications and failure fields; no executor is called and nothing is spent (costs are
    copied for reading, ``spent_usd`` stays 0). Then scores and reports it with
    ``is_refresh=True``: no comparison, no alerts, and it never enters any history.
    Raises ``ValueError`` for a run that is itself a refresh, a chaos run (its executions are
    fault scenarios, not observations to score) or has not finished: the command, the API and
    the admin all refuse through here.
    """
    if run.lane == RunLane.CHAOS:
        raise ValueError(f"run {run.pk} is {CHAOS_RUN}; there is nothing to re-score: run the chaos lane again (`manage.py chaos`)")
    if run.lane == RunLane.REPLAY:
        raise ValueError(f"run {run.pk} is a refresh; refresh the run it refreshes (run {run.refresh_of_id}) instead")
    if run.status not in {RunStatus.FINISHED, RunStatus.FAILED}:
        raise ValueError(f"run {run.pk} is {run.status}; only a finished run can be refreshed")
    try:
        now = timezone.now()
        originals = list(run.executions.order_by("position"))
        with transaction.atomic():
            refresh = Run(
                schedule=run.schedule,
                trigger=Trigger.MANUAL,
                lane=RunLane.REPLAY,
                refresh_of=run,
                selection=run.selection,
                cost_ceiling_usd=run.cost_ceiling_usd,
                status=RunStatus.FINISHED,
                started_at=now,
                finished_at=now,
            )
            refresh.full_clean(exclude=["schedule", "refresh_of"])
            refresh.save()
            Execution.objects.bulk_create(
                Execution(
                    run=refresh,
                    entry_id=original.entry_id,
                    position=original.position,
                    execution_id=original.execution_id,
                    case_key=original.case_key,
                    candidate_key=original.candidate_key,
                    slot_key=original.slot_key,
                    repetition=original.repetition,
                    status=original.status,
                    classification=original.classification,
                    failure_code=original.failure_code,
                    failure_category=original.failure_category,
                    failure_retryable=original.failure_retryable,
                    failure_message=original.failure_message,
                    observation=original.observation,
                    settlement_ms=original.settlement_ms,
                    cost_usd=original.cost_usd,
                    cost_known=original.cost_known,
                    duration_ms=original.duration_ms,
                    started_at=original.started_at,
                    finished_at=original.finished_at,
                )
                for original in originals
            )
            # Inside the transaction: a refresh that cannot be reported leaves no report-less run behind.
            report_run(refresh, generated_at=generated_at)
    except Exception as exc:  # nothing of the refresh is kept (one transaction); say why
        raise ValueError(redact(f"run {run.pk} could not be refreshed: {type(exc).__name__}: {exc}")) from None
    return refresh


def prune_history(*, now: dt.datetime, retention_days: int) -> int:
    """Delete finished or failed runs created more than ``retention_days`` days before ``now``,
    with everything they own (executions, scorecards, report, alerts, their refreshes).

    Never deletes a run holding one of the last seven non-refresh reports of any bundle (the
    alert baseline), nor a pending or running run. Returns how many runs were deleted
    (refreshes deleted with their run included). Raises ``ValueError`` for fewer than 1 day.
    """
    if retention_days < 1:
        raise ValueError(f"retention must be at least 1 day, not {retention_days}")
    cutoff = now - dt.timedelta(days=retention_days)
    ranked = Report.objects.filter(is_refresh=False).annotate(
        rank=Window(RowNumber(), partition_by=[F("bundle_id")], order_by=[F("created_at").desc(), F("id").desc()])
    )
    protected = list(ranked.filter(rank__lte=BASELINE_WINDOW).values_list("run_id", flat=True))
    doomed = (
        Run.objects.filter(created_at__lt=cutoff, status__in=[RunStatus.FINISHED, RunStatus.FAILED])
        .exclude(pk__in=protected)
        .exclude(refresh_of__in=protected)
    )
    ids = list(doomed.values_list("pk", flat=True))
    if not ids:
        return 0
    _, per_model = Run.objects.filter(pk__in=ids).delete()
    return per_model.get(Run._meta.label, 0)


def export_report(report: Report, fmt: str) -> tuple[str, str, str]:
    """``(content, content type, file name)`` of ``report`` exported as ``fmt``.

    ``fmt`` is ``json``, ``markdown``, ``junit`` or ``github`` (see :func:`export_document`).
    The file name is ``run-<run id>-<reference file name>``, e.g. ``run-7-live-report.junit.xml``;
    a run that is not a measurement names its lane instead of ``live`` (``run-7-scripted-report.md``,
    ``run-8-github-replay-summary.md``). The alerts are the reference's list
    (``Report.alert_documents``, repetitions included), not the de-duplicated ``Alert`` rows, so
    the bytes match the reference script's output. Raises ``ValueError`` for an unknown format.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}")
    content = export_document(report.document, fmt, alerts=list(report.alert_documents or []), comparison=report.comparison)
    content_type, _ = EXPORT_FORMATS[fmt]
    lane = RunLane.SCRIPTED if report.is_scripted else RunLane.REPLAY if report.is_refresh else RunLane.LIVE
    return content, content_type, f"run-{report.run_id}-{export_file_name(fmt, lane=lane)}"
