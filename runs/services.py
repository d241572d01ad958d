"""Run services: create a run from a schedule, claim and execute its entries, record what happened.

The orchestration follows the reference ``executeRunnerLiveSchedule`` and nightly script
(upstream-spec §5.3–5.4), with evalhub's decisions:

* qualification first: a missing or empty required variable → ``skipped`` /
  ``qualification_environment_missing`` naming the variables (never their values);
* then the campaign ceiling: spent ≥ ceiling → ``skipped`` / ``campaign_cost_ceiling_reached``;
* otherwise the adapter's executor runs; a retryable :class:`InfrastructureError` is retried
  once, after the provider's ``Retry-After`` up to ``MAX_RETRY_AFTER_S`` (asked to wait longer,
  it is not retried); a final infrastructure error becomes an ``infrastructure_failure``
  observation with a redacted message; any other exception is recorded as an
  ``executor_crashed`` infrastructure failure and the run goes on (one broken entry must not
  lose the night); an observation the reference schema refuses (``validate_observation``, every
  problem listed) is an ``invalid_observation`` infrastructure failure;
* costs: failed attempts' billed costs count; an unknown cost (absent, NaN, infinite, negative,
  unbelievable) is counted at the candidate's ``maxCostUsd`` and flags the run ``has_unpriced``;
  non-finite metrics are stored as ``null`` (B5, B9);
* a finished run is then scored and reported (``runs.reporting``); a reporting failure is
  recorded in ``run.error`` and never undoes the executions;
* every text a run stores or logs is redacted: secret shapes, and the values of every
  candidate's required variables and every credential-named variable (B12);
* each attempt gets an :class:`ArtifactSink`; the raw trace an executor leaves there is stored
  with the attempt's row (``TraceArtifact``, same transaction), whether the attempt returned an
  observation, raised an infrastructure error or crashed — scrubbed once more with the run's
  secret values first (defence in depth: the recorder already scrubbed it);
* every execution is claimed with a conditional update before its executor is called and the
  run itself is claimed the same way, so a second delivery does nothing and spends nothing.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, F
from django.utils import timezone

from candidates.secrets import contains_secret, redact, redact_data, secret_kinds
from runs.executors import ExecutionRequest, InfrastructureError, executor_for
from runs.executors.base import ArtifactSink
from runs.harness.trace import rescrub_artifact
from runs.models import (
    Attempt,
    AttemptOutcome,
    Execution,
    ExecutionStatus,
    Report,
    Run,
    RunLane,
    RunStatus,
    TraceArtifact,
    Trigger,
)
from runs.observation_schema import validate_observation
from runs.observations import finite_json, missing_environment_message, unavailable_observation
from runs.reporting import finish_reporting, scoreable_observation
from schedules.models import Schedule, WorkflowCase
from schedules.services import Selection, iso_timestamp, schedule_for_night, select_schedule

logger = logging.getLogger(__name__)

#: Called after each execution with (done, total, execution).
ProgressCallback = Callable[[int, int, Execution], None]

#: The longest ``Retry-After`` a worker waits before its one retry; a provider asking for more
#: (an hour-long rate-limit window) gets no retry at all (known-failure-modes B4).
MAX_RETRY_AFTER_S = 30.0
#: One execution costing more than this is a unit mix-up, not a price: it is recorded as unknown.
MAX_BELIEVABLE_COST_USD = Decimal("1000000")
MICRO_DOLLAR = Decimal("0.000001")
#: How the orchestration waits before a retry (tests replace it).
sleep = time.sleep

#: Environment names whose values are credentials: an ``_``-delimited segment such as API_KEY,
#: TOKEN or SECRET, as the reference strips them from a provider's environment (upstream-spec §6).
CREDENTIAL_NAME = re.compile(
    r"(?:^|_)(?:API_KEY|ACCESS_KEY|AUTH|AUTHORIZATION|COOKIE|SECRET|SESSION|TOKEN|PASSWORD|CREDENTIALS?)(?:_|$)"
)


UNFINISHED = (RunStatus.PENDING, RunStatus.RUNNING)
#: A stored trace's digest (the ``trace_digest_sha256`` constraint, checked before the insert so a
#: malformed artifact is dropped instead of rolling back its attempt).
TRACE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


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
            f"run {self.run_id}: {self.executions} executions — "
            f"{counts.get('completed', 0)} completed, {counts.get('candidate_failure', 0)} candidate failures, "
            f"{counts.get('infrastructure_failure', 0)} infrastructure failures, {counts.get('skipped', 0)} skipped"
            + (f" ({codes})" if codes else "")
            + f"; spent {spent} of ${self.cost_ceiling_usd:.2f}"
            + (" (stopped at the ceiling)" if self.stopped_at_ceiling else "")
            + (f" · {self.reference_line()}" if self.scoreable is not None else "")
            + (f" ({self.status}: these counts are not final yet)" if self.status in UNFINISHED else "")
        )


def summarize(run: Run, *, with_report: bool = False) -> RunSummary:
    """Counts per classification and failure code for ``run`` (three queries); ``with_report``
    adds its report's scoreable, passed and alert counts (one more query)."""
    executions = run.executions.aggregate(total=Count("id"))["total"]
    by_classification = dict(
        run.executions.exclude(classification="").values_list("classification").annotate(n=Count("id")).values_list("classification", "n")
    )
    by_code = dict(
        run.executions.exclude(failure_code="").values_list("failure_code").annotate(n=Count("id")).values_list("failure_code", "n")
    )
    report = (
        Report.objects.filter(run_id=run.pk).values_list("scoreable", "passed", "alert_documents").first() if with_report else None
    )
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
        document = select_schedule(
            document, candidate_ids=selection.candidate_ids, case_ids=selection.case_ids, limit=selection.limit
        )
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
            # race with a simultaneous delivery, whose IntegrityError is handled below (B1).
            run.full_clean(exclude=["schedule"])
            run.save()
            Execution.objects.bulk_create(
                Execution(
                    run=run,
                    entry=entry,
                    position=position,
                    execution_id=entry.execution_id,
                    case_key=entry.case_key,
                    candidate_key=entry.candidate_key,
                    slot_key=entry.slot_key,
                    repetition=entry.repetition,
                )
                for position, entry in enumerate(e for e in entries if e.execution_id in selected)
            )
    except IntegrityError:
        existing = Run.objects.filter(schedule=schedule, trigger=Trigger.NIGHTLY).first()
        if existing is None:
            raise
        return existing, False
    return run, True


