"""Run services: create a run from a schedule, claim and execute its entries, record what happened.

The orchestration follows the reference ``executeRunnerLiveSchedule`` and nightly script
(its execution loop and retry wrapper), with evalhub's decisions:

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
  candidate's required variables and every credential-named variable (docs/failure-modes.md B12);
* each attempt gets an :class:`ArtifactSink`; the raw trace an executor leaves there is stored
  with the attempt's row (``TraceArtifact``, same transaction), whether the attempt returned an
  observation, raised an infrastructure error or crashed — scrubbed once more with the run's
  secret values first (defence in depth: the recorder already scrubbed it);
* every execution is claimed with a conditional update before its executor is called and the
  run itself is claimed the same way, so a second delivery does nothing and spends nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, connection, models, transaction
from django.db.models import Case, Count, Exists, F, Max, OuterRef, Q, Value, When
from django.db.models.functions import Coalesce
from django.db.models.sql.subqueries import UpdateQuery
from django.utils import timezone
from django_q.exceptions import TimeoutException

from evalhub.conf import evalhub_setting
from evalhub.credentials import credential_values
from evalhub.fields import EncodedDocument, storable_text
from evalhub.interrupts import terminate_as_interrupt
from evalhub.logging import RedactingStream
from evalhub.secrets import redact, redact_data, redactor
from evalhub.statements import Read, Write, insert_rows_sql, insert_sql, run_insert_statement, run_statement, update_sql
from runs.evaluation.observation_schema import (
    MAX_JSON_INTEGER,
    remember_valid_observation,
    validate_observation,
    validate_plain_observation,
)
from runs.evaluation.observations import finite_json, missing_environment_message, unavailable_observation
from runs.executors import ExecutionRequest, InfrastructureError, executor_for, remove_abandoned_work
from runs.executors.base import ArtifactSink
from runs.executors.candidate import Budget, CandidateSpec, CandidateSpecError, environment_names
from runs.executors.providers import ProviderConfig
from runs.executors.trace import rescrub_artifact
from runs.leases import (
    CANCELLED,
    LEASE_LOST,
    ExecutionInterrupted,
    Guard,
    db_retry,
    heartbeat_seconds,
    lease_seconds,
    lease_until,
    owner_id,
)
from runs.models import (
    Attempt,
    AttemptOutcome,
    Execution,
    ExecutionStatus,
    ProviderSlot,
    Report,
    RerunScope,
    Run,
    RunLane,
    RunStatus,
    TraceArtifact,
    Trigger,
)
from runs.reporting import finish_reporting, prepare_report_statements, scoreable_observation
from schedules.models import Schedule, WorkflowCase
from schedules.services import Selection, apply_selection, iso_timestamp, schedule_for_night, unsafe_candidate_problem

logger = logging.getLogger(__name__)

#: Called after each execution with (done, total, execution).
ProgressCallback = Callable[[int, int, Execution], None]

#: The longest ``Retry-After`` a worker waits before its one retry; a provider asking for more
#: (an hour-long rate-limit window) gets no retry at all (docs/failure-modes.md B4).
MAX_RETRY_AFTER_S = 30.0
#: One execution costing more than this is a unit mix-up, not a price: it is recorded as unknown.
MAX_BELIEVABLE_COST_USD = Decimal("1000000")
MICRO_DOLLAR = Decimal("0.000001")
#: How the orchestration waits before a retry (tests replace it).
sleep = time.sleep

#: Half a micro-dollar: amounts are whole micro-dollars, and SQLite compares decimals as floats,
#: so the ceiling comparison allows this much rounding and nothing more.
CEILING_TOLERANCE = Decimal("0.0000005")


UNFINISHED = (RunStatus.PENDING, RunStatus.RUNNING)
#: The chaos lane's injection point: run id → the fault-injecting executor its scratch runs use
#: instead of the adapter's (``runs.chaos``). Empty outside a chaos scenario.
FAULT_INJECTION: dict[int, Any] = {}
#: Executions whose dispatch is recorded by one update (the ids of one ``IN`` list).
DISPATCH_CHUNK = 500
#: Skipped executions settled by one ``executemany`` (their observations are held in memory until
#: then; a chunk bounds that).
SKIP_CHUNK = 100
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
            _INSERT_EXECUTIONS.insert_many(
                [
                    {
                        "run": run.pk,
                        "entry": entry.pk,
                        "position": position,
                        "execution_id": entry.execution_id,
                        "case_key": entry.case_key,
                        "candidate_key": entry.candidate_key,
                        "slot_key": entry.slot_key,
                        "repetition": entry.repetition,
                    }
                    for position, entry in enumerate(e for e in entries if e.execution_id in selected)
                ]
            )
    except IntegrityError:
        existing = Run.objects.filter(schedule=schedule, trigger=Trigger.NIGHTLY).first()
        if existing is None:
            raise
        return existing, False
    return run, True


def _insert_executions_sql(values: Mapping[str, Any], variant: Any) -> tuple[str, Sequence[Any]]:
    return insert_rows_sql(
        Execution(
            run_id=values["run"],
            entry_id=values["entry"],
            position=values["position"],
            execution_id=values["execution_id"],
            case_key=values["case_key"],
            candidate_key=values["candidate_key"],
            slot_key=values["slot_key"],
            repetition=values["repetition"],
        )
    )


#: Insert a new run's pending executions, one row per entry (every other column its default), as
#: ``bulk_create`` of the same rows would: the ORM prepared each of a row's 27 values every time.
_INSERT_EXECUTIONS = Write(
    "insert a run's executions",
    _insert_executions_sql,
    {
        name: Execution._meta.get_field(name)
        for name in ("run", "entry", "position", "execution_id", "case_key", "candidate_key", "slot_key", "repetition")
    },
)


def claim_run(run: Run) -> bool:
    """Move a pending run to running; True only for the one caller whose update changed the row."""
    changed = Run.objects.filter(pk=run.pk, status=RunStatus.PENDING).update(status=RunStatus.RUNNING, started_at=timezone.now())
    if changed:
        run.refresh_from_db(fields=["status", "started_at"])
    return changed == 1


def provider_overrides_document(providers: Mapping[str, ProviderConfig]) -> dict[str, dict[str, Any]]:
    """``{candidate id: ProviderConfig}`` as the JSON stored on the run (names and URLs only)."""
    return {str(key): value.to_document() for key, value in providers.items()}


def run_providers(run: Run) -> dict[str, ProviderConfig]:
    """The run's stored provider overrides as ``{candidate id: ProviderConfig}`` (the scripted
    lane's scripted model), so its executions use them on whichever worker runs them."""
    stored = run.provider_overrides or {}
    return {key: ProviderConfig.from_document(value) for key, value in stored.items() if isinstance(value, dict)}


def execute_run(
    run: Run,
    *,
    environ: Mapping[str, str],
    progress: ProgressCallback | None = None,
    providers: Mapping[str, ProviderConfig] | None = None,
) -> RunSummary:
    """Execute every pending execution of ``run`` in this process, in order, then finalise it.

    The same per-execution path as a worker's task (:func:`execute_execution`: claim under a
    lease, attempts, settlement), run in a loop here for the command line. ``environ`` is where
    required variables are looked up (the process environment in production); only the
    candidate's own variables are passed to its executor. ``providers`` maps a candidate id to the
    model provider profile its executions use instead of their own (the scripted lane points them
    at the scripted model); it is stored on the run, so an execution taken over by a worker uses
    it too. A run another process already claimed is left alone and its current summary returned
    (a second delivery does nothing and spends nothing).
    """
    if providers:
        Run.objects.filter(pk=run.pk).update(provider_overrides=provider_overrides_document(providers))
        run.provider_overrides = provider_overrides_document(providers)
    if not claim_run(run):
        return summarize(run, with_report=True)
    return _execute_claimed(run, environ=environ, progress=progress)


def _execute_claimed(run: Run, *, environ: Mapping[str, str], progress: ProgressCallback | None) -> RunSummary:
    # What every execution reads — its row and entry, the run and its schedule, the workflow
    # cases, the secret values — is read once here and given to :func:`execute_execution`, which
    # claims a pending execution by its first write (:func:`_execute_one`); anything else (not
    # pending any more, held under a lease) it reads again, as a worker's task does.
    executions = list(
        Execution.objects.filter(run_id=run.pk)
        .select_related("entry")
        .annotate(has_attempts=Exists(Attempt.objects.filter(execution_id=OuterRef("pk"))))
        .order_by("position")
    )
    prefetched = _Prefetched(cases={row.key: row for row in WorkflowCase.objects.filter(key__in={e.case_key for e in executions})})
    concurrency = bool(evalhub_setting("PROVIDER_CONCURRENCY"))
    owner = owner_id()
    total = len(executions)
    # Consecutive executions that run no executor (skipped before any attempt) are settled
    # together, in order, before the next execution that does run.
    skips: list[tuple[int, Execution, dict[str, Any]]] = []

    def settle_skips_together() -> set[int]:
        started = time.monotonic()
        settled: set[int] = set()
        for first in range(0, len(skips), SKIP_CHUNK):
            chunk = [(execution, observation) for _, execution, observation in skips[first : first + SKIP_CHUNK]]
            settled |= db_retry(
                lambda chunk=chunk: _settle_skips_together(chunk, owner=owner, started=started),
                what=f"settling {len(chunk)} skipped executions",
            )
        return settled

    def settle_skips() -> None:
        if not skips:
            return
        settled = settle_skips_together()
        for done, execution, _ in skips:
            if execution.pk not in settled:
                execute_execution(execution.pk, environ=environ, owner=owner, finalise=False)
            if progress is not None:
                progress(done, total, execution)
        skips.clear()

    try:
        with terminate_as_interrupt():
            for done, execution in enumerate(executions, start=1):
                execution.run = run
                if execution.status == ExecutionStatus.PENDING and not concurrency:
                    skip = None if execution.has_attempts else _skip_before_running(run, execution.entry.candidate or {}, environ)
                    if skip is not None:
                        skips.append((done, execution, _prefetched_unavailable(run, execution, environ, prefetched, skip)))
                        continue
                    settle_skips()
                    if not execution.has_attempts:
                        prefetched.qualified.add(execution.pk)
                    execute_execution(execution.pk, environ=environ, owner=owner, finalise=False, loaded=execution, prefetched=prefetched)
                else:
                    settle_skips()
                    if execution.status != ExecutionStatus.FINISHED:
                        execute_execution(execution.pk, environ=environ, owner=owner, finalise=False)
                if progress is not None:
                    progress(done, total, execution)
            settle_skips()
    except BaseException as exc:  # KeyboardInterrupt, SIGTERM, worker timeout: leave an honest record
        secrets = secret_values(environ, list(run.schedule.candidates))
        reason = storable_text(redact(f"{type(exc).__name__}: {exc}", extra_values=secrets))
        # Skips decided before the interruption are written as decided; what never started is
        # skipped, saying so, so that `rerun --skipped` can run it (left pending in a failed run,
        # nothing would ever run it, and it would count as not measured).
        with contextlib.suppress(Exception):
            if skips:
                settle_skips_together()
        with contextlib.suppress(Exception):
            skip_pending(
                run,
                code="run_interrupted",
                message=f"the process running the night stopped ({reason}) before this execution started: "
                f"re-run it with `manage.py rerun {run.pk} --skipped`",
                owner="interrupt",
            )
        Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, finished_at=timezone.now(), error=reason)
        raise
    finalise_run(run.pk, environ=environ)
    run.refresh_from_db()
    return summarize(run, with_report=True)


