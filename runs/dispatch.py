"""Running a run: in this process, one execution after another (:func:`execute_run`, the
command line's ``nightly --execute``, ``demo_live``, ``rerun``), or fanned out to the django-q2
workers, one task per execution (:func:`dispatch_run`). Both go through the same per-execution
path (``runs.execution.execute_execution``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from evalhub.conf import evalhub_setting
from evalhub.fields import storable_text
from evalhub.interrupts import terminate_as_interrupt
from evalhub.secrets import redact
from runs import settlement
from runs.creation import RunSummary, claim_run, summarize
from runs.execution import Prefetched, case_document, execute_execution, qualify
from runs.leases import db_retry, owner_id
from runs.models import Attempt, Execution, ExecutionStatus, Run, RunStatus
from runs.queueing import dispatch_executions
from runs.recovery import finalise_run
from runs.settlement import NoMeasurement
from runs.snapshots import provider_overrides_document, secret_values
from schedules.models import WorkflowCase

#: Called after each execution with (done, total, execution).
ProgressCallback = Callable[[int, int, Execution], None]
#: Skipped executions settled by one update (their observations are held in memory until then;
#: a chunk bounds that).
SKIP_CHUNK = 100


def execute_run(
    run: Run,
    *,
    environ: Mapping[str, str],
    progress: ProgressCallback | None = None,
    providers: Mapping[str, Any] | None = None,
) -> RunSummary:
    """Execute every pending execution of ``run`` in this process, in order, then finalise it.

    The same per-execution path as a worker's task (``runs.execution.execute_execution``: claim under a
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
    return execute_claimed(run, environ=environ, progress=progress)


def execute_claimed(run: Run, *, environ: Mapping[str, str], progress: ProgressCallback | None) -> RunSummary:
    """Execute every execution of ``run``, which this process has claimed, in order; finalise it
    and return its summary. Interrupted (Ctrl-C, SIGTERM, a worker's timeout), the run is left
    ``failed`` saying why, what never started skipped so that ``rerun --skipped`` runs it."""
    # What every execution reads — its row and entry, the run and its schedule, the workflow
    # cases, the secret values — is read once here and given to ``execute_execution``, which
    # claims a pending execution by its first write; anything else (not pending any more, held
    # under a lease) it reads again, as a worker's task does.
    executions = list(
        Execution.objects.filter(run_id=run.pk)
        .select_related("entry")
        .annotate(has_attempts=Exists(Attempt.objects.filter(execution_id=OuterRef("pk"))))
        .order_by("position")
    )
    cases = {row.key: row for row in WorkflowCase.objects.filter(key__in={e.case_key for e in executions})}
    in_order = _InOrder(run, environ=environ, progress=progress, total=len(executions), prefetched=Prefetched(cases=cases))
    try:
        with terminate_as_interrupt():
            for done, execution in enumerate(executions, start=1):
                in_order.execute(done, execution)
            in_order.settle_skips()
    except BaseException as exc:  # KeyboardInterrupt, SIGTERM, worker timeout: leave an honest record
        _record_interruption(run, exc, environ=environ, in_order=in_order)
        raise
    finalise_run(run.pk, environ=environ)
    run.refresh_from_db()
    return summarize(run, with_report=True)


@dataclass
class _InOrder:
    """A claimed run's executions run one after another in this process. Consecutive executions
    that run no executor (skipped before any attempt) are settled together, in order, before the
    next execution that does run (:meth:`settle_skips`)."""

    run: Run
    environ: Mapping[str, str]
    progress: ProgressCallback | None
    total: int
    prefetched: Prefetched
    owner: str = field(default_factory=owner_id)
    #: ``(done, execution, observation)`` of the skips not settled yet.
    skips: list[tuple[int, Execution, dict[str, Any]]] = field(default_factory=list)
    concurrency: bool = field(default_factory=lambda: bool(evalhub_setting("PROVIDER_CONCURRENCY")))

    def execute(self, done: int, execution: Execution) -> None:
        """Execute the ``done``-th execution (or hold it with the skips to settle together)."""
        execution.run = self.run
        if execution.status == ExecutionStatus.PENDING and not self.concurrency:
            checked = None if execution.has_attempts else qualify(self.run, execution.entry.candidate or {}, self.environ)
            if isinstance(checked, NoMeasurement):
                self.skips.append((done, execution, prefetched_unavailable(self.run, execution, self.environ, self.prefetched, checked)))
                return
            self.settle_skips()
            if not execution.has_attempts:
                self.prefetched.qualified.add(execution.pk)
            execute_execution(
                execution.pk, environ=self.environ, owner=self.owner, finalise=False, loaded=execution, prefetched=self.prefetched
            )
        else:
            self.settle_skips()
            if execution.status != ExecutionStatus.FINISHED:
                execute_execution(execution.pk, environ=self.environ, owner=self.owner, finalise=False)
        if self.progress is not None:
            self.progress(done, self.total, execution)

    def settle_skips_together(self) -> set[int]:
        """Settle the held skips, :data:`SKIP_CHUNK` to an update; the pks settled."""
        started = time.monotonic()
        settled: set[int] = set()
        for first in range(0, len(self.skips), SKIP_CHUNK):
            chunk = [(execution, observation) for _, execution, observation in self.skips[first : first + SKIP_CHUNK]]
            settled |= db_retry(
                lambda chunk=chunk: settlement.settle_skips_together(chunk, owner=self.owner, started=started),
                what=f"settling {len(chunk)} skipped executions",
            )
        return settled

    def settle_skips(self) -> None:
        """Settle the held skips; one another worker took meanwhile is looked at as a task would."""
        if not self.skips:
            return
        settled = self.settle_skips_together()
        for done, execution, _ in self.skips:
            if execution.pk not in settled:
                execute_execution(execution.pk, environ=self.environ, owner=self.owner, finalise=False)
            if self.progress is not None:
                self.progress(done, self.total, execution)
        self.skips.clear()


def _record_interruption(run: Run, exc: BaseException, *, environ: Mapping[str, str], in_order: _InOrder) -> None:
    """The run was interrupted: the skips decided before are written as decided; what never
    started is skipped, saying so, so that ``rerun --skipped`` can run it (left pending in a failed
    run, nothing would ever run it, and it would count as not measured); the run is ``failed``."""
    secrets = secret_values(environ, list(run.schedule.candidates))
    reason = storable_text(redact(f"{type(exc).__name__}: {exc}", extra_values=secrets))
    with contextlib.suppress(Exception):
        if in_order.skips:
            in_order.settle_skips_together()
    with contextlib.suppress(Exception):
        settlement.skip_pending(
            run,
            code="run_interrupted",
            message=f"the process running the night stopped ({reason}) before this execution started: "
            f"re-run it with `manage.py rerun {run.pk} --skipped`",
            owner="interrupt",
        )
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, finished_at=timezone.now(), error=reason)


def prefetched_unavailable(
    run: Run, execution: Execution, environ: Mapping[str, str], prefetched: Prefetched, reason: NoMeasurement
) -> dict[str, Any]:
    """The observation of a skipped execution of an in-process run, from what was read for the run."""
    candidate = execution.entry.candidate or {}
    secrets = prefetched.secrets_for(run, execution, environ)
    return settlement.unavailable_document(
        run, case_document(prefetched.cases.get(execution.case_key), execution), candidate, secrets, reason
    )


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