def claim_run(run: Run) -> bool:
    """Move a pending run to running; True only for the one caller whose update changed the row."""
    changed = Run.objects.filter(pk=run.pk, status=RunStatus.PENDING).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    if changed:
        run.refresh_from_db(fields=["status", "started_at"])
    return changed == 1


def execute_run(run: Run, *, environ: Mapping[str, str], progress: ProgressCallback | None = None) -> RunSummary:
    """Execute every pending execution of ``run`` in order, then mark it finished.

    ``environ`` is where required variables are looked up (the process environment in
    production); only the candidate's own variables are passed to its executor. A run another
    worker already claimed is left alone and its current summary returned (a second delivery
    does nothing and spends nothing).
    """
    if not claim_run(run):
        return summarize(run, with_report=True)
    return _execute_claimed(run, environ=environ, progress=progress)


def _execute_claimed(run: Run, *, environ: Mapping[str, str], progress: ProgressCallback | None) -> RunSummary:
    # The reference case document plus evalhub's task prompt, which live executors give the agent.
    cases = {case.key: {**case.to_document(), "prompt": case.prompt} for case in WorkflowCase.objects.all()}
    candidates = {candidate["id"]: candidate for candidate in run.schedule.candidates}
    executions = list(run.executions.select_related("entry").order_by("position"))
    secrets = secret_values(environ, [*candidates.values(), *(execution.entry.candidate for execution in executions)])
    total = len(executions)
    try:
        for done, execution in enumerate(executions, start=1):
            if _claim_execution(execution):
                _execute_one(run, execution, cases=cases, candidates=candidates, environ=environ, secrets=secrets)
            if progress is not None:
                progress(done, total, execution)
    except BaseException as exc:  # KeyboardInterrupt, worker timeout: leave an honest record
        Run.objects.filter(pk=run.pk).update(
            status=RunStatus.FAILED,
            finished_at=timezone.now(),
            error=redact(f"{type(exc).__name__}: {exc}", extra_values=secrets),
        )
        raise
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FINISHED, finished_at=timezone.now())
    run.refresh_from_db()
    # Score and report the finished run; a failure is recorded in run.error, never undoing it.
    finish_reporting(run, generated_at=iso_timestamp(timezone.now()), secrets=secrets)
    return summarize(run, with_report=True)