def _prefetched_unavailable(
    run: Run, execution: Execution, environ: Mapping[str, str], prefetched: _Prefetched, skip: _Skip
) -> dict[str, Any]:
    """The observation of a skipped execution of an in-process run, from what was read for the run."""
    candidate = execution.entry.candidate or {}
    secrets = prefetched.secrets.get(execution.candidate_key)
    if secrets is None:
        secrets = prefetched.secrets[execution.candidate_key] = secret_values(environ, [candidate, *(run.schedule.candidates or [])])
    row = prefetched.cases.get(execution.case_key)
    case = {**row.to_document(), "prompt": row.prompt} if row else {"id": execution.case_key, "assertions": {}}
    return _unavailable_document(run, case, candidate, secrets, skip)


def dispatch_run(run: Run) -> int:
    """Claim ``run`` and put one task per pending execution on the django-q2 queue, so every worker
    on every machine shares it; returns how many were queued (0 when another caller claimed it).

    A run without executions is finalised at once. The tasks are enqueued once the transaction
    that created them commits.
    """
    if not claim_run(run):
        return 0
    pks = list(run.executions.filter(status=ExecutionStatus.PENDING).order_by("position").values_list("pk", flat=True))
    dispatch_executions(pks)
    if not pks:
        finalise_run(run.pk)
    return len(pks)


def dispatch_execution(execution_pk: int) -> None:
    """Put ``runs.tasks.run_execution(execution_pk)`` on the queue (after the current transaction
    commits) and record when; the task name says which execution and which dispatch it is."""
    dispatch_executions([execution_pk])


def dispatch_executions(execution_pks: Sequence[int]) -> None:
    """:func:`dispatch_execution` for many executions at once: once the current transaction
    commits, one update records the dispatch of all of them and one query reads their task
    names, then one task per execution is queued, in the given order."""
    pks = list(execution_pks)

    def enqueue() -> None:
        from django_q.tasks import async_task

        now = timezone.now()
        for first in range(0, len(pks), DISPATCH_CHUNK):
            chunk = pks[first : first + DISPATCH_CHUNK]
            Execution.objects.filter(pk__in=chunk).update(dispatched_at=now, dispatches=F("dispatches") + 1)
            rows = {
                pk: rest for pk, *rest in Execution.objects.filter(pk__in=chunk).values_list("pk", "run_id", "execution_id", "dispatches")
            }
            for pk in chunk:
                if pk not in rows:
                    continue
                run_id, execution_id, dispatches = rows[pk]
                async_task(
                    "runs.tasks.run_execution",
                    pk,
                    task_name=f"run-{run_id}-{execution_id}-{dispatches}",
                    group=f"run-{run_id}",
                )

    if pks:
        transaction.on_commit(enqueue)


def secret_values(environ: Mapping[str, str], candidates: list[Mapping[str, Any]]) -> list[str]:
    """The values to redact wherever a run writes text: every candidate's required variables and
    every credential of ``environ`` (``evalhub.credentials.credential_values``: credential-named
    variables such as ``PGPASSWORD``, ``*_KEY``, ``*PASSPHRASE*``, and passwords inside URL values
    such as ``DATABASE_URL`` and ``REDIS_URL``).

    Providers echo keys in error text and an executor may dump its whole environment, so a run
    redacts the values of all of them, not just the current candidate's (docs/failure-modes.md B12).
    """
    names: set[str] = set()
    for candidate in candidates:
        # Read leniently (environment_names): a snapshot the spec refuses still has its values redacted.
        names.update(environment_names(candidate))
    return credential_values(environ, names=names)


def max_attempts(candidate: CandidateSpec) -> int:
    """The calls one execution of ``candidate`` may make: its budget's ``max_attempts``
    (``runs.executors.candidate.DEFAULT_MAX_ATTEMPTS``, the reference's one retry, without one)."""
    return candidate.budget.max_attempts


def reservation_usd(candidate: CandidateSpec) -> Decimal:
    """What one attempt of ``candidate`` may cost at worst, reserved against the ceiling before it
    runs: its budget's ``max_cost_usd`` (the live harness stops an attempt there), 0 without one."""
    return _finite_cost(candidate.budget.max_cost_usd) or Decimal(0)


def provider_key(candidate: CandidateSpec) -> str:
    """The model provider profile an execution of ``candidate`` talks to (what
    ``PROVIDER_CONCURRENCY`` limits): its qualification's profile, else its runtime's default."""
    if candidate.profile:
        return candidate.profile
    defaults = evalhub_setting("DEFAULT_PROVIDER_PROFILES") or {}
    return str(defaults.get(candidate.provider, candidate.provider))


# --- one execution ---------------------------------------------------------------------------------------


@dataclass
class _Call:
    """What one executor call produced, before it is recorded: an observation, an
    infrastructure error, a crash (any other exception, ``BaseException`` included), a lost
    worker (shutdown, timeout) or a cancellation."""

    outcome: str
    observation: Any = None
    error: InfrastructureError | None = None
    code: str = ""
    message: str = ""
    retryable: bool | None = None
    cost: Decimal | None = None
    interrupt: BaseException | None = None


def _call_executor(request: ExecutionRequest, adapter: str, secrets: list[str], guard: Guard | None = None) -> _Call:
    """Call the adapter's executor once, with stderr redacted, and classify what happened.

    Never raises, except ``KeyboardInterrupt`` (a person stopping the command), which is returned
    in ``interrupt`` after being recorded like a crash so the caller can re-raise it. Any other
    ``BaseException`` an executor lets out (``asyncio.CancelledError``, ``SystemExit``) is that
    execution's crash: one execution never kills the worker. An interruption by the lease's
    guard (cancel, shutdown, lease lost) and django-q2's task timeout are their own outcomes.
    """
    try:
        with redacted_stderr(secrets), guard.call() if guard is not None else contextlib.nullcontext():
            executor = FAULT_INJECTION.get(request.run_id) or executor_for(adapter)
            observation = executor.execute(request)
    except InfrastructureError as error:
        return _Call(
            AttemptOutcome.INFRASTRUCTURE_ERROR,
            error=error,
            code=redact(str(error.code), extra_values=secrets)[:100] or "infrastructure_error",
            message=redact(str(error.message), extra_values=secrets),
            retryable=error.retryable is True,
            cost=_finite_cost(error.cost_usd),
        )
    except ExecutionInterrupted as interrupted:
        if interrupted.reason == CANCELLED:
            return _Call(
                AttemptOutcome.CANCELLED,
                code="run_cancelled",
                message="the run was cancelled while this attempt ran; its runtime was stopped",
                retryable=False,
            )
        if interrupted.reason == LEASE_LOST:
            return _Call(
                AttemptOutcome.WORKER_LOST,
                code="lease_lost",
                message="this worker lost the execution's lease; another one took it over",
                retryable=True,
            )
        return _Call(
            AttemptOutcome.WORKER_LOST,
            code="worker_shutdown",
            message=f"the worker {owner_id()} was asked to stop while this attempt ran; its runtime was stopped and the execution handed back",
            retryable=True,
        )
    except TimeoutException as exc:
        return _Call(
            AttemptOutcome.WORKER_LOST,
            code="worker_timeout",
            message=redact(f"the attempt ran past the worker's task timeout: {exc}", extra_values=secrets),
            retryable=False,
        )
    except BaseException as exc:  # one broken entry must not lose the night, nor the worker
        message = redact(f"the executor crashed: {type(exc).__name__}: {exc}", extra_values=secrets)
        interrupt = exc if isinstance(exc, KeyboardInterrupt) else None
        return _Call(AttemptOutcome.CRASH, code="executor_crashed", message=message, retryable=False, interrupt=interrupt)
    return _Call(AttemptOutcome.OBSERVATION, observation=observation)


@contextlib.contextmanager
def redacted_stderr(secrets: Sequence[str]) -> Iterator[None]:
    """While the block runs, ``sys.stderr`` scrubs secret shapes, ``secrets`` and the process's
    credential values from every line written to it (an executor printing its environment or a
    traceback). Nested uses keep the outermost stream."""
    original = sys.stderr
    if isinstance(original, RedactingStream) or original is None:
        yield
        return
    stream = RedactingStream(original, secrets)
    sys.stderr = stream
    try:
        yield
    finally:
        if sys.stderr is stream:
            sys.stderr = original
        stream.flush()


class _Stale(Exception):
    """The attempt or execution being written is no longer this process's (the reaper took it)."""


def execute_execution(
    execution_pk: int,
    *,
    environ: Mapping[str, str],
    owner: str | None = None,
    finalise: bool = True,
    slot_wait_s: float | None = None,
    requeue: bool = False,
    loaded: Execution | None = None,
    prefetched: _Prefetched | None = None,
) -> str:
    """Run one execution of a running run, as a worker's task does: claim it under a lease, run
    it (qualification, the reservation against the ceiling, attempts), settle it, and with
    ``finalise`` finish and report the run when it was its last execution.

    Returns what happened, for the task row: ``settled``, ``handed back`` (the worker is shutting
    down; the execution is queued again), ``lost`` (the reaper took it over), ``already settled``,
    ``running elsewhere (host:pid)``, ``run not running`` or ``waiting for a provider slot``
    (re-queued when ``requeue``). An execution held under an expired lease is taken back first, so
    a redelivered task recovers what a dead worker left.

    ``loaded``: the execution as the caller read it (as :func:`_claimable` reads it: its entry, its
    run with the schedule, ``has_attempts``), not read again; ``prefetched``: what the executions
    of its run read alike (an in-process run reads them once, :func:`_execute_claimed`).
    """
    owner = owner or owner_id()
    execution = loaded if loaded is not None else _READ_CLAIMABLE.first(pk=execution_pk)
    if execution is None:
        return "no such execution"
    if not evalhub_setting("PROVIDER_CONCURRENCY") and _looks_claimable(execution):
        # The common case — no provider slot to wait for: the execution is claimed by the first
        # write its running makes (``claim``), conditional on it being pending and its run running
        # and not cancelled: the skip that settles it, or the transaction that reserves and opens
        # its first attempt. A claim that does not take (another worker, a cancel, an attempt made
        # since the read) writes nothing, and the execution is read again and looked at below.
        try:
            return _run_claimed(execution, environ=environ, owner=owner, slot=None, finalise=finalise, claim=True, prefetched=prefetched)
        except _NotClaimed:
            execution = _READ_CLAIMABLE.first(pk=execution_pk)
            if execution is None:
                return "no such execution"
    run = execution.run
    if execution.status == ExecutionStatus.RUNNING and execution.lease_expires_at and execution.lease_expires_at < timezone.now():
        take_back(execution.pk, now=timezone.now(), dispatch=False)
        execution.refresh_from_db()
    if execution.status == ExecutionStatus.FINISHED:
        return "already settled"
    if execution.status == ExecutionStatus.RUNNING:
        return f"running elsewhere ({execution.owner})"
    if run.status != RunStatus.RUNNING:
        return f"run not running ({run.status})"
    candidate = execution.entry.candidate or {}
    slot = _take_provider_slot(candidate, execution.pk, wait_s=slot_wait_s)
    if slot is False:
        if requeue:
            dispatch_execution(execution.pk)
        return "waiting for a provider slot"
    now = timezone.now()
    claimed = db_retry(
        lambda: Execution.objects.filter(pk=execution.pk, status=ExecutionStatus.PENDING).update(
            status=ExecutionStatus.RUNNING,
            owner=owner,
            lease_expires_at=lease_until(now),
            heartbeat_at=now,
            started_at=Coalesce(F("started_at"), now),
        ),
        what=f"claiming {execution.execution_id}",
    )
    if not claimed:
        _release_provider_slot(execution.pk)
        execution.refresh_from_db(fields=["status", "owner"])
        return "already settled" if execution.status == ExecutionStatus.FINISHED else f"running elsewhere ({execution.owner})"
    # Read before the claim, so another worker may have made attempts since: look them up.
    execution.status, execution.owner, execution.has_attempts = ExecutionStatus.RUNNING, owner, True
    return _run_claimed(execution, environ=environ, owner=owner, slot=slot, finalise=finalise, fresh=False)


