"""REST endpoints for runs and executions (read-only history): ``/api/runs/`` and ``/api/executions/``.

Money is a JSON number of US dollars. An execution whose price is unknown reads
``costUsd: null, costKnown: false`` (never $0, known-failure-modes B5); ``chargedUsd`` is what it
counted against the run's ceiling (its budget's ``maxCostUsd`` when the price is unknown).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from evalhub.api.serializers import UsdField
from evalhub.api.views import ReadOnlyViewSet
from runs.filters import ExecutionFilter, RunFilter
from runs.models import Attempt, AttemptOutcome, Classification, Execution, ExecutionStatus, Run, RunStatus, Trigger
from runs.observations import finite_json
from runs.queries import run_history


def run_queryset() -> QuerySet[Run]:
    """The run history (newest first, schedule loaded, counts per classification annotated by
    :func:`runs.queries.run_history`) plus ``pending_count``: one query for a whole page."""
    return run_history().annotate(pending_count=Count("executions", filter=Q(executions__classification="")))


def execution_queryset() -> QuerySet[Execution]:
    """Executions, newest run first then schedule order, with their attempts: two queries."""
    return Execution.objects.prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("number", "id"))
    ).order_by("-run_id", "position", "id")


def failure_code_counts(run_ids: list[int]) -> dict[int, dict[str, int]]:
    """``{run id: {failure code: executions}}`` for the given runs: one query for a whole page."""
    counts: dict[int, dict[str, int]] = {run_id: {} for run_id in run_ids}
    rows = (
        Execution.objects.filter(run_id__in=run_ids)
        .exclude(failure_code="")
        .values_list("run_id", "failure_code")
        .annotate(n=Count("id"))
        .order_by("run_id", "failure_code")
    )
    for run_id, code, n in rows:
        counts[run_id][code] = n
    return counts


class RunCountsSerializer(serializers.Serializer):
    """How many executions of the run have each classification; ``pending`` have none yet."""

    completed = serializers.IntegerField(source="completed_count", read_only=True)
    candidate_failure = serializers.IntegerField(source="candidate_failure_count", read_only=True)
    infrastructure_failure = serializers.IntegerField(source="infrastructure_failure_count", read_only=True)
    skipped = serializers.IntegerField(source="skipped_count", read_only=True)
    pending = serializers.IntegerField(source="pending_count", read_only=True)


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "properties": {
            "candidateIds": {"type": "array", "items": {"type": "string"}},
            "caseIds": {"type": "array", "items": {"type": "string"}},
            "limit": {"type": "integer", "nullable": True},
        },
        "description": "The paid subset this run covers, or null for the whole schedule.",
    }
)
class SelectionField(serializers.JSONField):
    """The run's stored selection document, as is."""


class RunSerializer(serializers.Serializer):
    """A run: its schedule and night, trigger, status, selection, money and counts per classification."""

    id = serializers.IntegerField(read_only=True)
    schedule = serializers.IntegerField(source="schedule_id", read_only=True)
    night = serializers.DateField(source="schedule.night", read_only=True)
    seed = serializers.CharField(source="schedule.seed", read_only=True)
    rotationDay = serializers.IntegerField(source="schedule.rotation_day", read_only=True)
    trigger = serializers.ChoiceField(choices=Trigger.choices, read_only=True)
    status = serializers.ChoiceField(choices=RunStatus.choices, read_only=True)
    selection = SelectionField(read_only=True)
    costCeilingUsd = UsdField(source="cost_ceiling_usd", read_only=True)
    spentUsd = UsdField(source="spent_usd", read_only=True, help_text="Unknown prices count at the budget's maxCostUsd.")
    hasUnpriced = serializers.BooleanField(source="has_unpriced", read_only=True)
    stoppedAtCeiling = serializers.BooleanField(source="stopped_at_ceiling", read_only=True)
    executions = serializers.IntegerField(source="execution_count", read_only=True)
    counts = RunCountsSerializer(source="*", read_only=True)
    error = serializers.CharField(read_only=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True, allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True, allow_null=True)
    failureCodes = serializers.SerializerMethodField()

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_failureCodes(self, run: Run) -> dict[str, int]:
        """How many executions ended with each failure code (``context["failure_codes"]`` by run id)."""
        return self.context.get("failure_codes", {}).get(run.pk, {})