def _claim_execution(execution: Execution) -> bool:
    changed = Execution.objects.filter(pk=execution.pk, status=ExecutionStatus.PENDING).update(
        status=ExecutionStatus.RUNNING, started_at=timezone.now()
    )
    return changed == 1


def secret_values(environ: Mapping[str, str], candidates: list[Mapping[str, Any]]) -> list[str]:
    """The values to redact wherever a run writes text: every candidate's required variables and
    every credential-named variable (``CREDENTIAL_NAME``) present in ``environ``.

    Providers echo keys in error text and an executor may dump its whole environment, so a run
    redacts the values of all of them, not just the current candidate's (known-failure-modes B12).
    """
    names = {name for name in environ if CREDENTIAL_NAME.search(name.upper())}
    for candidate in candidates:
        required = (candidate or {}).get("qualification", {}).get("requiredEnvironment", [])
        if isinstance(required, list):
            names.update(name for name in required if isinstance(name, str))
    return [environ[name] for name in sorted(names) if environ.get(name)]


def _execute_one(
    run: Run,
    execution: Execution,
    *,
    cases: Mapping[str, dict[str, Any]],
    candidates: Mapping[str, dict[str, Any]],
    environ: Mapping[str, str],
    secrets: list[str],
) -> None:
    candidate = execution.entry.candidate or candidates.get(execution.candidate_key, {})
    case = cases.get(execution.case_key) or {"id": execution.case_key, "assertions": {}}
    started = time.monotonic()
    if contains_secret(candidate):
        # A row written around full_clean() (loaddata, a raw insert): refuse to run it (B8).
        observation = unavailable_observation(
            case=case,
            candidate=candidate,
            classification="skipped",
            code="candidate_configuration_invalid",
            category="qualification",
            retryable=False,
            message=f"the candidate's configuration holds secret-shaped data ({', '.join(secret_kinds(candidate))}); "
            "store environment variable names only, then run it again",
        )
        _record(execution, redact_data(observation, extra_values=secrets), cost=Decimal(0), cost_known=True, started=started)
        return
    names = list(candidate.get("qualification", {}).get("requiredEnvironment", []))
    missing = [name for name in names if not environ.get(name)]
    if missing:
        observation = unavailable_observation(
            case=case,
            candidate=candidate,
            classification="skipped",
            code="qualification_environment_missing",
            category="qualification",
            retryable=False,
            message=missing_environment_message(missing),
        )
        _record(execution, observation, cost=Decimal(0), cost_known=True, started=started)
        return
    run.refresh_from_db(fields=["spent_usd", "cost_ceiling_usd"])
    if run.spent_usd >= run.cost_ceiling_usd:
        observation = unavailable_observation(
            case=case,
            candidate=candidate,
            classification="skipped",
            code="campaign_cost_ceiling_reached",
            category="orchestration",
            retryable=False,
            message=f"campaign cost ceiling reached: spent ${run.spent_usd:.2f} of ${run.cost_ceiling_usd:.2f}",
        )
        Run.objects.filter(pk=run.pk).update(stopped_at_ceiling=True)
        _record(execution, observation, cost=Decimal(0), cost_known=True, started=started)
        return
    request_environment = {name: environ[name] for name in names}
    entry_document = execution.entry.to_document()
    attempt_cost = Decimal(0)
    for number in (1, 2):
        attempt_started = timezone.now()
        attempt_clock = time.monotonic()
        artifacts = ArtifactSink()
        request = ExecutionRequest(
            run_id=run.pk,
            entry=entry_document,
            candidate=candidate,
            case=case,
            environment=request_environment,
            attempt=number,
            artifacts=artifacts,
        )
        try:
            executor = executor_for(candidate.get("adapter", ""))
            observation = executor.execute(request)
        except InfrastructureError as error:
            cost = _finite_cost(error.cost_usd)
            attempt_cost += cost or Decimal(0)
            code = redact(str(error.code), extra_values=secrets)[:100] or "infrastructure_error"
            message = redact(str(error.message), extra_values=secrets)
            retryable = error.retryable is True
            _attempt(execution, number, AttemptOutcome.INFRASTRUCTURE_ERROR, attempt_started, attempt_clock,
                     code=code, retryable=retryable, message=message, cost=cost, artifacts=artifacts, secrets=secrets)
            wait = _retry_wait(error)
            if retryable and number == 1 and wait is not None:
                sleep(wait)
                continue
            if retryable and number == 1:
                message += f" (not retried: the provider asked to wait {error.retry_after_s:g} s, more than {MAX_RETRY_AFTER_S:g} s)"
            observation = unavailable_observation(
                case=case, candidate=candidate, classification="infrastructure_failure",
                code=code, category="provider", retryable=retryable, message=message,
            )
            _record(execution, observation, cost=attempt_cost, cost_known=True, started=started)
            return
        except Exception as exc:  # one broken entry must not lose the night
            message = redact(f"the executor crashed: {type(exc).__name__}: {exc}", extra_values=secrets)
            logger.warning("execution %s: %s", execution.execution_id, message)
            _attempt(execution, number, AttemptOutcome.CRASH, attempt_started, attempt_clock,
                     code="executor_crashed", retryable=False, message=message, cost=None,
                     artifacts=artifacts, secrets=secrets)
            observation = unavailable_observation(
                case=case, candidate=candidate, classification="infrastructure_failure",
                code="executor_crashed", category="orchestration", retryable=False, message=message,
            )
            _record(execution, observation, cost=attempt_cost, cost_known=True, started=started)
            return
        problems = stored_observation_problems(observation, secrets=secrets)
        if problems:
            message = redact("the executor returned an invalid observation: " + "; ".join(problems), extra_values=secrets)
            _attempt(execution, number, AttemptOutcome.CRASH, attempt_started, attempt_clock,
                     code="invalid_observation", retryable=False, message=message, cost=None,
                     artifacts=artifacts, secrets=secrets)
            observation = unavailable_observation(
                case=case, candidate=candidate, classification="infrastructure_failure",
                code="invalid_observation", category="orchestration", retryable=False, message=message,
            )
            _record(execution, observation, cost=attempt_cost, cost_known=True, started=started)
            return
        observation = _stored_form(observation, secrets)
        cost = _finite_cost(observation["metrics"].get("costUsd"))
        _attempt(execution, number, AttemptOutcome.OBSERVATION, attempt_started, attempt_clock,
                 code="", retryable=None, message="", cost=cost, artifacts=artifacts, secrets=secrets)
        if cost is None:
            # Unknown price: reserve the candidate's whole cost budget rather than count $0 (B5).
            reserve = _finite_cost(candidate.get("budget", {}).get("maxCostUsd")) or Decimal(0)
            _record(execution, observation, cost=attempt_cost + reserve, cost_known=False, started=started)
        else:
            _record(execution, observation, cost=attempt_cost + cost, cost_known=True, started=started)
        return