def _claimable(execution_pk: int) -> Any:
    """The execution with what running it reads (entry, run, schedule) and whether it has attempts already."""
    return (
        Execution.objects.select_related("entry", "run", "run__schedule")
        .annotate(has_attempts=Exists(Attempt.objects.filter(execution_id=OuterRef("pk"))))
        .filter(pk=execution_pk)
    )


#: :func:`_claimable`'s execution by pk, compiled once per process (the read every task starts with).
_READ_CLAIMABLE = Read(
    "read an execution to run", lambda values, variant: _claimable(values["pk"])[:1], {"pk": Execution._meta.get_field("id")}
)
#: The workflow case an execution runs, by key.
_READ_CASE = Read(
    "read an execution's case",
    lambda values, variant: WorkflowCase.objects.filter(key=values["key"])[:1],
    {"key": WorkflowCase._meta.get_field("key")},
)
#: Whether a run has an execution pending or running (the check after every settled execution).
_READ_UNSETTLED = Read(
    "look for a run's unsettled execution",
    lambda values, variant: Execution.objects.filter(
        run_id=values["run"], status__in=[ExecutionStatus.PENDING, ExecutionStatus.RUNNING]
    ).only("pk")[:1],
    {"run": Execution._meta.get_field("id")},
)


class _NotClaimed(Exception):
    """A claiming write did not take: the execution is no longer pending, its run not running or
    cancelled, or an attempt was made since it was read. Nothing was written."""


def _looks_claimable(execution: Execution) -> bool:
    """Whether ``execution`` as read is pending in a running, uncancelled run (the claim decides)."""
    run = execution.run
    return execution.status == ExecutionStatus.PENDING and run.status == RunStatus.RUNNING and run.cancel_requested_at is None


def _claimable_rows(execution_pk: int) -> Any:
    """The execution, if it is pending and its run running and not cancelled: what a claim updates.

    ``Exists`` rather than ``run__status``: a join makes Django select the ids first, then update."""
    run_open = Run.objects.filter(pk=OuterRef("run_id"), status=RunStatus.RUNNING, cancel_requested_at__isnull=True)
    return Execution.objects.filter(Exists(run_open), pk=execution_pk, status=ExecutionStatus.PENDING)


@dataclass
class _Prefetched:
    """What the executions of one run read alike, read once for a run executed in this process:
    workflow case rows by key, and the secret values by candidate id (filled as they are met)."""

    cases: dict[str, WorkflowCase]
    secrets: dict[str, list[str]] = field(default_factory=dict)
    #: Executions the run's loop has just found to run (:func:`_skip_before_running` said None for
    #: the same run, candidate and environment), so running them does not ask again.
    qualified: set[int] = field(default_factory=set)


def _run_claimed(
    execution: Execution,
    *,
    environ: Mapping[str, str],
    owner: str,
    slot: bool | None,
    finalise: bool,
    fresh: bool = False,
    claim: bool = False,
    prefetched: _Prefetched | None = None,
) -> str:
    """Run an execution under its lease's heartbeat, give its provider slot back, and with
    ``finalise`` finish the run when it was its last execution. ``fresh``: the run was read after
    the claim (nothing to read again). ``claim``: the execution is still pending, and the first
    write of :func:`_execute_one` claims it (raising :class:`_NotClaimed`, nothing written, when
    it does not take); the heartbeat beats only once it is claimed."""
    run = execution.run

    def beat() -> str | None:
        return _heartbeat(execution.pk, run.pk, owner) if execution.status == ExecutionStatus.RUNNING else None

    guard = Guard(beat, interval=heartbeat_seconds())
    try:
        with guard.running():
            result = _execute_one(
                run, execution, environ=environ, owner=owner, guard=guard, fresh=fresh, claim=claim, prefetched=prefetched
            )
    finally:
        if slot is not False:
            _release_provider_slot(execution.pk, taken=slot)
    if finalise:
        finalise_run(run.pk, environ=environ)
    return result


def _heartbeat(execution_pk: int, run_pk: int, owner: str) -> str | None:
    """Extend the lease; the reason to stop, if any (``lease_lost``, ``cancelled``). Two queries."""
    now = timezone.now()
    until = lease_until(now)
    kept = Execution.objects.filter(pk=execution_pk, owner=owner, status=ExecutionStatus.RUNNING).update(
        lease_expires_at=until, heartbeat_at=now
    )
    if not kept:
        return LEASE_LOST
    ProviderSlot.objects.filter(execution_id=execution_pk).update(expires_at=until)
    if Run.objects.filter(pk=run_pk, cancel_requested_at__isnull=False).exists():
        return CANCELLED
    return None


def _take_provider_slot(candidate: Mapping[str, Any], execution_pk: int, *, wait_s: float | None) -> bool | None:
    """Take one of the provider's ``PROVIDER_CONCURRENCY`` slots for the execution: True when
    taken, None when the provider has no limit, False when none came free within ``wait_s``
    (default ``SLOT_WAIT_SECONDS``). A slot is taken with a conditional update: free, or held past
    its holder's lease."""
    try:
        key = provider_key(CandidateSpec.from_snapshot(candidate))
    except CandidateSpecError:
        return None  # refused when it runs (candidate_configuration_invalid): it talks to no provider
    limit = (evalhub_setting("PROVIDER_CONCURRENCY") or {}).get(key)
    if not limit:
        return None
    for number in range(limit):
        ProviderSlot.objects.get_or_create(provider=key, number=number)
    deadline = time.monotonic() + (float(evalhub_setting("SLOT_WAIT_SECONDS")) if wait_s is None else wait_s)
    while True:
        now = timezone.now()
        free = Q(execution__isnull=True) | Q(expires_at__lt=now) | Q(execution_id=execution_pk)
        for pk in ProviderSlot.objects.filter(provider=key, number__lt=limit).filter(free).values_list("pk", flat=True):
            if ProviderSlot.objects.filter(pk=pk).filter(free).update(execution_id=execution_pk, expires_at=lease_until(now)):
                return True
        if time.monotonic() >= deadline:
            return False
        sleep(min(1.0, max(deadline - time.monotonic(), 0.01)))


def _release_provider_slot(execution_pk: int, *, taken: bool | None = True) -> None:
    """Free the provider slot ``execution_pk`` holds. ``taken`` None: the provider has no limit and
    no slot was taken, so there is nothing to free (no query)."""
    if taken is None:
        return
    with contextlib.suppress(Exception):
        ProviderSlot.objects.filter(execution_id=execution_pk).update(execution=None, expires_at=None)


