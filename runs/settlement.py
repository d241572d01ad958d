"""The writes that record an execution: claim it, reserve an attempt's cost against the run's
ceiling and open the attempt, finish the attempt and count its cost, settle the execution (or
skip it, alone or together with others), and the unsaved rows they store (a trace, an
observation of an execution that has no measurement).

Every write is one conditional update, so two writers never both take the same row:

* claim: pending, its run running and not cancelled (:func:`claimable_rows`);
* reserve: spent + reserved + this attempt's worst case ≤ the run's ceiling (:func:`begin_attempt`);
* finish an attempt: still ``running`` (:func:`finish_attempt`);
* settle: running and still this process's (or, with ``claim``, claimable) (:func:`settle`).

A write that does not take raises :class:`Stale` (the reaper took the execution) or
:class:`NotClaimed` (nothing was written); the caller decides what that means.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Exists, F, OuterRef, QuerySet, Value, When
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from evalhub.fields import EncodedDocument, storable_text
from evalhub.secrets import redact, redact_data
from runs.evaluation.observations import unavailable_observation
from runs.executors import InfrastructureError
from runs.executors.base import ArtifactSink
from runs.executors.trace import rescrub_artifact
from runs.leases import lease_until, owner_id
from runs.models import Attempt, AttemptOutcome, Execution, ExecutionStatus, Run, RunLane, RunStatus, TraceArtifact

logger = logging.getLogger(__name__)

#: Half a micro-dollar: amounts are whole micro-dollars, and SQLite compares decimals as floats,
#: so the ceiling comparison allows this much rounding and nothing more.
CEILING_TOLERANCE = Decimal("0.0000005")
#: A stored trace's digest (the ``trace_digest_sha256`` constraint, checked before the insert so a
#: malformed artifact is dropped instead of rolling back its attempt).
TRACE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass
class Call:
    """What one executor call produced, before it is recorded: an observation, an
    infrastructure error, a crash (any other exception, ``BaseException`` included), a lost
    worker (shutdown, timeout) or a cancellation."""

    outcome: AttemptOutcome
    observation: Any = None
    error: InfrastructureError | None = None
    code: str = ""
    message: str = ""
    retryable: bool | None = None
    cost: Decimal | None = None
    interrupt: BaseException | None = None


@dataclass(frozen=True)
class NoMeasurement:
    """Why an execution has no measurement: its observation's classification (``skipped``,
    ``infrastructure_failure``) and failure (code, category, retryable, message)."""

    classification: str
    code: str
    category: str
    retryable: bool
    message: str


class Stale(Exception):
    """The attempt or execution being written is no longer this process's (the reaper took it)."""


class NotClaimed(Exception):
    """A claiming write did not take: the execution is no longer pending, its run not running or
    cancelled, or an attempt was made since it was read. Nothing was written."""


def claimable_rows() -> QuerySet[Execution]:
    """Pending executions of running, uncancelled runs: what a claim updates.

    ``Exists`` rather than ``run__status``: a join makes Django select the ids first, then update."""
    run_open = Run.objects.filter(pk=OuterRef("run_id"), status=RunStatus.RUNNING, cancel_requested_at__isnull=True)
    return Execution.objects.filter(Exists(run_open), status=ExecutionStatus.PENDING)


def unavailable_document(
    run: Run, case: Mapping[str, Any], candidate: Mapping[str, Any], secrets: list[str], reason: NoMeasurement
) -> dict[str, Any]:
    """The redacted observation of an execution that has no measurement, for ``reason``."""
    observation = unavailable_observation(
        case=case,
        candidate=candidate,
        classification=reason.classification,
        code=reason.code,
        category=reason.category,
        retryable=reason.retryable,
        message=reason.message,
        scripted=run.lane == RunLane.SCRIPTED,
    )
    return redact_data(observation, extra_values=secrets)


#: The columns a settlement sets from the execution's observation (:func:`result_columns`).
RESULT_COLUMNS = (
    "classification",
    "failure_code",
    "failure_category",
    "failure_retryable",
    "failure_message",
    "observation",
    "settlement_ms",
)


def result_columns(observation: dict[str, Any], text: EncodedDocument | None = None) -> dict[str, Any]:
    """The columns a settlement sets from ``observation`` (:data:`RESULT_COLUMNS`); ``text``: its
    JSON text as the column holds it, written rather than encoded again."""
    failure = observation.get("failure") or {}
    return {
        "classification": observation["classification"],
        "failure_code": storable_text(str(failure.get("code", ""))[:100]),
        "failure_category": storable_text(str(failure.get("category", ""))[:32]),
        "failure_retryable": failure.get("retryable") if isinstance(failure.get("retryable"), bool) else None,
        # The observation's JSON text escapes a NUL; these columns hold it raw (evalhub/fields.py).
        "failure_message": storable_text(redact(str(failure.get("message", "")))),
        "observation": observation if text is None else text,
        "settlement_ms": settlement_ms(observation),
    }