def _stored_form(observation: Any, secrets: list[str]) -> Any:
    """The observation as it is stored: redacted, non-finite numbers as null (B9)."""
    return finite_json(redact_data(observation, extra_values=secrets))


def stored_observation_problems(observation: Any, *, secrets: Sequence[str] = ()) -> list[str]:
    """Every problem with an observation an executor returned, against the reference schema
    (``validate_observation``); empty when it may be stored.

    Checked in its stored form (redacted, non-finite numbers as null) as the scorer reads it
    (``scoreable_observation``: unknown metrics and an unusable cost left out), so a NaN cost
    or latency is an unknown value, not a reason to lose the execution (B5, B9), while
    anything else the schema refuses is an invalid observation.
    """
    if not isinstance(observation, dict):
        return ["observation must be a JSON object"]
    try:
        stored = _stored_form(observation, list(secrets))
    except Exception:  # a value redaction cannot walk: report it as validation would
        return validate_observation(observation)
    return validate_observation(scoreable_observation(stored))


def _retry_wait(error: InfrastructureError) -> float | None:
    """Seconds to wait before retrying ``error`` (0 when the provider did not say), or ``None``
    when it asked for longer than ``MAX_RETRY_AFTER_S``."""
    asked = _finite_float(error.retry_after_s)
    if asked is None or asked <= 0:
        return 0.0
    return asked if asked <= MAX_RETRY_AFTER_S else None