def _execute_one(
    run: Run,
    execution: Execution,
    *,
    environ: Mapping[str, str],
    owner: str,
    guard: Guard | None,
    fresh: bool = False,
    claim: bool = False,
    prefetched: _Prefetched | None = None,
) -> str:
    """Execute one claimed execution: cancellation, qualification, then up to the budget's
    ``maxAttempts`` executor calls, each reserved against the ceiling first (a retryable
    infrastructure error is retried once), and settle it. Each call's ``Attempt`` row is written,
    with its reservation, before the executor is called; the call's outcome, its cost, its trace
    and — when it is the last — the execution's result are written in one transaction afterwards.
    ``fresh``: ``run`` was read after the execution was claimed (its cancel flag is current).
    ``claim``: the execution is still pending; the first write claims it — a skip settles it in
    the same conditional update, an attempt is opened in the transaction that claims it and
    reserves its cost — and :class:`_NotClaimed` is raised (nothing written) when it does not take.
    ``prefetched``: the run's case rows and secret values, read once for the run."""
    if not fresh and not claim:
        run.refresh_from_db(fields=["cancel_requested_at", "provider_overrides"])
    candidate = execution.entry.candidate or {}
    if prefetched is not None:
        case_row = prefetched.cases.get(execution.case_key)
        secrets = prefetched.secrets.get(execution.candidate_key)
        if secrets is None:
            secrets = prefetched.secrets[execution.candidate_key] = secret_values(environ, [candidate, *(run.schedule.candidates or [])])
    else:
        case_row = _READ_CASE.first(key=execution.case_key)
        secrets = secret_values(environ, [candidate, *(run.schedule.candidates or [])])
    # The reference case document plus evalhub's task prompt, which live executors give the agent.
    case = {**case_row.to_document(), "prompt": case_row.prompt} if case_row else {"id": execution.case_key, "assertions": {}}
    started = time.monotonic()
    # Attempts an earlier worker made count: the budget bounds the execution, not one process.
    previous: list[tuple[Any, ...]] = []
    if getattr(execution, "has_attempts", True):
        previous = list(
            execution.attempts.order_by("number").values_list("outcome", "error_code", "message", "retryable", "cost_usd", "counted_usd")
        )
    # Whether an attempt so far counted a reservation for an unknown cost (the settled cost is then
    # not known): kept here, so settling needs no query for it.
    unpriced = any(cost is None and counted > 0 for *_, cost, counted in previous)

    def fallback(classification: str, code: str, category: str, retryable: bool, message: str) -> dict[str, Any]:
        """An observation that says why the execution has no measurement."""
        return _unavailable_document(run, case, candidate, secrets, (classification, code, category, retryable, message))

    def unavailable(classification: str, code: str, category: str, retryable: bool, message: str) -> str:
        """Settle the execution without calling its executor; one still to claim is claimed and
        settled by the same conditional update (no executor runs between the two)."""
        observation = fallback(classification, code, category, retryable, message)
        claiming = claim and execution.status == ExecutionStatus.PENDING

        def write() -> None:
            if claiming:
                _settle(execution, observation, started=started, owner=owner, cost_known=not unpriced, claim=True)
                return
            with transaction.atomic():
                _settle(execution, observation, started=started, owner=owner, cost_known=not unpriced)

        try:
            db_retry(write, what=f"settling {execution.execution_id}")
        except _Stale:
            if claiming:
                raise _NotClaimed from None
            return "lost"
        return "settled"

    qualified = prefetched is not None and execution.pk in prefetched.qualified
    # The snapshot is parsed here, once, and handed on typed (the run's loop qualified it already).
    checked = CandidateSpec.from_snapshot(candidate) if qualified else _qualify(run, candidate, environ)
    if not isinstance(checked, CandidateSpec):
        return unavailable(*checked)
    spec = checked
    request_environment = {name: environ[name] for name in spec.required_environment}
    entry_document = execution.entry.to_document()
    providers = run_providers(run)
    allowed = max_attempts(spec)
    reserve = reservation_usd(spec)
    retried = any(outcome == AttemptOutcome.INFRASTRUCTURE_ERROR and retryable for outcome, _, _, retryable, *_ in previous)
    number = len(previous)
    last: tuple[str, str, bool] | None = (previous[-1][1], previous[-1][2], bool(previous[-1][3])) if previous else None
    while True:
        number += 1
        if number > allowed:
            code, message, _ = last or ("attempts_exhausted", "", False)
            return unavailable(
                "infrastructure_failure", code, "provider", False, f"{message} (not retried: the budget allows {allowed} attempts)".strip()
            )
        claiming = claim and execution.status == ExecutionStatus.PENDING
        attempt = db_retry(
            lambda n=number, c=claiming: _begin_attempt(run, execution, n, reserve, owner, claim=c),
            what=f"starting {execution.execution_id}",
        )
        if claiming:
            execution.status, execution.owner = ExecutionStatus.RUNNING, owner
        if attempt is None:
            Run.objects.filter(pk=run.pk).update(stopped_at_ceiling=True)
            run.refresh_from_db(fields=["spent_usd", "reserved_usd", "cost_ceiling_usd"])
            ceiling = (
                f"campaign cost ceiling reached: spent ${run.spent_usd:.2f} and ${run.reserved_usd:.2f} reserved of "
                f"${run.cost_ceiling_usd:.2f}; an attempt may cost up to ${reserve:.2f}"
            )
            if last is None:
                return unavailable("skipped", "campaign_cost_ceiling_reached", "orchestration", False, ceiling)
            code, message, retryable = last
            return unavailable("infrastructure_failure", code, "provider", retryable, f"{message} (not retried: {ceiling})")
        artifacts = ArtifactSink()
        request = ExecutionRequest(
            run_id=run.pk,
            entry=entry_document,
            candidate=spec,
            case=case,
            environment=request_environment,
            attempt=number,
            artifacts=artifacts,
            provider=providers.get(execution.candidate_key),
        )
        call = _call_executor(request, spec.adapter, secrets, guard)
        settle: dict[str, Any] | None
        settle_text: EncodedDocument | None = None
        cost_known = True
        handed_back = False
        if call.outcome == AttemptOutcome.OBSERVATION:
            stored, problems, stored_text = _checked_stored_form(call.observation, secrets, case_ids=(execution.case_key,))
            if problems:
                message = redact("the executor returned an invalid observation: " + "; ".join(problems), extra_values=secrets)
                call = _Call(AttemptOutcome.CRASH, code="invalid_observation", message=message, retryable=False)
        if call.outcome == AttemptOutcome.OBSERVATION:
            settle, settle_text = stored, stored_text
            cost = _finite_cost(settle["metrics"].get("costUsd"))
            # Unknown price: count the attempt's whole reservation (its budget) rather than $0 (docs/failure-modes.md B5).
            call.cost, cost_known = cost, cost is not None
        elif call.outcome == AttemptOutcome.CRASH:
            if call.code == "executor_crashed":
                logger.warning("execution %s: %s", execution.execution_id, call.message)
            settle = fallback("infrastructure_failure", call.code, "orchestration", False, call.message)
        elif call.outcome == AttemptOutcome.CANCELLED:
            settle = fallback("skipped", "run_cancelled", "orchestration", False, call.message)
            cost_known = False
        elif call.outcome == AttemptOutcome.WORKER_LOST:
            cost_known = False
            if call.code == "lease_lost":
                _record_late(attempt, call, artifacts=artifacts, secrets=secrets)
                return "lost"
            handed_back = call.code == "worker_shutdown" and number < allowed
            settle = (
                None if handed_back else fallback("infrastructure_failure", call.code, "orchestration", bool(call.retryable), call.message)
            )
        else:  # an infrastructure error: retried once when it says it may pass, within maxAttempts
            error = call.error
            wait = _retry_wait(error)
            retry = call.retryable and not retried and number < allowed and wait is not None
            if call.retryable and not retry and not retried:
                if wait is None:
                    call.message += (
                        f" (not retried: the provider asked to wait {error.retry_after_s:g} s, more than {MAX_RETRY_AFTER_S:g} s)"
                    )
                elif number >= allowed:
                    call.message += f" (not retried: the budget allows {allowed} attempt{'s' if allowed != 1 else ''})"
            settle = None if retry else fallback("infrastructure_failure", call.code, "provider", bool(call.retryable), call.message)
        finish = functools.partial(
            _finish_attempt,
            attempt,
            call,
            artifacts=artifacts,
            secrets=secrets,
            settle=settle,
            settle_text=settle_text,
            cost_known=cost_known,
            started=started,
            owner=owner,
            hand_back=handed_back,
            unpriced_before=unpriced,
        )
        try:
            unpriced = db_retry(finish, what=f"recording {execution.execution_id} attempt {number}")
        except _Stale:
            _record_late(attempt, call, artifacts=artifacts, secrets=secrets)
            return "lost"
        if handed_back:
            dispatch_execution(execution.pk)
            return "handed back"
        if call.interrupt is not None:
            raise call.interrupt
        if settle is not None:
            return "settled"
        retried = True
        last = (call.code, call.message, bool(call.retryable))
        sleep(wait)


#: Why an execution is settled without calling its executor: (classification, code, category, retryable, message).
_Skip = tuple[str, str, str, bool, str]


def _skip_before_running(run: Run, candidate: Mapping[str, Any], environ: Mapping[str, str]) -> _Skip | None:
    """Why an execution of ``candidate`` (its snapshot) in ``run`` is skipped before any attempt,
    or None (see :func:`_qualify`)."""
    checked = _qualify(run, candidate, environ)
    return None if isinstance(checked, CandidateSpec) else checked


def _qualify(run: Run, candidate: Mapping[str, Any], environ: Mapping[str, str]) -> _Skip | CandidateSpec:
    """The candidate snapshot parsed, or why an execution of it in ``run`` is skipped before any
    attempt: the run was cancelled, the snapshot is unsafe or cannot be read, or a required
    variable is missing or empty."""
    if run.cancel_requested_at is not None:
        return ("skipped", "run_cancelled", "orchestration", False, "the run was cancelled before this execution started")
    problem = unsafe_candidate_problem(candidate)
    if problem is None:
        try:
            spec = CandidateSpec.from_snapshot(candidate)
        except CandidateSpecError as exc:
            problem = f"the candidate's configuration cannot be read ({exc}); fix it in the catalog, then run it again"
        else:
            missing = [name for name in spec.required_environment if not environ.get(name)]
            if missing:
                return ("skipped", "qualification_environment_missing", "qualification", False, missing_environment_message(missing))
            return spec
    # A row written around full_clean() (loaddata, a raw insert): refuse to run it (docs/failure-modes.md B8).
    return ("skipped", "candidate_configuration_invalid", "qualification", False, problem)


def _unavailable_document(
    run: Run, case: Mapping[str, Any], candidate: Mapping[str, Any], secrets: list[str], skip: _Skip
) -> dict[str, Any]:
    """The redacted observation of an execution that has no measurement, for ``skip``'s reason."""
    classification, code, category, retryable, message = skip
    observation = unavailable_observation(
        case=case,
        candidate=candidate,
        classification=classification,
        code=code,
        category=category,
        retryable=retryable,
        message=message,
        scripted=run.lane == RunLane.SCRIPTED,
    )
    return redact_data(observation, extra_values=secrets)


#: The columns a skipped execution's settlement sets from its observation (:func:`_skip_columns`).
_SKIP_COLUMNS = (
    "classification",
    "failure_code",
    "failure_category",
    "failure_retryable",
    "failure_message",
    "observation",
    "settlement_ms",
)


def _skip_columns(observation: dict[str, Any]) -> dict[str, Any]:
    """The columns :func:`_settle` sets from a skipped execution's observation."""
    failure = observation.get("failure") or {}
    return {
        "classification": observation["classification"],
        "failure_code": storable_text(str(failure.get("code", ""))[:100]),
        "failure_category": storable_text(str(failure.get("category", ""))[:32]),
        "failure_retryable": failure.get("retryable") if isinstance(failure.get("retryable"), bool) else None,
        "failure_message": storable_text(redact(str(failure.get("message", "")))),
        "observation": observation,
        "settlement_ms": settlement_ms(observation),
    }


#: Per database alias: the statement that claims and settles one skipped execution, its
#: parameters as compiled for a made-up execution, and which of them each execution fills in.
_SKIP_STATEMENTS: dict[str, tuple[str, list[Any], dict[int, str]]] = {}


def _skip_statement() -> tuple[str, list[Any], dict[int, str]]:
    """The ORM's own conditional update of :func:`_settle` (claim and settle: pending, run running
    and not cancelled), compiled once per process for two made-up executions whose every
    per-execution value differs: the parameters that differ between the two are the slots each
    execution fills in (``pk``, ``owner``, ``now``, ``duration_ms`` and :data:`_SKIP_COLUMNS`),
    prepared as the ORM prepares them."""
    known = _SKIP_STATEMENTS.get(connection.alias)
    if known is not None:
        return known

    def compiled(slots: Mapping[str, Any]) -> tuple[str, list[Any]]:
        run_open = Run.objects.filter(pk=OuterRef("run_id"), status=RunStatus.RUNNING, cancel_requested_at__isnull=True)
        query = Execution.objects.filter(Exists(run_open), pk=slots["pk"], status=ExecutionStatus.PENDING).query.chain(UpdateQuery)
        query.add_update_values(
            {
                "status": ExecutionStatus.FINISHED,
                "owner": slots["owner"],
                "started_at": Coalesce(F("started_at"), slots["now"]),
                "cost_usd": Coalesce(F("cost_usd"), Decimal(0)),
                "cost_known": True,
                "duration_ms": slots["duration_ms"],
                "finished_at": slots["now"],
                "lease_expires_at": None,
                **{name: slots[name] for name in _SKIP_COLUMNS},
            }
        )
        sql, params = query.get_compiler(connection=connection).as_sql()
        return sql, list(params)

    def made_up(tag: str, number: int) -> dict[str, Any]:
        return {
            **{name: f"\x00{name}-{tag}" for name in _SKIP_COLUMNS},
            "pk": -number,
            "owner": f"\x00owner-{tag}",
            "now": dt.datetime(2000, 1, number, tzinfo=dt.UTC),
            "duration_ms": 1_000_100 + number,
            "failure_retryable": number == 1,
            "observation": {tag: number},
            "settlement_ms": 1_000_000 + number,
        }

    one, two = made_up("a", 1), made_up("b", 2)
    (sql, first), (other_sql, second) = compiled(one), compiled(two)
    prepared = _skip_slot_values(one)
    slots: dict[int, str] = {}
    for index, (a, b) in enumerate(zip(first, second, strict=True)):
        if a != b:
            names = [name for name, value in prepared.items() if value == a and type(value) is type(a)]
            slots[index] = names[0] if len(names) == 1 else ""
    if sql != other_sql or set(slots.values()) != set(prepared):
        raise RuntimeError("the skipped executions' statement did not compile to one shape")  # never with Django's compiler
    _SKIP_STATEMENTS[connection.alias] = (sql, first, slots)
    return sql, first, slots


def _skip_slot_values(slots: Mapping[str, Any]) -> dict[str, Any]:
    """``slots`` (see :func:`_skip_statement`) prepared for the database as the ORM prepares them."""
    fields = Execution._meta
    prepared = {name: fields.get_field(name).get_db_prep_save(slots[name], connection) for name in _SKIP_COLUMNS}
    prepared["pk"] = slots["pk"]
    prepared["owner"] = fields.get_field("owner").get_db_prep_save(slots["owner"], connection)
    prepared["now"] = fields.get_field("finished_at").get_db_prep_save(slots["now"], connection)
    prepared["duration_ms"] = fields.get_field("duration_ms").get_db_prep_save(slots["duration_ms"], connection)
    return prepared