def settle_skips_together(skips: Sequence[tuple[Execution, dict[str, Any]]], *, owner: str, started: float) -> set[int]:
    """Claim and settle pending executions that run no executor (each with its observation) with
    one conditional update: each still pending, its run running and not cancelled, with the
    values :func:`settle` writes for an execution without attempts (cost 0, known) and each
    execution's own result columns (a ``CASE`` on its pk). Returns the pks it settled; any other
    was taken meanwhile (the caller looks)."""
    now = timezone.now()
    duration = int((time.monotonic() - started) * 1000)
    columns = {execution.pk: result_columns(observation) for execution, observation in skips}
    changed = (
        claimable_rows()
        .filter(pk__in=list(columns))
        .update(
            status=ExecutionStatus.FINISHED,
            owner=owner,
            started_at=Coalesce(F("started_at"), now),
            cost_usd=Coalesce(F("cost_usd"), Decimal(0)),
            cost_known=True,
            duration_ms=duration,
            finished_at=now,
            lease_expires_at=None,
            **{name: _per_execution(name, {pk: values[name] for pk, values in columns.items()}) for name in RESULT_COLUMNS},
        )
    )
    if changed == len(columns):
        return set(columns)
    return set(
        Execution.objects.filter(pk__in=list(columns), status=ExecutionStatus.FINISHED, owner=owner, finished_at=now).values_list(
            "pk", flat=True
        )
    )


def _per_execution(name: str, values: Mapping[int, Any]) -> Any:
    """The column ``name`` set to each execution's own value in one update, as ``bulk_update``
    sets it: ``CASE`` on the pk (cast to the column's type where the database needs it)."""
    field = Execution._meta.get_field(name)
    case = Case(*(When(pk=pk, then=Value(value, output_field=field)) for pk, value in values.items()), output_field=field)
    return Cast(case, output_field=field) if connection.features.requires_casted_case_in_updates else case


def begin_attempt(run: Run, execution: Execution, number: int, reserve: Decimal, owner: str, *, claim: bool = False) -> Attempt | None:
    """Reserve ``reserve`` against the run's ceiling and write the attempt's row (outcome
    ``running``), in one transaction committed before its executor is called; None when the
    reservation does not fit under the ceiling.

    The reservation is one conditional update — spent + reserved + ``reserve`` ≤ ceiling — so any
    number of workers reserving at once never hold more than the ceiling between them.

    ``claim``: the execution is still pending; the same transaction first claims it under a lease
    (a conditional update: pending, its run running and not cancelled), and raises
    :class:`NotClaimed`, with nothing written, when the claim does not take or an attempt with
    this number exists already (one made since the execution was read). A claim whose
    reservation does not fit stays (None is returned: the caller settles the execution it holds).
    """
    now = timezone.now()
    fits = Run.objects.filter(pk=run.pk, cost_ceiling_usd__gte=F("spent_usd") + F("reserved_usd") + (reserve - CEILING_TOLERANCE))
    try:
        with transaction.atomic():
            if claim and not claimable_rows().filter(pk=execution.pk).update(
                status=ExecutionStatus.RUNNING,
                owner=owner,
                lease_expires_at=lease_until(now),
                heartbeat_at=now,
                started_at=Coalesce(F("started_at"), now),
            ):
                raise NotClaimed
            if not fits.update(reserved_usd=F("reserved_usd") + reserve):
                return None
            return Attempt.objects.create(
                execution=execution,
                number=number,
                outcome=AttemptOutcome.RUNNING,
                reserved_usd=reserve,
                owner=owner,
                started_at=now,
                finished_at=None,
            )
    except IntegrityError:
        if claim:
            raise NotClaimed from None
        raise