class AttemptSerializer(serializers.Serializer):
    """One try of an execution."""

    number = serializers.IntegerField(read_only=True)
    outcome = serializers.ChoiceField(choices=AttemptOutcome.choices, read_only=True)
    errorCode = serializers.CharField(source="error_code", read_only=True)
    retryable = serializers.BooleanField(read_only=True, allow_null=True)
    message = serializers.CharField(read_only=True)
    costUsd = UsdField(source="cost_usd", read_only=True, allow_null=True)
    durationMs = serializers.IntegerField(source="duration_ms", read_only=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True)


class FailureSerializer(serializers.Serializer):
    """Why an execution did not complete (the observation's ``failure``)."""

    code = serializers.CharField(source="failure_code", read_only=True)
    category = serializers.CharField(source="failure_category", read_only=True)
    retryable = serializers.BooleanField(source="failure_retryable", read_only=True, allow_null=True)
    message = serializers.CharField(source="failure_message", read_only=True)


@extend_schema_field({"type": "object", "nullable": True, "additionalProperties": {},
                      "description": "The reference observation document (paperclip.runner.workflow-observation.v1)."})
class ObservationField(serializers.JSONField):
    """The stored observation; a non-finite number (which JSON cannot carry) reads as null (B9)."""

    def to_representation(self, value: Any) -> Any:
        return finite_json(value)


class ExecutionSerializer(serializers.Serializer):
    """One execution: its entry, classification, failure, cost, observation and attempts.

    ``classification`` and ``failure`` are null until the execution finishes (``failure`` stays null
    when it completed). ``costUsd`` is null when unknown (``costKnown: false``) or not yet recorded.
    """

    id = serializers.IntegerField(read_only=True)
    run = serializers.IntegerField(source="run_id", read_only=True)
    executionId = serializers.CharField(source="execution_id", read_only=True)
    position = serializers.IntegerField(read_only=True)
    caseId = serializers.CharField(source="case_key", read_only=True)
    candidateId = serializers.CharField(source="candidate_key", read_only=True)
    slotId = serializers.CharField(source="slot_key", read_only=True)
    repetition = serializers.IntegerField(read_only=True)
    status = serializers.ChoiceField(choices=ExecutionStatus.choices, read_only=True)
    classification = serializers.ChoiceField(choices=Classification.choices, read_only=True, allow_null=True)
    failure = FailureSerializer(source="*", read_only=True, allow_null=True)
    costUsd = UsdField(source="cost_usd", read_only=True, allow_null=True)
    costKnown = serializers.BooleanField(source="cost_known", read_only=True)
    chargedUsd = UsdField(
        source="cost_usd", read_only=True, allow_null=True, help_text="What counted against the run's ceiling."
    )
    durationMs = serializers.IntegerField(source="duration_ms", read_only=True, allow_null=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True, allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True, allow_null=True)
    observation = ObservationField(read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)

    def to_representation(self, execution: Execution) -> dict[str, Any]:
        data = super().to_representation(execution)
        if not execution.classification:
            data["classification"] = None
        if not execution.failure_code:
            data["failure"] = None
        if not execution.cost_known:
            data["costUsd"] = None
        return data


class RunViewSet(ReadOnlyViewSet):
    """Runs, newest first: ``/api/runs/`` and ``/api/runs/{id}/`` (read-only).

    Filters: ``status``, ``trigger``, ``schedule``, ``night``. Each run carries its counts per
    classification and per failure code; a page costs the same few queries however many runs it holds.
    """

    queryset = run_queryset()
    serializer_class = RunSerializer
    filterset_class = RunFilter

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        runs = list(queryset if page is None else page)
        serializer = self._serializer(runs, many=True)
        return self.get_paginated_response(serializer.data) if page is not None else Response(serializer.data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(self._serializer(self.get_object()).data)

    def _serializer(self, runs: Run | list[Run], **kwargs: Any) -> RunSerializer:
        ids = [run.pk for run in runs] if isinstance(runs, list) else [runs.pk]
        context = {**self.get_serializer_context(), "failure_codes": failure_code_counts(ids)}
        return RunSerializer(runs, context=context, **kwargs)


class ExecutionViewSet(ReadOnlyViewSet):
    """Executions with their observations and attempts: ``/api/executions/`` and ``/api/executions/{id}/``.

    Filters: ``run``, ``classification``, ``candidate``, ``case``, ``slot``, ``status``. Read-only.
    """

    queryset = execution_queryset()
    serializer_class = ExecutionSerializer
    filterset_class = ExecutionFilter