def _settle_skips_together(skips: Sequence[tuple[Execution, dict[str, Any]]], *, owner: str, started: float) -> set[int]:
    """Claim and settle pending executions that run no executor (each with its observation) with
    one statement executed for each of them (``executemany`` of :func:`_skip_statement`) instead of
    a statement compiled per execution: each still pending, its run running and not cancelled,
    the values :func:`_settle` writes for an execution without attempts (cost 0, known). Returns
    the pks it settled; any other was taken meanwhile (the caller looks)."""
    now = timezone.now()
    duration = int((time.monotonic() - started) * 1000)
    sql, template, slots = _skip_statement()
    rows = []
    for execution, observation in skips:
        values = _skip_slot_values({"pk": execution.pk, "owner": owner, "now": now, "duration_ms": duration, **_skip_columns(observation)})
        params = list(template)
        for index, name in slots.items():
            params[index] = values[name]
        rows.append(params)
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
        changed = cursor.rowcount
    pks = [execution.pk for execution, _ in skips]
    if changed == len(pks):
        return set(pks)
    return set(
        Execution.objects.filter(pk__in=pks, status=ExecutionStatus.FINISHED, owner=owner, finished_at=now).values_list("pk", flat=True)
    )


# --- the writes every execution makes, compiled once per process (evalhub.statements) ------------------

_execution_field = Execution._meta.get_field
_attempt_field = Attempt._meta.get_field
#: A ``Decimal`` inside an expression (``F("spent_usd") + amount``), prepared as the ORM prepares it there.
_AMOUNT = models.DecimalField()


def _claim_sql(values: Mapping[str, Any], variant: Any) -> tuple[str, Sequence[Any]]:
    return update_sql(
        _claimable_rows(values["pk"]),
        status=ExecutionStatus.RUNNING,
        owner=values["owner"],
        lease_expires_at=values["until"],
        heartbeat_at=values["now"],
        started_at=Coalesce(F("started_at"), values["now"]),
    )


#: Claim a pending execution of a running, uncancelled run under a lease (:func:`_claimable_rows`).
_CLAIM = Write(
    "claim an execution",
    _claim_sql,
    {
        "pk": _execution_field("id"),
        "owner": _execution_field("owner"),
        "until": _execution_field("lease_expires_at"),
        "now": _execution_field("heartbeat_at"),
    },
)


def _reserve_sql(values: Mapping[str, Any], variant: Any) -> tuple[str, Sequence[Any]]:
    fits = Run.objects.filter(pk=values["run"], cost_ceiling_usd__gte=F("spent_usd") + F("reserved_usd") + values["fit"])
    return update_sql(fits, reserved_usd=F("reserved_usd") + values["reserve"])


#: Reserve ``reserve`` against the run's ceiling when spent + reserved + ``fit`` ≤ ceiling.
_RESERVE = Write("reserve an attempt's cost", _reserve_sql, {"run": Run._meta.get_field("id"), "fit": _AMOUNT, "reserve": _AMOUNT})


def _open_attempt_sql(values: Mapping[str, Any], variant: Any) -> tuple[str, Sequence[Any]]:
    return insert_sql(
        Attempt(
            execution_id=values["execution"],
            number=values["number"],
            outcome=AttemptOutcome.RUNNING,
            reserved_usd=values["reserved"],
            owner=values["owner"],
            started_at=values["started"],
            finished_at=None,
        )
    )


#: Insert an attempt's row, outcome ``running``.
_OPEN_ATTEMPT = Write(
    "open an attempt",
    _open_attempt_sql,
    {
        "execution": _attempt_field("execution"),
        "number": _attempt_field("number"),
        "reserved": _attempt_field("reserved_usd"),
        "owner": _attempt_field("owner"),
        "started": _attempt_field("started_at"),
    },
)


def _finish_attempt_sql(values: Mapping[str, Any], variant: Any) -> tuple[str, Sequence[Any]]:
    return update_sql(
        Attempt.objects.filter(pk=values["pk"], outcome=AttemptOutcome.RUNNING),
        outcome=values["outcome"],
        error_code=values["code"],
        retryable=values["retryable"],
        message=values["message"],
        cost_usd=values["cost"],
        counted_usd=values["counted"],
        duration_ms=values["duration_ms"],
        finished_at=values["finished_at"],
    )


#: Finish a running attempt: its outcome and cost.
_FINISH_ATTEMPT = Write(
    "finish an attempt",
    _finish_attempt_sql,
    {
        "pk": _attempt_field("id"),
        "outcome": _attempt_field("outcome"),
        "code": _attempt_field("error_code"),
        "retryable": _attempt_field("retryable"),
        "message": _attempt_field("message"),
        "cost": _attempt_field("cost_usd"),
        "counted": _attempt_field("counted_usd"),
        "duration_ms": _attempt_field("duration_ms"),
        "finished_at": _attempt_field("finished_at"),
    },
)


def _spend_sql(values: Mapping[str, Any], unpriced: Any) -> tuple[str, Sequence[Any]]:
    updates: dict[str, Any] = {"spent_usd": F("spent_usd") + values["counted"], "reserved_usd": F("reserved_usd") - values["reserved"]}
    if unpriced:
        updates["has_unpriced"] = True
    return update_sql(Run.objects.filter(pk=values["run"]), **updates)


#: Turn an attempt's reservation into what it counts against the run (variant: it counted a
#: reservation for an unknown cost, which flags the run ``has_unpriced``).
_SPEND = Write("count an attempt's cost", _spend_sql, {"run": Run._meta.get_field("id"), "counted": _AMOUNT, "reserved": _AMOUNT})


def _settle_sql(values: Mapping[str, Any], claim: Any) -> tuple[str, Sequence[Any]]:
    claimed: dict[str, Any] = {}
    if claim:
        rows = _claimable_rows(values["pk"])
        claimed = {"owner": values["owner"], "started_at": Coalesce(F("started_at"), values["now"])}
    else:
        rows = Execution.objects.filter(pk=values["pk"], status=ExecutionStatus.RUNNING)
        if values["owner"] is not None:
            rows = rows.filter(owner=values["owner"])
    return update_sql(
        rows,
        **claimed,
        status=ExecutionStatus.FINISHED,
        **{name: values[name] for name in _SKIP_COLUMNS},
        cost_usd=Coalesce(F("cost_usd"), Decimal(0)) + values["add_cost"],
        cost_known=values["cost_known"],
        duration_ms=values["duration_ms"],
        finished_at=values["now"],
        lease_expires_at=None,
    )


#: Store an execution's result (variant: claim it in the same update, see :func:`_settle`; an
#: owner of None: any owner).
_SETTLE = Write(
    "settle an execution",
    _settle_sql,
    {
        "pk": _execution_field("id"),
        "owner": _execution_field("owner"),
        **{name: _execution_field(name) for name in _SKIP_COLUMNS},
        "add_cost": _AMOUNT,
        "cost_known": _execution_field("cost_known"),
        "duration_ms": _execution_field("duration_ms"),
        "now": _execution_field("finished_at"),
    },
)


def _begin_attempt(run: Run, execution: Execution, number: int, reserve: Decimal, owner: str, *, claim: bool = False) -> Attempt | None:
    """Reserve ``reserve`` against the run's ceiling and write the attempt's row (outcome
    ``running``), in one transaction committed before its executor is called; None when the
    reservation does not fit under the ceiling.

    The reservation is one conditional update — spent + reserved + ``reserve`` ≤ ceiling — so any
    number of workers reserving at once never hold more than the ceiling between them.

    ``claim``: the execution is still pending; the same transaction first claims it under a lease
    (a conditional update: pending, its run running and not cancelled), and raises
    :class:`_NotClaimed`, with nothing written, when the claim does not take or an attempt with
    this number exists already (one made since the execution was read). A claim whose
    reservation does not fit stays (None is returned: the caller settles the execution it holds).
    """
    now = timezone.now()
    # The statements are made before the transaction opens: it holds SQLite's write lock only while they run.
    claiming = _CLAIM.sql(pk=execution.pk, owner=owner, until=lease_until(now), now=now) if claim else None
    reserving = _RESERVE.sql(run=run.pk, fit=reserve - CEILING_TOLERANCE, reserve=reserve)
    opening = _OPEN_ATTEMPT.sql(execution=execution.pk, number=number, reserved=reserve, owner=owner, started=now)
    try:
        with transaction.atomic():
            if claiming is not None and not run_statement(claiming):
                raise _NotClaimed
            if not run_statement(reserving):
                return None
            attempt = Attempt(
                execution=execution,
                number=number,
                outcome=AttemptOutcome.RUNNING,
                reserved_usd=reserve,
                owner=owner,
                started_at=now,
                finished_at=None,
            )
            attempt.pk = run_insert_statement(opening)
            attempt._state.adding, attempt._state.db = False, connection.alias
            return attempt
    except IntegrityError:
        if claim:
            raise _NotClaimed from None
        raise


def _finish_attempt(
    attempt: Attempt,
    call: _Call,
    *,
    artifacts: ArtifactSink,
    secrets: Sequence[str],
    settle: dict[str, Any] | None,
    settle_text: EncodedDocument | None = None,
    started: float,
    owner: str,
    cost_known: bool = True,
    hand_back: bool = False,
    unpriced_before: bool = False,
) -> bool:
    """Finish ``attempt`` with what ``call`` produced, in one transaction: its outcome and cost,
    its trace, its reservation turned into what it counts against the run (its cost, or the whole
    reservation when the cost is unknown), and with ``settle`` the execution's result — or, with
    ``hand_back``, the execution put back to pending for another worker. Raises :class:`_Stale`
    (nothing written) when the attempt or the execution is no longer this process's.

    ``unpriced_before``: an earlier attempt of the execution counted a reservation for an unknown
    cost. Returns whether one has now (this attempt included). ``settle_text``: ``settle``'s JSON
    text, when known (see :func:`_settle`)."""
    now = timezone.now()
    duration_ms = int((now - attempt.started_at).total_seconds() * 1000)
    trace = _trace_row(attempt.execution, attempt.number, artifacts.trace, secrets)
    counted = call.cost if call.cost is not None else (attempt.reserved_usd if not cost_known else Decimal(0))
    unpriced = unpriced_before or (not cost_known and counted > 0)
    # The statements are made before the transaction opens (the observation's JSON encoded, the
    # compiled SQL filled in): it holds SQLite's write lock only while they run.
    finishing = _FINISH_ATTEMPT.sql(
        pk=attempt.pk,
        outcome=call.outcome,
        code=storable_text(call.code),
        retryable=call.retryable,
        message=storable_text(call.message),
        cost=call.cost,
        counted=counted,
        duration_ms=max(duration_ms, 0),
        finished_at=now,
    )
    spending = _SPEND.sql(not cost_known and counted > 0, run=attempt.execution.run_id, counted=counted, reserved=attempt.reserved_usd)
    # The attempt's cost is added by the settling update itself (one write of the row).
    settling = (
        None
        if settle is None
        else _settle_statement(
            attempt.execution, settle, started=started, owner=owner, cost_known=not unpriced, add_cost=counted, text=settle_text
        )
    )
    with transaction.atomic():
        if not run_statement(finishing):
            raise _Stale
        if trace is not None:
            trace.save()
        run_statement(spending)
        if settling is not None:
            _settle(attempt.execution, settle, started=started, owner=owner, statement=settling)
            return unpriced
        execution = Execution.objects.filter(pk=attempt.execution_id, status=ExecutionStatus.RUNNING, owner=owner)
        added = {"cost_usd": Coalesce(F("cost_usd"), Decimal(0)) + counted}
        if hand_back:
            added.update(status=ExecutionStatus.PENDING, owner="", lease_expires_at=None)
        if not execution.update(**added):
            raise _Stale
    return unpriced