def finish_attempt(
    attempt: Attempt,
    call: Call,
    *,
    artifacts: ArtifactSink,
    secrets: Sequence[str],
    observation: dict[str, Any] | None,
    text: EncodedDocument | None = None,
    started: float,
    owner: str,
    cost_known: bool = True,
    hand_back: bool = False,
    unpriced_before: bool = False,
) -> bool:
    """Finish ``attempt`` with what ``call`` produced, in one transaction: its outcome and cost,
    its trace, its reservation turned into what it counts against the run (its cost, or the whole
    reservation when the cost is unknown), and with ``observation`` the execution's result — or,
    with ``hand_back``, the execution put back to pending for another worker. Raises
    :class:`Stale` (nothing written) when the attempt or the execution is no longer this process's.

    ``unpriced_before``: an earlier attempt of the execution counted a reservation for an unknown
    cost. Returns whether one has now (this attempt included). ``text``: ``observation``'s JSON
    text, when known (see :func:`settle`)."""
    now = timezone.now()
    duration_ms = int((now - attempt.started_at).total_seconds() * 1000)
    trace = trace_row(attempt.execution, attempt.number, artifacts.trace, secrets)
    counted = call.cost if call.cost is not None else (attempt.reserved_usd if not cost_known else Decimal(0))
    unpriced = unpriced_before or (not cost_known and counted > 0)
    spend: dict[str, Any] = {"spent_usd": F("spent_usd") + counted, "reserved_usd": F("reserved_usd") - attempt.reserved_usd}
    if not cost_known and counted > 0:
        spend["has_unpriced"] = True
    with transaction.atomic():
        if not Attempt.objects.filter(pk=attempt.pk, outcome=AttemptOutcome.RUNNING).update(
            outcome=call.outcome,
            error_code=storable_text(call.code),
            retryable=call.retryable,
            message=storable_text(call.message),
            cost_usd=call.cost,
            counted_usd=counted,
            duration_ms=max(duration_ms, 0),
            finished_at=now,
        ):
            raise Stale
        if trace is not None:
            trace.save()
        Run.objects.filter(pk=attempt.execution.run_id).update(**spend)
        if observation is not None:
            # The attempt's cost is added by the settling update itself (one write of the row).
            settle(attempt.execution, observation, started=started, owner=owner, cost_known=not unpriced, add_cost=counted, text=text)
            return unpriced
        execution = Execution.objects.filter(pk=attempt.execution_id, status=ExecutionStatus.RUNNING, owner=owner)
        added = {"cost_usd": Coalesce(F("cost_usd"), Decimal(0)) + counted}
        if hand_back:
            added.update(status=ExecutionStatus.PENDING, owner="", lease_expires_at=None)
        if not execution.update(**added):
            raise Stale
    return unpriced


def record_late(attempt: Attempt, call: Call, *, artifacts: ArtifactSink, secrets: Sequence[str]) -> None:
    """A call that returned after its lease was taken back: the reaper closed the attempt as
    ``worker_lost`` and counted its whole reservation. Keep what the call tells: a known cost
    replaces the estimate (the run's spend is corrected by the difference), the trace is stored,
    and the attempt's message says a late result arrived and was not used (another attempt owns
    the execution now)."""
    trace = trace_row(attempt.execution, attempt.number, artifacts.trace, secrets)
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


def settle(
    execution: Execution,
    observation: dict[str, Any],
    *,
    started: float,
    owner: str | None = None,
    cost_known: bool | None = None,
    add_cost: Decimal = Decimal(0),
    claim: bool = False,
    text: EncodedDocument | None = None,
) -> None:
    """Store the execution's result (call inside the transaction that counted its last cost).

    Only the owner of a running execution settles it (a conditional update; :class:`Stale`
    otherwise; an ``owner`` of None: any owner). ``claim``: the execution is still pending (it is
    settled without calling its executor): the same update claims it for ``owner`` — pending, its
    run running and not cancelled, else :class:`Stale` with nothing written. The execution's
    ``cost_usd`` is the sum of what its attempts counted (0 without attempts; ``add_cost``, USD, is
    the last attempt's, added by this update); its cost is known unless an attempt counted a
    reservation for an unknown cost (``cost_known``: the caller knows; None: looked up). ``text``:
    ``observation``'s JSON text as its column holds it, when the caller has it
    (``runs.stored_observations.checked_stored_form``), written rather than encoded again."""
    if cost_known is None:
        cost_known = not Attempt.objects.filter(execution_id=execution.pk, cost_usd__isnull=True, counted_usd__gt=0).exists()
    now = timezone.now()
    claimed: dict[str, Any] = {}
    if claim:
        rows = claimable_rows().filter(pk=execution.pk)
        claimed = {"owner": owner or owner_id(), "started_at": Coalesce(F("started_at"), now)}
    else:
        rows = Execution.objects.filter(pk=execution.pk, status=ExecutionStatus.RUNNING)
        if owner is not None:
            rows = rows.filter(owner=owner)
    settled = rows.update(
        **claimed,
        status=ExecutionStatus.FINISHED,
        **result_columns(observation, text),
        cost_usd=Coalesce(F("cost_usd"), Decimal(0)) + add_cost,
        cost_known=cost_known,
        duration_ms=int((time.monotonic() - started) * 1000),
        finished_at=now,
        lease_expires_at=None,
    )
    if not settled:
        raise Stale


def skip_pending(run: Run, *, code: str, message: str, owner: str) -> int:
    """Settle every pending execution of ``run`` as ``skipped`` / ``code`` (category
    orchestration, not retryable) saying ``message``; each by a conditional claim, so one a
    worker took meanwhile is left to it. Returns how many were skipped (they can be re-run:
    ``runs.actions.rerun_run`` with scope ``skipped``)."""
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
                settle(execution, redact_data(observation), started=time.monotonic(), owner=owner)
                skipped += 1
    return skipped


def trace_row(execution: Execution, number: int, artifact: Any, secrets: Sequence[str]) -> TraceArtifact | None:
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