def _finite_float(value: Any) -> float | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return float(value) if math.isfinite(value) else None


def _finite_cost(value: Any) -> Decimal | None:
    """A USD amount as Decimal rounded up to the micro-dollar the columns hold, or None when
    unknown: absent, not a number (text, a boolean), NaN, infinite, negative, or above
    ``MAX_BELIEVABLE_COST_USD`` (a unit mix-up such as nanodollars reported as dollars)."""
    if not isinstance(value, (int, float, Decimal)) or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    if not amount.is_finite() or amount < 0 or amount > MAX_BELIEVABLE_COST_USD:
        return None
    return amount.quantize(MICRO_DOLLAR, rounding=ROUND_CEILING)


def _attempt(
    execution, number, outcome, started_at, clock, *, code, retryable, message, cost,
    artifacts: ArtifactSink | None = None, secrets: Sequence[str] = (),
) -> None:
    """Record one attempt and, in the same transaction, the trace its executor left in ``artifacts``."""
    duration_ms = int((time.monotonic() - clock) * 1000)
    trace = _trace_row(execution, number, artifacts.trace if artifacts is not None else None, secrets)
    with transaction.atomic():
        Attempt.objects.create(
            execution=execution,
            number=number,
            outcome=outcome,
            error_code=code,
            retryable=retryable,
            message=message,
            cost_usd=cost,
            duration_ms=duration_ms,
            started_at=started_at,
            finished_at=timezone.now(),
        )
        if trace is not None:
            trace.save()


def _trace_row(execution: Execution, number: int, artifact: Any, secrets: Sequence[str]) -> TraceArtifact | None:
    """The unsaved ``TraceArtifact`` row for an attempt's recorded trace, or None when there is
    none or it cannot be read (logged: a broken trace must never lose the execution).

    The trace is scrubbed again with the run's secret values: the recorder scrubbed it with the
    candidate's own values, and the run knows every candidate's (B12)."""
    if artifact is None:
        return None
    try:
        clean, rescrubbed = rescrub_artifact(artifact, lambda text: redact(text, extra_values=secrets))
        row = TraceArtifact(
            execution=execution,
            attempt=number,
            data=bytes(clean.data),
            raw_bytes=int(clean.raw_bytes),
            stored_bytes=len(clean.data),
            frame_count=int(clean.frame_count),
            digest=str(clean.digest),
            truncated=bool(clean.truncated),
        )
        row.full_clean(exclude=["execution"], validate_unique=False, validate_constraints=False)
        if not TRACE_DIGEST.fullmatch(row.digest):
            raise ValueError("the trace digest is not sha256:<64 hex>")
    except Exception as exc:  # a malformed artifact from an executor: keep the attempt, drop the trace
        logger.warning(
            "execution %s attempt %s: the trace was not stored: %s",
            execution.execution_id, number, redact(f"{type(exc).__name__}: {exc}", extra_values=secrets),
        )
        return None
    if rescrubbed:
        logger.warning(
            "execution %s attempt %s: the trace held a secret value its recorder had not scrubbed; scrubbed before storing",
            execution.execution_id, number,
        )
    return row