def _record_late(attempt: Attempt, call: _Call, *, artifacts: ArtifactSink, secrets: Sequence[str]) -> None:
    """A call that returned after its lease was taken back: the reaper closed the attempt as
    ``worker_lost`` and counted its whole reservation. Keep what the call tells: a known cost
    replaces the estimate (the run's spend is corrected by the difference), the trace is stored,
    and the attempt's message says a late result arrived and was not used (another attempt owns
    the execution now)."""
    trace = _trace_row(attempt.execution, attempt.number, artifacts.trace, secrets)
    late = f" · a late result arrived ({call.outcome}{': ' + call.code if call.code else ''}) after the lease was taken back; not used"
    with transaction.atomic():
        row = Attempt.objects.select_for_update().filter(pk=attempt.pk).first()
        if row is None or row.outcome == AttemptOutcome.RUNNING:
            return
        updates: dict[str, Any] = {"message": storable_text(row.message + late)[:10000]}
        if call.cost is not None and row.cost_usd is None:
            delta = call.cost - row.counted_usd
            updates.update(cost_usd=call.cost, counted_usd=call.cost)
            Run.objects.filter(pk=attempt.execution.run_id).update(spent_usd=F("spent_usd") + delta)
            Execution.objects.filter(pk=attempt.execution_id).update(cost_usd=Coalesce(F("cost_usd"), Decimal(0)) + delta)
        Attempt.objects.filter(pk=row.pk).update(**updates)
        if trace is not None and not TraceArtifact.objects.filter(execution_id=attempt.execution_id, attempt=attempt.number).exists():
            trace.save()


def _settle(
    execution: Execution,
    observation: dict[str, Any],
    *,
    started: float,
    owner: str | None = None,
    cost_known: bool | None = None,
    add_cost: Decimal = Decimal(0),
    claim: bool = False,
    text: EncodedDocument | None = None,
    statement: tuple[str, list[Any]] | None = None,
) -> None:
    """Store the execution's result (call inside the transaction that counted its last cost).

    Only the owner of a running execution settles it (a conditional update; :class:`_Stale`
    otherwise). ``claim``: the execution is still pending (it is settled without calling its
    executor): the same update claims it for ``owner`` — pending, its run running and not
    cancelled, else :class:`_Stale` with nothing written. The execution's ``cost_usd`` is the sum of what its attempts counted (0 without
    attempts; ``add_cost``, USD, is the last attempt's, added by this update); its cost is known
    unless an attempt counted a reservation for an unknown cost (``cost_known``: the caller
    knows; None: looked up). ``text``: ``observation``'s JSON text as its column holds it, when
    the caller has it (:func:`_checked_stored_form`), written rather than encoded again.
    ``statement``: the update as :func:`_settle_statement` made it before the transaction opened,
    run as it is (the other arguments then say nothing more)."""
    if statement is None:
        if cost_known is None:
            cost_known = not Attempt.objects.filter(execution_id=execution.pk, cost_usd__isnull=True, counted_usd__gt=0).exists()
        statement = _settle_statement(
            execution, observation, started=started, owner=owner, cost_known=cost_known, add_cost=add_cost, claim=claim, text=text
        )
    if not run_statement(statement):
        raise _Stale


def _settle_statement(
    execution: Execution,
    observation: dict[str, Any],
    *,
    started: float,
    owner: str | None,
    cost_known: bool,
    add_cost: Decimal,
    claim: bool = False,
    text: EncodedDocument | None = None,
) -> tuple[str, list[Any]]:
    """:func:`_settle`'s update, made (``(sql, params)``) but not run: the settling transaction
    makes it before it opens. Nothing is read."""
    failure = observation.get("failure") or {}
    now = timezone.now()
    return _SETTLE.sql(
        claim,
        pk=execution.pk,
        owner=(owner or owner_id()) if claim else owner,
        classification=observation["classification"],
        failure_code=storable_text(str(failure.get("code", ""))[:100]),
        failure_category=storable_text(str(failure.get("category", ""))[:32]),
        failure_retryable=failure.get("retryable") if isinstance(failure.get("retryable"), bool) else None,
        # The observation's JSON text escapes a NUL; these columns hold it raw (evalhub/fields.py).
        failure_message=storable_text(redact(str(failure.get("message", "")))),
        observation=observation if text is None else text,
        settlement_ms=settlement_ms(observation),
        add_cost=add_cost,
        cost_known=cost_known,
        duration_ms=int((time.monotonic() - started) * 1000),
        now=now,
    )


def prepare_worker_statements() -> None:
    """Compile the statements a worker's executions make — a completed execution's, a skipped
    one's and the report's — for the current database, as a worker process starts
    (``runs.worker.on_worker_start``): its first executions then compile nothing (about 35 ms of
    CPU a worker process on the development machine, otherwise spent inside the first night it
    serves). A shape not listed here is still compiled at its first use. Raises as a compile does
    (:class:`RuntimeError`: a statement the ORM compiles otherwise than its slots say)."""
    for statement, variant, nulls in _WORKER_SHAPES:
        statement.prepare(variant, nulls)
    prepare_report_statements()


#: ``(statement, variant, slots that are None)`` of each statement a completed or skipped
#: execution makes, in the order an execution makes them (``tests/test_worker_statements.py`` checks
#: that running both compiles nothing more).
_WORKER_SHAPES: tuple[tuple[Write, Any, tuple[str, ...]], ...] = (
    (_READ_CLAIMABLE, (), ()),
    (_READ_CASE, (), ()),
    (_CLAIM, (), ()),
    (_RESERVE, (), ()),
    (_OPEN_ATTEMPT, (), ()),
    # A completed attempt has no retryable flag; its execution's result has no failure.
    (_FINISH_ATTEMPT, (), ("retryable",)),
    (_SPEND, False, ()),
    (_SETTLE, False, ("failure_retryable",)),
    # A skipped execution is claimed and settled by one update; its failure says whether it is retryable.
    (_SETTLE, True, ()),
    (_READ_UNSETTLED, (), ()),
)


# --- recovery: the reaper ---------------------------------------------------------------------------------


def take_back(execution_pk: int, *, now: dt.datetime, dispatch: bool = True) -> bool:
    """Take back an execution whose lease expired (its worker died, hung or was cut off): close
    its open attempts as ``worker_lost`` — an infrastructure failure whose unknown cost is counted
    at its reservation — and either put it back to pending (queued again with ``dispatch``) when
    its budget has attempts left and it was not lost before, or settle it as an
    ``infrastructure_failure`` / ``worker_lost`` (``skipped`` / ``run_cancelled`` when its run was
    cancelled). True when this call took it (a conditional update: two reapers never both do)."""
    row = (
        Execution.objects.filter(pk=execution_pk, status=ExecutionStatus.RUNNING, lease_expires_at__lt=now)
        .values_list("owner", "lease_expires_at")
        .first()
    )
    if row is None:
        return False
    previous_owner, expired = row
    reaper = f"reaper:{owner_id()}"
    with transaction.atomic():
        taken = Execution.objects.filter(
            pk=execution_pk, status=ExecutionStatus.RUNNING, owner=previous_owner, lease_expires_at=expired
        ).update(owner=reaper, lease_expires_at=lease_until(now))
        if not taken:
            return False
        execution = Execution.objects.select_related("entry", "run").get(pk=execution_pk)
        run = execution.run
        lost = Decimal(0)
        for attempt in Attempt.objects.filter(execution=execution, outcome=AttemptOutcome.RUNNING):
            Attempt.objects.filter(pk=attempt.pk).update(
                outcome=AttemptOutcome.WORKER_LOST,
                error_code="worker_lost",
                retryable=True,
                message=(
                    f"the worker {attempt.owner or previous_owner} stopped renewing its lease (expired {iso_timestamp(expired)}); "
                    f"the attempt's cost is unknown and counted at its reservation, ${attempt.reserved_usd:.2f}"
                ),
                counted_usd=attempt.reserved_usd,
                duration_ms=max(int((now - attempt.started_at).total_seconds() * 1000), 0),
                finished_at=now,
            )
            lost += attempt.reserved_usd
        updates: dict[str, Any] = {"spent_usd": F("spent_usd") + lost, "reserved_usd": F("reserved_usd") - lost}
        if lost > 0:
            updates["has_unpriced"] = True
        Run.objects.filter(pk=run.pk).update(**updates)
        Execution.objects.filter(pk=execution.pk).update(cost_usd=Coalesce(F("cost_usd"), Decimal(0)) + lost)
        ProviderSlot.objects.filter(execution_id=execution.pk).update(execution=None, expires_at=None)
        candidate = execution.entry.candidate or {}
        try:
            allowed = max_attempts(CandidateSpec.from_snapshot(candidate))
        except CandidateSpecError:  # refused when it runs (candidate_configuration_invalid); a bound is all this needs
            allowed = Budget().max_attempts
        outcomes = list(execution.attempts.values_list("outcome", flat=True))
        lost_count = outcomes.count(AttemptOutcome.WORKER_LOST)
        case = {"id": execution.case_key, "assertions": {}}
        if run.cancel_requested_at is not None:
            observation = unavailable_observation(
                case=case,
                candidate=candidate,
                classification="skipped",
                code="run_cancelled",
                category="orchestration",
                retryable=False,
                message="the run was cancelled while this execution's worker was lost",
                scripted=run.lane == RunLane.SCRIPTED,
            )
        elif len(outcomes) < allowed and lost_count <= 1 and run.status == RunStatus.RUNNING:
            Execution.objects.filter(pk=execution.pk).update(status=ExecutionStatus.PENDING, owner="", lease_expires_at=None)
            if dispatch:
                dispatch_execution(execution.pk)
            return True
        else:
            observation = unavailable_observation(
                case=case,
                candidate=candidate,
                classification="infrastructure_failure",
                code="worker_lost",
                category="orchestration",
                retryable=True,
                message=f"the worker running this execution was lost ({lost_count} time{'s' if lost_count != 1 else ''}); "
                f"{len(outcomes)} of {allowed} attempts used",
                scripted=run.lane == RunLane.SCRIPTED,
            )
        _settle(execution, redact_data(observation), started=time.monotonic())
    return True


@dataclass
class ReapSummary:
    """What one pass of the reaper did (counts), for the task row."""

    taken_back: int = 0
    finalised: int = 0
    redispatched: int = 0
    reported: int = 0

    def line(self) -> str:
        return (
            f"reaper: {self.taken_back} execution(s) taken back, {self.finalised} run(s) finalised, "
            f"{self.redispatched} execution(s) queued again, {self.reported} report(s) written"
        )


