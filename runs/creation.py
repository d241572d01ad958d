"""A run's rows: create a run over a schedule (one pending execution per entry), claim it, and
count what it did (:class:`RunSummary`, for the commands, the pages and the API)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from django.db import IntegrityError, connection, transaction
from django.db.models import Count
from django.utils import timezone

from runs.models import Execution, Report, Run, RunLane, RunStatus, Trigger
from schedules.models import Schedule
from schedules.services import Selection, apply_selection

#: A run still to end: pending (not claimed yet) or running.
UNFINISHED = (RunStatus.PENDING, RunStatus.RUNNING)


@dataclass
class RunSummary:
    """Counts of one run, for the one-line summary, the pages and the API."""

    run_id: int
    executions: int
    by_classification: dict[str, int] = field(default_factory=dict)
    by_failure_code: dict[str, int] = field(default_factory=dict)
    spent_usd: Decimal = Decimal(0)
    cost_ceiling_usd: Decimal = Decimal(0)
    has_unpriced: bool = False
    stopped_at_ceiling: bool = False
    #: From the run's report, when it has one: scoreable and passed executions, and the number
    #: of alerts as the reference counts them (repetitions included).
    scoreable: int | None = None
    passed: int | None = None
    alerts: int | None = None
    #: The run's status when summarised; a summary of a run still executing says so.
    status: str = RunStatus.FINISHED

    def reference_line(self) -> str:
        """The nightly script's summary: ``P/S scoreable passed; I infrastructure, K skipped, A alert(s)``
        (empty when the run has no report)."""
        if self.scoreable is None:
            return ""
        counts = self.by_classification
        return (
            f"{self.passed}/{self.scoreable} scoreable passed; {counts.get('infrastructure_failure', 0)} infrastructure, "
            f"{counts.get('skipped', 0)} skipped, {self.alerts} alert(s)"
        )

    def line(self) -> str:
        """``run 3: 40 executions — 0 completed, 0 candidate failures, 0 infrastructure failures, 40 skipped (…); spent $0.00 of $12.00``,
        then, once the run is reported, `` · `` and :meth:`reference_line`."""
        counts = self.by_classification
        codes = ", ".join(f"{count} {code}" for code, count in sorted(self.by_failure_code.items()))
        spent = f"${self.spent_usd:.2f}" + (" + unpriced" if self.has_unpriced else "")
        return (
            f"run {self.run_id}: {self.executions} execution{'' if self.executions == 1 else 's'} — "
            f"{counts.get('completed', 0)} completed, {counts.get('candidate_failure', 0)} candidate failures, "
            f"{counts.get('infrastructure_failure', 0)} infrastructure failures, {counts.get('skipped', 0)} skipped"
            + (f" ({codes})" if codes else "")
            + f"; spent {spent} of ${self.cost_ceiling_usd:.2f}"
            + (" (stopped at the ceiling)" if self.stopped_at_ceiling else "")
            + (f" · {self.reference_line()}" if self.scoreable is not None else "")
            + (f" ({self.status}: these counts are not final yet)" if self.status in UNFINISHED else "")
        )


def summarize(run: Run, *, with_report: bool = False) -> RunSummary:
    """Counts per classification and failure code for ``run`` (one query: the executions counted
    per pair of the two, summed here); ``with_report`` adds its report's scoreable, passed and
    alert counts (one more query). Both mappings are ordered by key."""
    executions = 0
    by_classification: dict[str, int] = {}
    by_code: dict[str, int] = {}
    pairs = run.executions.order_by().values_list("classification", "failure_code").annotate(n=Count("id"))
    for classification, code, count in pairs.values_list("classification", "failure_code", "n"):
        executions += count
        if classification:
            by_classification[classification] = by_classification.get(classification, 0) + count
        if code:
            by_code[code] = by_code.get(code, 0) + count
    by_classification = dict(sorted(by_classification.items()))
    by_code = dict(sorted(by_code.items()))
    report = Report.objects.filter(run_id=run.pk).values_list("scoreable", "passed", "alert_documents").first() if with_report else None
    scoreable, passed, alert_documents = report if report is not None else (None, None, None)
    return RunSummary(
        scoreable=scoreable,
        passed=passed,
        alerts=len(alert_documents or []) if report is not None else None,
        run_id=run.pk,
        executions=executions,
        by_classification=by_classification,
        by_failure_code=by_code,
        spent_usd=run.spent_usd,
        cost_ceiling_usd=run.cost_ceiling_usd,
        has_unpriced=run.has_unpriced,
        stopped_at_ceiling=run.stopped_at_ceiling,
        status=run.status,
    )


def create_run(
    *,
    schedule: Schedule,
    cost_ceiling_usd: Decimal,
    selection: Selection = Selection(),
    trigger: str = Trigger.MANUAL,
    lane: str = RunLane.LIVE,
) -> tuple[Run, bool]:
    """A run over ``schedule`` (or its selection) with one pending execution per entry.

    ``lane`` is ``live`` (a measurement) or ``scripted`` (a scripted model: labelled, never history).
    Returns ``(run, created)``. A nightly run is unique per schedule: a second nightly delivery
    returns the existing run with ``created=False``. Raises ``ScheduleError`` for a bad selection.
    """
    entries = list(schedule.entries.order_by("position"))
    document = schedule.to_document(entries)
    if not selection.is_empty:
        document = apply_selection(document, selection)
    selected = {entry["executionId"] for entry in document["entries"]}
    if trigger == Trigger.NIGHTLY:
        existing = Run.objects.filter(schedule=schedule, trigger=Trigger.NIGHTLY).first()
        if existing is not None:
            return existing, False
    try:
        with transaction.atomic():
            run = Run(
                schedule=schedule,
                trigger=trigger,
                lane=lane,
                selection=selection.to_document(),
                cost_ceiling_usd=cost_ceiling_usd,
            )
            # The one-nightly-per-schedule constraint is left to the insert: a check here would
            # race with a simultaneous delivery, whose IntegrityError is handled below (docs/failure-modes.md B1).
            run.full_clean(exclude=["schedule"])
            run.save()
            _insert_executions(
                Execution.for_entry(run, entry, position) for position, entry in enumerate(e for e in entries if e.execution_id in selected)
            )
    except IntegrityError:
        existing = Run.objects.filter(schedule=schedule, trigger=Trigger.NIGHTLY).first()
        if existing is None:
            raise
        return existing, False
    return run, True


def _insert_executions(executions: Iterable[Execution]) -> None:
    """Insert a new run's executions, every column as the model builds it (defaults included), with
    one ``executemany`` of a plain ``INSERT`` (their primary keys are not read back).

    ``bulk_create`` would insert the same rows, but Django's SQLite backend allows 999 parameters a
    statement, so a night's 40 rows of 26 columns would take two statements there (one on
    PostgreSQL); this is one on both. Call inside the transaction that created the run."""
    meta = Execution._meta
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(field.column) for field in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    rows = [[field.get_db_prep_save(getattr(execution, field.attname), connection) for field in fields] for execution in executions]
    if rows:
        with connection.cursor() as cursor:
            cursor.executemany(sql, rows)


def claim_run(run: Run) -> bool:
    """Move a pending run to running; True only for the one caller whose update changed the row."""
    changed = Run.objects.filter(pk=run.pk, status=RunStatus.PENDING).update(status=RunStatus.RUNNING, started_at=timezone.now())
    if changed:
        run.refresh_from_db(fields=["status", "started_at"])
    return changed == 1