def settlement_ms(observation: Mapping[str, Any]) -> int | None:
    """``metrics.settlementMs`` as a whole number of ms, or None when absent or not a finite non-negative number."""
    value = (observation.get("metrics") or {}).get("settlementMs")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return min(int(value), 2_147_483_647)


def _record(execution: Execution, observation: dict[str, Any], *, cost: Decimal, cost_known: bool, started: float) -> None:
    """Store the observation and add its cost to the run's spend, in one transaction."""
    failure = observation.get("failure") or {}
    with transaction.atomic():
        Execution.objects.filter(pk=execution.pk).update(
            status=ExecutionStatus.FINISHED,
            classification=observation["classification"],
            failure_code=str(failure.get("code", ""))[:100],
            failure_category=str(failure.get("category", ""))[:32],
            failure_retryable=failure.get("retryable") if isinstance(failure.get("retryable"), bool) else None,
            failure_message=redact(str(failure.get("message", ""))),
            observation=observation,
            settlement_ms=settlement_ms(observation),
            cost_usd=cost,
            cost_known=cost_known,
            duration_ms=int((time.monotonic() - started) * 1000),
            finished_at=timezone.now(),
        )
        updates: dict[str, Any] = {"spent_usd": F("spent_usd") + cost}
        if not cost_known:
            updates["has_unpriced"] = True
        Run.objects.filter(pk=execution.run_id).update(**updates)


@dataclass
class NightlyOutcome:
    """What one nightly delivery did: the schedule, the run, whether this call created them, and
    whether this call executed the run (False for a second delivery, which spends nothing)."""

    schedule: Schedule
    schedule_created: bool
    run: Run | None
    run_created: bool
    summary: RunSummary | None
    executed: bool = False


def start_nightly(
    *,
    seed: str,
    cost_ceiling_usd: Decimal,
    now: Any,
    environ: Mapping[str, str],
    execute: bool,
    rotation_day: Any = None,
    generated_at: str | None = None,
    selection: Selection = Selection(),
    progress: ProgressCallback | None = None,
) -> NightlyOutcome:
    """Build tonight's schedule (coverage first), save it, and with ``execute`` run it.

    The whole schedule is always built, coverage-checked and saved; ``selection`` narrows only
    the run. Without a selection the run is the night's one ``nightly`` run: a second delivery
    returns it untouched (nothing executed, nothing spent), unless the first delivery died before
    claiming it, in which case the run is still pending and this delivery claims and executes it.
    The claim is a conditional update, so two deliveries never both execute. A selection makes a
    ``manual`` run.
    Raises ``CoverageError`` (naming the failed invariants) or ``ScheduleError`` for bad input.
    """
    schedule, schedule_created = schedule_for_night(seed=seed, now=now, rotation_day=rotation_day, generated_at=generated_at)
    if not execute:
        if not selection.is_empty:
            select_schedule(
                schedule.to_document(), candidate_ids=selection.candidate_ids, case_ids=selection.case_ids, limit=selection.limit
            )
        return NightlyOutcome(schedule, schedule_created, None, False, None)
    trigger = Trigger.NIGHTLY if selection.is_empty else Trigger.MANUAL
    run, run_created = create_run(schedule=schedule, cost_ceiling_usd=cost_ceiling_usd, selection=selection, trigger=trigger)
    if not claim_run(run):
        return NightlyOutcome(schedule, schedule_created, run, run_created, summarize(run, with_report=True), executed=False)
    summary = _execute_claimed(run, environ=environ, progress=progress)
    return NightlyOutcome(schedule, schedule_created, run, run_created, summary, executed=True)