def reap(*, now: dt.datetime | None = None, environ: Mapping[str, str] | None = None, dispatch: bool = True) -> ReapSummary:
    """Recover whatever died: take back every execution whose lease expired (:func:`take_back`);
    finalise every running run whose executions have all settled; queue again the pending
    executions of a running run nothing has touched for ``REDISPATCH_SECONDS`` (a broker that
    lost their tasks); and report a finished run whose finaliser died before reporting it.
    Runs as a periodic task and when a worker starts; safe to run anywhere, any number of times."""
    now = now or timezone.now()
    summary = ReapSummary()
    for pk in Execution.objects.filter(status=ExecutionStatus.RUNNING, lease_expires_at__lt=now).values_list("pk", flat=True):
        summary.taken_back += db_retry(lambda pk=pk: take_back(pk, now=now, dispatch=dispatch), what="taking back an execution")
    open_runs = Run.objects.filter(status=RunStatus.RUNNING)
    for run_pk in open_runs.exclude(executions__status__in=[ExecutionStatus.PENDING, ExecutionStatus.RUNNING]).values_list("pk", flat=True):
        summary.finalised += finalise_run(run_pk, environ=environ)
    if dispatch:
        quiet = now - dt.timedelta(seconds=float(evalhub_setting("REDISPATCH_SECONDS")))
        for run in open_runs.filter(started_at__lt=quiet).exclude(executions__status=ExecutionStatus.RUNNING):
            touched = run.executions.aggregate(latest=Max("heartbeat_at"), dispatched=Max("dispatched_at"), finished=Max("finished_at"))
            if any(moment is not None and moment >= quiet for moment in touched.values()):
                continue
            for pk in run.executions.filter(status=ExecutionStatus.PENDING).values_list("pk", flat=True):
                dispatch_execution(pk)
                summary.redispatched += 1
    stale = now - dt.timedelta(seconds=float(evalhub_setting("LEASE_SECONDS")))
    unreported = Run.objects.filter(
        status__in=[RunStatus.FINISHED, RunStatus.CANCELLED], finished_at__lt=stale, report__isnull=True, error=""
    ).exclude(lane=RunLane.CHAOS)
    for run in unreported:
        summary.reported += (
            finish_reporting(
                run, generated_at=iso_timestamp(now), secrets=secret_values(environ or os.environ, list(run.schedule.candidates))
            )
            is not None
        )
    return summary


def recover_before_executing(*, environ: Mapping[str, str] | None = None) -> ReapSummary:
    """What a command that executes runs in its own process (``nightly --execute``, ``demo_live``,
    ``rerun``) does first, as a worker does when it starts (``runs.worker``): take back the
    executions whose lease expired — a ``kill -9`` of an earlier such command leaves its run
    ``running`` — without queueing them (this process, or the take-over of an abandoned run,
    executes them; a worker's reaper queues a worker's again after ``REDISPATCH_SECONDS``), and
    remove what executions of killed processes left behind (:func:`runs.executors.remove_abandoned_work`:
    the live executors' folders)."""
    summary = reap(environ=environ, dispatch=False)
    for folder in remove_abandoned_work():
        logger.warning("removed %s, left behind by a process that no longer runs", folder)
    if summary.taken_back or summary.finalised:
        logger.warning("%s", summary.line())
    return summary


#: When this process last looked for expired leases after a task (``time.monotonic()``).
_last_reap_check: float | None = None


def reap_if_needed(*, environ: Mapping[str, str] | None = None) -> ReapSummary | None:
    """Run the reaper when some execution's lease has expired (one indexed query otherwise), at
    most every ``REAP_CHECK_SECONDS`` per process (no query in between; 0: every call).

    Workers call it after each task, so a dead worker's execution is taken back within
    ``REAP_CHECK_SECONDS`` and one task of its lease expiring, not at the next periodic pass. A
    query after every task was a tenth of a no-op execution's own cost, for a lease measured in
    tens of seconds."""
    global _last_reap_check
    now = time.monotonic()
    every = float(evalhub_setting("REAP_CHECK_SECONDS"))
    if _last_reap_check is not None and every > 0 and now - _last_reap_check < every:
        return None
    _last_reap_check = now
    if not Execution.objects.filter(status=ExecutionStatus.RUNNING, lease_expires_at__lt=timezone.now()).exists():
        return None
    return reap(environ=environ)


def finalise_run(run_pk: int, *, environ: Mapping[str, str] | None = None) -> bool:
    """Finish and report a running run once its last execution settled: True only for the one
    caller whose conditional update finished it (it then scores and reports it; a chaos-lane run
    is never reported). A run with pending or running executions is left alone."""
    if _READ_UNSETTLED.found(run=run_pk):
        return False
    # Cancelled or finished, as the row says when it is updated (one statement, no race with a cancel).
    status = Case(When(cancel_requested_at__isnull=False, then=Value(RunStatus.CANCELLED)), default=Value(RunStatus.FINISHED))
    if not db_retry(
        lambda: Run.objects.filter(pk=run_pk, status=RunStatus.RUNNING).update(status=status, finished_at=timezone.now()),
        what=f"finishing run {run_pk}",
    ):
        return False
    run = Run.objects.select_related("schedule").get(pk=run_pk)
    if run.lane != RunLane.CHAOS:
        # Score and report the finished run; a failure is recorded in run.error, never undoing it.
        secrets = secret_values(environ if environ is not None else os.environ, list(run.schedule.candidates))
        finish_reporting(run, generated_at=iso_timestamp(timezone.now()), secrets=secrets)
    return True


# --- cancel and re-run --------------------------------------------------------------------------------------


class RunActionError(Exception):
    """A cancel or re-run that cannot be done; the message says why and what to do."""


def cancel_run(run: Run) -> int:
    """Cancel ``run``: its pending executions are settled as ``skipped`` / ``run_cancelled`` at once;
    its running ones are interrupted by their workers' heartbeats (their runtimes' process groups
    killed) and settled the same way; the run then ends ``cancelled`` and is reported.

    Returns how many pending executions were skipped. Raises :class:`RunActionError` for a run
    that already ended.
    """
    now = timezone.now()
    if run.status not in UNFINISHED:
        raise RunActionError(f"run {run.pk} is {run.status}: only a pending or running run can be cancelled")
    Run.objects.filter(pk=run.pk, cancel_requested_at__isnull=True).update(cancel_requested_at=now)
    Run.objects.filter(pk=run.pk, status=RunStatus.PENDING).update(status=RunStatus.RUNNING, started_at=now)
    skipped = skip_pending(run, code="run_cancelled", message="the run was cancelled before this execution started", owner="cancel")
    finalise_run(run.pk)
    run.refresh_from_db()
    return skipped


def skip_pending(run: Run, *, code: str, message: str, owner: str) -> int:
    """Settle every pending execution of ``run`` as ``skipped`` / ``code`` (category
    orchestration, not retryable) saying ``message``; each by a conditional claim, so one a
    worker took meanwhile is left to it. Returns how many were skipped (they can be re-run:
    :func:`rerun_run` with scope ``skipped``)."""
    skipped = 0
    for execution in run.executions.select_related("entry").filter(status=ExecutionStatus.PENDING):
        observation = unavailable_observation(
            case={"id": execution.case_key, "assertions": {}},
            candidate=execution.entry.candidate or {},
            classification="skipped",
            code=code,
            category="orchestration",
            retryable=False,
            message=message,
            scripted=run.lane == RunLane.SCRIPTED,
        )
        with transaction.atomic():
            if Execution.objects.filter(pk=execution.pk, status=ExecutionStatus.PENDING).update(
                status=ExecutionStatus.RUNNING, owner=owner
            ):
                _settle(execution, redact_data(observation), started=time.monotonic(), owner=owner)
                skipped += 1
    return skipped


#: Which classifications each re-run scope repeats.
RERUN_CLASSIFICATIONS = {
    RerunScope.FAILED: ("candidate_failure", "infrastructure_failure"),
    RerunScope.INFRASTRUCTURE: ("infrastructure_failure",),
    RerunScope.SKIPPED: ("skipped",),
}


def rerun_run(run: Run, *, scope: str = RerunScope.FAILED, trigger: str = Trigger.MANUAL) -> Run:
    """A new pending run repeating the failed executions of ``run`` — ``scope`` ``failed``
    (candidate or infrastructure failures, and completed executions whose scorecard did not pass)
    or ``infrastructure`` (infrastructure failures only) — or its skipped executions (``scope``
    ``skipped``: missing credentials, the ceiling, a cancel, once the cause is fixed) — with the same schedule, lane, ceiling
    and execution ids, pointing at ``run`` (``repeat_of``). The original keeps its history.

    Raises :class:`RunActionError` when ``run`` has not ended, the scope is unknown, an earlier
    re-run of it is still pending or running (the ``run_one_unfinished_rerun_per_run`` constraint
    decides between two at once), or nothing in it failed in that scope.
    """
    if scope not in RERUN_CLASSIFICATIONS:
        raise RunActionError(f"unknown re-run scope {scope!r}: use one of {', '.join(RERUN_CLASSIFICATIONS)}")
    if run.status in UNFINISHED:
        raise RunActionError(f"run {run.pk} is still {run.status}: wait for it to end (or cancel it) before re-running it")
    if run.lane == RunLane.REPLAY:
        raise RunActionError(
            f"run {run.pk} is a refresh (replay lane) of run {run.refresh_of_id}: re-run run {run.refresh_of_id} instead "
            f"(`manage.py rerun {run.refresh_of_id}`), then refresh that re-run"
        )
    if run.lane == RunLane.CHAOS:
        raise RunActionError(f"run {run.pk} is a chaos-lane run: run the chaos lane again instead (`manage.py chaos`)")
    if run.lane == RunLane.SCRIPTED:
        # Its scripted model lived in the process that ran it (demo_live): elsewhere its address is dead, or someone else's.
        raise RunActionError(
            f"run {run.pk} is a scripted-lane run: its scripted model is gone with the process that ran it; run `manage.py demo_live` again"
        )
    earlier = _unfinished_rerun_problem(run)
    if earlier:
        raise RunActionError(earlier)
    failed = Q(classification__in=RERUN_CLASSIFICATIONS[scope])
    if scope == RerunScope.FAILED:
        failed |= Q(classification="completed", scorecard__passed=False)
    chosen = list(run.executions.filter(failed).order_by("position").values_list("execution_id", flat=True))
    if not chosen:
        skipped = run.executions.filter(classification="skipped").count() if scope != RerunScope.SKIPPED else 0
        hint = (
            f"; it has {skipped} skipped execution(s): re-run those with scope skipped (`manage.py rerun {run.pk} --skipped`)"
            if skipped
            else ""
        )
        raise RunActionError(f"run {run.pk} has no {RerunScope(scope).label} to re-run{hint}")
    selection = {**(run.selection or {"candidateIds": [], "caseIds": [], "limit": None}), "executionIds": chosen}
    try:
        rerun = _create_rerun(run, scope=scope, trigger=trigger, selection=selection, chosen=chosen)
    except IntegrityError:
        # Two re-runs at once (a double-click): the one-unfinished-re-run constraint let one in.
        problem = _unfinished_rerun_problem(run)
        if problem is None:
            raise
        raise RunActionError(problem) from None
    return rerun


def _unfinished_rerun_problem(run: Run) -> str | None:
    """Why ``run`` cannot be re-run now — an earlier re-run of it is still pending or running
    (the ``run_one_unfinished_rerun_per_run`` constraint) — or ``None``."""
    earlier = run.reruns.filter(status__in=UNFINISHED).order_by("pk").values_list("pk", "status").first()
    if earlier is None:
        return None
    return (
        f"run {run.pk} is already being re-run by run {earlier[0]}, which is still {earlier[1]}: wait for it to end "
        f"(or cancel it: `manage.py cancel_run {earlier[0]}`) before re-running run {run.pk} again"
    )


def _create_rerun(run: Run, *, scope: str, trigger: str, selection: dict[str, Any], chosen: list[str]) -> Run:
    """The re-run row and its pending executions, in one transaction (see :func:`rerun_run`)."""
    with transaction.atomic():
        rerun = Run(
            schedule=run.schedule,
            trigger=trigger,
            lane=run.lane,
            selection=selection,
            cost_ceiling_usd=run.cost_ceiling_usd,
            repeat_of=run,
            repeat_scope=scope,
            provider_overrides=run.provider_overrides,
        )
        rerun.full_clean(exclude=["schedule", "repeat_of"])
        rerun.save()
        entries = {entry.execution_id: entry for entry in run.schedule.entries.filter(execution_id__in=chosen)}
        Execution.objects.bulk_create(
            Execution(
                run=rerun,
                entry=entries[execution_id],
                position=position,
                execution_id=execution_id,
                case_key=entries[execution_id].case_key,
                candidate_key=entries[execution_id].candidate_key,
                slot_key=entries[execution_id].slot_key,
                repetition=entries[execution_id].repetition,
            )
            for position, execution_id in enumerate(chosen)
        )
    return rerun


def _stored_form(observation: Any, secrets: list[str]) -> Any:
    """The observation as it is stored: redacted, non-finite numbers as null (docs/failure-modes.md B9).

    ``finite_json(redact_data(observation, extra_values=secrets))``, in one walk for a document
    of plain JSON values (what executors return); anything else — a tuple, a key that is not
    text, two keys redacted to the same text (``redact_data`` tells them apart), a value of a
    subclass, an int beyond ±1e308, a document nested deeper than ``_PLAIN_DEPTH`` — takes the
    two walks."""
    return _plain_or_stored_form(observation, secrets)[0]


def _plain_or_stored_form(observation: Any, secrets: list[str]) -> tuple[Any, bool]:
    """``(stored form, plain)``: :func:`_stored_form`, and whether the one walk made it, so that
    it holds plain JSON values only (``validate_plain_observation`` need not walk it again)."""
    try:
        return _plain_stored_form(observation, redactor(extra_values=secrets), 0), True
    except _NotPlain:
        return finite_json(redact_data(observation, extra_values=secrets)), False


#: How deep :func:`_plain_stored_form` goes before leaving a document to the two walks.
_PLAIN_DEPTH = 64


class _NotPlain(Exception):
    """A value :func:`_plain_stored_form` leaves to ``redact_data`` and ``finite_json``."""


def _plain_stored_form(value: Any, scrub: Callable[[str], str], depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return scrub(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int:
        # A larger one is no JSON number: the two walks keep it for validate_observation to say so.
        if -MAX_JSON_INTEGER <= value <= MAX_JSON_INTEGER:
            return value
        raise _NotPlain
    if kind is bool or value is None:
        return value
    if depth >= _PLAIN_DEPTH:
        raise _NotPlain
    if kind is list:
        return [_plain_stored_form(child, scrub, depth + 1) for child in value]
    if kind is not dict:
        raise _NotPlain
    stored: dict[str, Any] = {}
    for key, child in value.items():
        if type(key) is not str:
            raise _NotPlain
        clean = scrub(key)
        if clean in stored:
            raise _NotPlain
        stored[clean] = _plain_stored_form(child, scrub, depth + 1)
    return stored


def stored_observation_problems(observation: Any, *, secrets: Sequence[str] = (), case_ids: Sequence[str] | None = None) -> list[str]:
    """Every problem with an observation an executor returned, against the reference schema
    (``validate_observation``); empty when it may be stored.

    Checked in its stored form (redacted, non-finite numbers as null) as the scorer reads it
    (``scoreable_observation``: unknown metrics and an unusable cost left out), so a NaN cost
    or latency is an unknown value, not a reason to lose the execution (B5, B9), while
    anything else the schema refuses is an invalid observation. ``case_ids``: the catalog's own
    workflow cases, known besides the reference's twelve.
    """
    return _checked_stored_form(observation, list(secrets), case_ids=case_ids)[1]


def _checked_stored_form(
    observation: Any, secrets: list[str], *, case_ids: Sequence[str] | None = None
) -> tuple[Any, list[str], EncodedDocument | None]:
    """``(stored form, problems, its text)`` of an observation an executor returned: redacted
    once, checked once (see :func:`stored_observation_problems`; ``case_ids``: the catalog's own
    cases, as ``validate_observation`` takes them); the stored form is None when there are
    problems. Its text, when not None, is the stored form's JSON text as its column holds it."""
    if not isinstance(observation, dict):
        return None, ["observation must be a JSON object"], None
    try:
        stored, plain = _plain_or_stored_form(observation, secrets)
    except Exception:  # a value redaction cannot walk: report it as validation would
        return None, validate_observation(observation, case_ids=case_ids), None
    scoreable = scoreable_observation(stored)
    # The scorer's copy of plain JSON is plain JSON: the one walk found that out already.
    problems = (validate_plain_observation if plain else validate_observation)(scoreable, case_ids=case_ids)
    if problems:
        return None, problems, None
    # The report scores the row read back: the same document is not checked twice (by its content).
    text = remember_valid_observation(scoreable)
    # The scorer's copy only leaves keys out, keeping every other value and the order: equal, it
    # left none out and its text is the stored form's, which the column is written with.
    return stored, problems, EncodedDocument(text) if text is not None and scoreable == stored else None


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


def _trace_row(execution: Execution, number: int, artifact: Any, secrets: Sequence[str]) -> TraceArtifact | None:
    """The unsaved ``TraceArtifact`` row for an attempt's recorded trace, or None when there is
    none or it cannot be read (logged: a broken trace must never lose the execution).

    The trace is scrubbed again with the run's secret values: the recorder scrubbed it with the
    candidate's own values, and the run knows every candidate's (docs/failure-modes.md B12)."""
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
        # The run is named: a schedule's execution ids recur in every run of it (a re-run, the chaos lane's).
        logger.warning(
            "run %s execution %s attempt %s: the trace was not stored: %s",
            execution.run_id,
            execution.execution_id,
            number,
            redact(f"{type(exc).__name__}: {exc}", extra_values=secrets),
        )
        return None
    if rescrubbed:
        logger.warning(
            "run %s execution %s attempt %s: the trace held a secret value its recorder had not scrubbed; scrubbed before storing",
            execution.run_id,
            execution.execution_id,
            number,
        )
    return row


def settlement_ms(observation: Mapping[str, Any]) -> int | None:
    """``metrics.settlementMs`` as a whole number of ms, or None when absent or not a finite non-negative number."""
    value = (observation.get("metrics") or {}).get("settlementMs")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return min(int(value), 2_147_483_647)


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
    dispatch: bool = False,
) -> NightlyOutcome:
    """Build tonight's schedule (coverage first), save it, and with ``execute`` run it.

    The whole schedule is always built, coverage-checked and saved; ``selection`` narrows only
    the run. Without a selection the run is the night's one ``nightly`` run: a second delivery
    returns it untouched (nothing executed, nothing spent), unless the first delivery died before
    claiming it, in which case the run is still pending and this delivery claims and executes it.
    The claim is a conditional update, so two deliveries never both execute. A selection, or a
    ``rotation_day`` given (another day's schedule for this night), makes a ``manual`` run. With ``dispatch`` the run is not executed here but fanned out: one django-q2
    task per execution (:func:`dispatch_run`), shared by every worker; the summary is then the
    run's counts so far.
    Raises ``CoverageError`` (naming the failed invariants) or ``ScheduleError`` for bad input.
    """
    schedule, schedule_created = schedule_for_night(seed=seed, now=now, rotation_day=rotation_day, generated_at=generated_at)
    if not execute:
        if not selection.is_empty:
            apply_selection(schedule.to_document(), selection)
        return NightlyOutcome(schedule, schedule_created, None, False, None)
    # Only the night's own rotation day makes its nightly run: another day's schedule, asked for by
    # hand (``--rotation-day``), is a manual run, never a second nightly of the same night in the
    # leaderboard and the candidates' histories.
    if selection.is_empty and rotation_day is None:
        run, run_created = create_run(schedule=schedule, cost_ceiling_usd=cost_ceiling_usd, selection=selection, trigger=Trigger.NIGHTLY)
    else:
        run, run_created = _selection_run(schedule, cost_ceiling_usd=cost_ceiling_usd, selection=selection)
    if dispatch:
        with transaction.atomic():
            queued = dispatch_run(run)
        run.refresh_from_db()
        return NightlyOutcome(
            schedule, schedule_created, run, run_created, summarize(run, with_report=True), executed=queued > 0 or run_created
        )
    if not claim_run(run) and not take_over_abandoned_run(run):
        if not selection.is_empty and run.status in UNFINISHED:
            raise RunActionError(
                f"run {run.pk} over the same selection of this night's schedule is still {run.status} (another "
                "`nightly --execute` is executing it): wait for it to end, or cancel it "
                f"(`manage.py cancel_run {run.pk}`), before running this selection again"
            )
        return NightlyOutcome(schedule, schedule_created, run, run_created, summarize(run, with_report=True), executed=False)
    summary = _execute_claimed(run, environ=environ, progress=progress)
    return NightlyOutcome(schedule, schedule_created, run, run_created, summary, executed=True)


def _selection_run(schedule: Schedule, *, cost_ceiling_usd: Decimal, selection: Selection) -> tuple[Run, bool]:
    """The manual live run of ``schedule`` over ``selection``: the unfinished one already there
    (``created=False``; the caller claims it, takes it over if abandoned, or refuses), else a new one.

    The schedule row is locked while looking and creating (on SQLite every transaction takes the
    write lock at BEGIN, ``evalhub/settings.py``), so two ``nightly --execute`` with the same
    selection never both create a run over the same entries. Raises ``ScheduleError`` for a bad selection.
    """
    wanted = selection.to_document()
    with transaction.atomic():
        Schedule.objects.select_for_update().filter(pk=schedule.pk).values_list("pk", flat=True).first()
        unfinished = Run.objects.filter(
            schedule=schedule, trigger=Trigger.MANUAL, lane=RunLane.LIVE, repeat_of__isnull=True, status__in=UNFINISHED
        ).order_by("pk")
        for run in unfinished:
            if run.selection == wanted:
                return run, False
        return create_run(schedule=schedule, cost_ceiling_usd=cost_ceiling_usd, selection=selection, trigger=Trigger.MANUAL)


def take_over_abandoned_run(run: Run, *, now: dt.datetime | None = None) -> bool:
    """Take over ``run`` when the process executing it in-process died (``kill -9`` of
    ``nightly --execute``): it is running, none of its executions was ever queued for the
    workers (their reaper recovers queued runs), none holds a live lease, and nothing of it was
    touched for a lease's length. Expired leases are taken back first (their attempts closed as
    ``worker_lost``). True for the one caller whose conditional update took it; the caller then
    executes its pending executions."""
    now = now or timezone.now()
    quiet = now - dt.timedelta(seconds=lease_seconds())
    row = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).values_list("started_at", flat=True).first()
    if row is None or row >= quiet:
        return False
    executions = run.executions
    if (
        executions.filter(dispatched_at__isnull=False).exists()
        or executions.filter(status=ExecutionStatus.RUNNING, lease_expires_at__gte=now).exists()
    ):
        return False
    touched = executions.aggregate(heartbeat=Max("heartbeat_at"), finished=Max("finished_at"), started=Max("started_at"))
    if any(moment is not None and moment >= quiet for moment in touched.values()):
        return False
    if not Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, started_at=row).update(started_at=now):
        return False  # another caller took it over first
    for pk in executions.filter(status=ExecutionStatus.RUNNING, lease_expires_at__lt=now).values_list("pk", flat=True):
        take_back(pk, now=now, dispatch=False)
    run.refresh_from_db()
    logger.warning("run %s was abandoned by the process executing it: taken over by %s", run.pk, owner_id())
    return True
