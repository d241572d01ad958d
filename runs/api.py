"""REST endpoints for the run history (read-only): runs, executions (and their raw traces),
scorecards, reports (and their exports), alerts and comparisons; plus ``POST /api/runs/{id}/refresh/`` (staff) for a replay refresh
and ``POST /api/score/`` (any signed-in user) to score observations without storing anything.

Money is a JSON number of US dollars. An execution whose price is unknown reads
``costUsd: null, costKnown: false`` (never $0, docs/failure-modes.md B5); ``chargedUsd`` is what it
counted against the run's ceiling (its budget's ``maxCostUsd`` when the price is unknown).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, F, Prefetch, QuerySet
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions, serializers, status
from rest_framework.decorators import action
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evalhub.api.exceptions import Conflict
from evalhub.api.pagination import PageOrCursorPagination
from evalhub.api.params import WholeNumberParam, reject_unknown_params, unknown_param_errors
from evalhub.api.serializers import RejectUnknownFieldsMixin, UsdField
from evalhub.api.views import ApiViewMixin, ReadOnlyViewSet
from evalhub.secrets import redact, redact_data
from runs.actions import RunActionError, cancel_run, rerun_run
from runs.dispatch import dispatch_run
from runs.evaluation.exports import EXPORT_FORMATS
from runs.evaluation.observation_schema import ObservationError, validate_observation
from runs.evaluation.observations import finite_json
from runs.evaluation.reports import compare_reports
from runs.evaluation.scoring import DIMENSIONS, GATE_DIMENSIONS, options_problem, score_observation_noted
from runs.executors import TraceIntegrityError, read_artifact
from runs.filters import AlertFilter, ExecutionFilter, ReportFilter, RunFilter, ScorecardFilter
from runs.models import (
    Alert,
    AlertSeverity,
    Attempt,
    AttemptOutcome,
    Classification,
    Execution,
    ExecutionStatus,
    Report,
    RerunScope,
    Run,
    RunLane,
    RunStatus,
    Scorecard,
    TraceArtifact,
    Trigger,
    trace_filename,
)
from runs.queries import LEADERBOARD_NIGHTS, LEADERBOARD_SORTS, MAX_LEADERBOARD_NIGHTS, count_executions, leaderboard, run_history
from runs.reporting import export_report, refresh_run
from schedules.services import iso_timestamp


def run_queryset() -> QuerySet[Run]:
    """The run history (newest first, schedule loaded, counts per classification annotated by
    :func:`runs.queries.run_history`) plus ``pending_count``: one query for a whole page."""
    return run_history().annotate(pending_count=count_executions(classification=""), refresh_of_lane=F("refresh_of__lane"))


#: The long lists' one order (page numbers and cursors alike): newest run first, then schedule order.
EXECUTION_ORDER = ("-run_id", "position", "id")
SCORECARD_ORDER = ("-execution__run_id", "execution__position", "id")


def execution_queryset() -> QuerySet[Execution]:
    """Executions (with their run, for its lane), newest run first then schedule order, with their
    attempts: two queries."""
    return (
        Execution.objects.select_related("run")
        .prefetch_related(Prefetch("attempts", queryset=Attempt.objects.order_by("number", "id")))
        .order_by(*EXECUTION_ORDER)
    )


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
    lane = serializers.ChoiceField(
        choices=RunLane.choices,
        read_only=True,
        help_text="live (measured), replay (a refresh), scripted (a scripted model, not measured) or chaos (pipeline faults).",
    )
    status = serializers.ChoiceField(choices=RunStatus.choices, read_only=True)
    selection = SelectionField(read_only=True)
    scripted = serializers.SerializerMethodField(
        help_text="Whether the run measured evalhub's scripted model, not a real one (a scripted run, or a refresh of one): never a measurement."
    )
    refreshOf = serializers.IntegerField(
        source="refresh_of_id", read_only=True, allow_null=True, help_text="The run this refresh re-scores."
    )
    repeatOf = serializers.IntegerField(source="repeat_of_id", read_only=True, allow_null=True, help_text="The run this re-run repeats.")
    repeatScope = serializers.CharField(source="repeat_scope", read_only=True, help_text="failed, infrastructure, or empty.")
    reservedUsd = UsdField(source="reserved_usd", read_only=True, help_text="Held against the ceiling by the attempts running now.")
    cancelRequestedAt = serializers.DateTimeField(source="cancel_requested_at", read_only=True, allow_null=True)
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

    def get_scripted(self, run: Run) -> bool:
        if run.lane == RunLane.SCRIPTED:
            return True
        if not hasattr(run, "refresh_of_lane"):  # a run not from run_queryset (an action's answer)
            return run.refresh_of_id is not None and run.refresh_of.lane == RunLane.SCRIPTED
        return run.refresh_of_lane == RunLane.SCRIPTED

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
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True, allow_null=True)


class FailureSerializer(serializers.Serializer):
    """Why an execution did not complete (the observation's ``failure``)."""

    code = serializers.CharField(source="failure_code", read_only=True)
    category = serializers.CharField(source="failure_category", read_only=True)
    retryable = serializers.BooleanField(source="failure_retryable", read_only=True, allow_null=True)
    message = serializers.CharField(source="failure_message", read_only=True)


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "additionalProperties": {},
        "description": "The reference observation document (paperclip.runner.workflow-observation.v1).",
    }
)
class ObservationField(serializers.JSONField):
    """The stored observation; a non-finite number (which JSON cannot carry) reads as null (docs/failure-modes.md B9)."""

    def to_representation(self, value: Any) -> Any:
        return finite_json(value)


class ExecutionSerializer(serializers.Serializer):
    """One execution: its entry, classification, failure, cost, observation and attempts.

    ``classification`` and ``failure`` are null until the execution finishes (``failure`` stays null
    when it completed). ``costUsd`` is null when unknown (``costKnown: false``) or not yet recorded.
    """

    id = serializers.IntegerField(read_only=True)
    run = serializers.IntegerField(source="run_id", read_only=True)
    lane = serializers.CharField(
        source="run.lane",
        read_only=True,
        help_text="The run's lane: live (measured), scripted (a scripted model, not measured) or replay (a refresh).",
    )
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
    chargedUsd = UsdField(source="cost_usd", read_only=True, allow_null=True, help_text="What counted against the run's ceiling.")
    durationMs = serializers.IntegerField(source="duration_ms", read_only=True, allow_null=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True, allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True, allow_null=True)
    observation = ObservationField(read_only=True)
    owner = serializers.CharField(read_only=True, help_text="The machine and process that ran it (host:pid).")
    chaos = ObservationField(read_only=True, help_text="A chaos-lane execution's scenario and checked invariants; null otherwise.")
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


class RerunSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """The body of ``POST /api/runs/{id}/rerun/`` as the schema documents it (no other key: see
    :meth:`RunViewSet.rerun`)."""

    scope = serializers.ChoiceField(choices=RerunScope.choices, default=RerunScope.FAILED)


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

    @extend_schema(
        request=None,
        responses={
            201: inline_serializer("RefreshCreated", {"run": serializers.IntegerField(), "report": serializers.IntegerField()}),
            400: OpenApiResponse(description='{"detail": "..."}: a body was given; a refresh takes none.'),
            409: OpenApiResponse(description='{"detail": "..."}: the run cannot be refreshed (a refresh, or not finished).'),
        },
    )
    @action(detail=True, methods=["post"])
    def refresh(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Re-score this run's stored observations under the current scoring rules (staff only).

        Creates a replay-lane run labelled as a refresh: no runtime is called, nothing is spent,
        and the refresh never counts in history, comparisons or alerts. 201 ``{run, report}``;
        400 when a body is given (it takes none).
        """
        run = self.get_object()
        refuse_body(request, "a refresh")
        try:
            refresh = refresh_run(run, generated_at=iso_timestamp(timezone.now()))
        except ValueError as exc:
            raise Conflict(str(exc)) from None
        return Response({"run": refresh.pk, "report": refresh.report.pk}, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses={
            200: inline_serializer("RunCancelled", {"run": serializers.IntegerField(), "skipped": serializers.IntegerField()}),
            400: OpenApiResponse(description='{"detail": "..."}: a body was given; a cancel takes none.'),
            409: OpenApiResponse(description='{"detail": "..."}: the run already ended.'),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Cancel this run (staff only): pending executions become ``skipped`` / ``run_cancelled``,
        running ones are interrupted and their runtimes stopped. 200 ``{run, skipped}``; 400 when a
        body is given (it takes none)."""
        run = self.get_object()
        refuse_body(request, "a cancel")
        try:
            skipped = cancel_run(run)
        except RunActionError as exc:
            raise Conflict(str(exc)) from None
        return Response({"run": run.pk, "skipped": skipped})

    @extend_schema(
        request=RerunSerializer,
        responses={
            201: inline_serializer("RerunCreated", {"run": serializers.IntegerField(), "executions": serializers.IntegerField()}),
            400: OpenApiResponse(
                description='{"detail": "..."}: scope is not failed, infrastructure or skipped, or the body has another key.'
            ),
            409: OpenApiResponse(description='{"detail": "..."}: the run has not ended, or nothing in the scope failed.'),
        },
    )
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Re-run this run's failed executions (``scope: failed``), only its infrastructure-failed
        ones (``scope: infrastructure``) or its skipped ones (``scope: skipped``: missing
        credentials, the ceiling, a cancel) as a new run that points at this one (staff only); the new
        run is queued for the workers. 201 ``{run, executions}``."""
        run = self.get_object()
        if not isinstance(request.data, dict):  # a JSON list, string or number (a form's body is a dict too)
            raise exceptions.ParseError(
                'the body must be a JSON object such as {"scope": "infrastructure"}, or empty to re-run the failed executions'
            )
        scope = request.data.get("scope", RerunScope.FAILED)
        accepted = RerunSerializer().fields
        unknown = sorted(str(key) for key in request.data if key not in accepted)
        if unknown:
            # A typo ({"scop": "infrastructure"}) must not re-run the default scope, the failed executions.
            raise exceptions.ParseError(
                f"unknown field(s) {', '.join(unknown)}: the body takes only scope (failed, infrastructure or skipped)"
            )
        if scope not in RerunScope.values:
            raise exceptions.ParseError(f"scope must be one of: {', '.join(RerunScope.values)}")
        try:
            with transaction.atomic():
                rerun = rerun_run(run, scope=scope)
                dispatch_run(rerun)
        except RunActionError as exc:
            raise Conflict(str(exc)) from None
        return Response({"run": rerun.pk, "executions": rerun.executions.count()}, status=status.HTTP_201_CREATED)

    def _serializer(self, runs: Run | list[Run], **kwargs: Any) -> RunSerializer:
        ids = [run.pk for run in runs] if isinstance(runs, list) else [runs.pk]
        context = {**self.get_serializer_context(), "failure_codes": failure_code_counts(ids)}
        return RunSerializer(runs, context=context, **kwargs)


FORM_MEDIA_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def refuse_body(request: Request, action: str) -> None:
    """A 400 ``{"detail": "<action> takes no body: ..."}`` when a POST that takes no body has one
    (``{"scope": "infrastructure"}`` sent to refresh instead of rerun): ignored, it would act as
    if the caller had asked for nothing else. An empty body, ``{}`` or an empty form passes."""
    if request.content_type.startswith(FORM_MEDIA_TYPES):
        # No form parser is configured (a JSON-only API), so DRF would answer 415 to any form, the
        # test client's and a browser's empty one included: Django's own parse tells empty apart.
        data = request._request.POST
    else:
        data = request.data
    if data is None or (hasattr(data, "__len__") and len(data) == 0):
        return
    if isinstance(data, dict):
        given = f"field(s) {', '.join(sorted(str(key) for key in data))}"
    else:
        given = {list: "a JSON list", str: "a JSON string", bool: "true or false"}.get(type(data), "a JSON number")
    raise exceptions.ParseError(f"{action} takes no body, but got {given}: send an empty body")


class TraceNegotiation(DefaultContentNegotiation):
    """The trace action answers gzip bytes whatever the client accepts; its errors render as
    JSON (the first renderer). Elsewhere, DRF's negotiation."""

    def select_renderer(self, request: Request, renderers: list[Any], format_suffix: str | None = None) -> tuple[Any, str]:
        view = (request.parser_context or {}).get("view")
        if getattr(view, "action", None) == "download_trace":
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)


ATTEMPT_PARAM = WholeNumberParam(
    "attempt",
    description="The attempt number (1, 2); default the last attempt that recorded a trace.",
    message="Give an attempt number: 1, 2, ...",
    maximum=2**31 - 1,
)


class ExecutionViewSet(ReadOnlyViewSet):
    """Executions with their observations and attempts: ``/api/executions/`` and ``/api/executions/{id}/``;
    an attempt's raw protocol trace at ``/api/executions/{id}/trace/``.

    Filters: ``run``, ``classification``, ``candidate``, ``case``, ``slot``, ``status``. Read-only.
    """

    queryset = execution_queryset()
    serializer_class = ExecutionSerializer
    filterset_class = ExecutionFilter
    pagination_class = PageOrCursorPagination
    cursor_ordering = EXECUTION_ORDER
    content_negotiation_class = TraceNegotiation

    @extend_schema(
        operation_id="executions_trace_retrieve",
        parameters=[ATTEMPT_PARAM.openapi],
        responses={
            (200, "application/gzip"): OpenApiResponse(
                response=OpenApiTypes.BINARY,
                description="The gzip-compressed NDJSON trace (the reference's provider trace format, see runs/executors/trace.py), as an attachment. Headers "
                "X-Trace-Digest (sha256 of the NDJSON), X-Trace-Frames, X-Trace-Truncated.",
            ),
            400: OpenApiResponse(description='{"attempt": ["..."]}: not an attempt number.'),
            404: OpenApiResponse(description='{"detail": "..."}: no such execution, or no trace for it (or that attempt).'),
            409: OpenApiResponse(description='{"detail": "..."}: the stored trace failed its digest check.'),
        },
        filters=False,
    )
    # Not named ``trace``: DRF dispatches an HTTP method to the view attribute of its name, so an
    # action called ``trace`` would answer the TRACE method (and list it in ``Allow``).
    @action(detail=True, methods=["get"], url_path="trace", url_name="trace", filterset_class=None)
    def download_trace(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        """The raw protocol trace of one attempt, verified against its digest before it is sent.

        Traces are evidence for debugging one execution; they are never part of reports or exports.
        """
        reject_unknown_params(request, ("attempt",))
        attempt = ATTEMPT_PARAM.parse(request)
        pk = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        found = Execution.objects.filter(pk=pk).values_list("execution_id", "run_id", "run__lane").first()
        if found is None:
            raise exceptions.NotFound(f"There is no execution {pk}.")
        traces = TraceArtifact.objects.filter(execution_id=pk)
        trace = (traces.filter(attempt=attempt) if attempt else traces.order_by("-attempt")).first()
        if trace is None:
            which = f"attempt {attempt} of execution {pk}" if attempt else f"execution {pk}"
            raise exceptions.NotFound(f"There is no recorded trace for {which}.")
        try:
            read_artifact(bytes(trace.data), trace.digest)
        except TraceIntegrityError as exc:
            raise Conflict(f"The stored trace of attempt {trace.attempt} cannot be served: {exc}.") from None
        response = HttpResponse(bytes(trace.data), content_type="application/gzip")
        response["Content-Disposition"] = f'attachment; filename="{trace_filename(found[1], found[0], trace.attempt, lane=found[2])}"'
        response["X-Trace-Digest"] = trace.digest
        response["X-Trace-Frames"] = str(trace.frame_count)
        response["X-Trace-Truncated"] = "true" if trace.truncated else "false"
        return response


# -- scorecards, reports, alerts, comparisons ------------------------------------------------------


@extend_schema_field(
    {"type": "object", "additionalProperties": {}, "description": "A reference document, as stored (camelCase keys, numbers as JSON)."}
)
class DocumentField(serializers.JSONField):
    """A stored reference document (scorecard, report, comparison), as is."""


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "additionalProperties": {},
        "description": "The comparison with the previous compatible report, or null (none, or a refresh).",
    }
)
class ComparisonField(serializers.JSONField):
    """A stored comparison document or null."""


class ScorecardSerializer(serializers.Serializer):
    """An execution's scorecard: the verdict copied out of the reference document, and the document."""

    id = serializers.IntegerField(read_only=True)
    run = serializers.IntegerField(source="execution.run_id", read_only=True)
    execution = serializers.IntegerField(source="execution_id", read_only=True)
    executionId = serializers.CharField(source="execution.execution_id", read_only=True)
    caseId = serializers.CharField(source="execution.case_key", read_only=True)
    candidateId = serializers.CharField(source="execution.candidate_key", read_only=True)
    repetition = serializers.IntegerField(source="execution.repetition", read_only=True)
    scoringVersion = serializers.CharField(source="scoring_version", read_only=True)
    overallScore = serializers.FloatField(source="overall_score", read_only=True, allow_null=True)
    gatePassed = serializers.BooleanField(source="gate_passed", read_only=True, allow_null=True)
    passed = serializers.BooleanField(read_only=True, allow_null=True)
    document = DocumentField(read_only=True)


class ScorecardViewSet(ReadOnlyViewSet):
    """Scorecards (``paperclip.runner.eval-scorecard.v2``), newest run first then schedule order:
    ``/api/scorecards/`` and ``/api/scorecards/{id}/``. Filters: ``run``, ``candidate``, ``case``.
    Skipped and infrastructure-failure executions have scorecards with null scores."""

    queryset = Scorecard.objects.select_related("execution").order_by(*SCORECARD_ORDER)
    serializer_class = ScorecardSerializer
    filterset_class = ScorecardFilter
    pagination_class = PageOrCursorPagination
    cursor_ordering = SCORECARD_ORDER


class ReportCountsSerializer(serializers.Serializer):
    """The report's aggregate counts."""

    executions = serializers.IntegerField(read_only=True)
    scoreable = serializers.IntegerField(read_only=True)
    passed = serializers.IntegerField(read_only=True)
    alerts = serializers.IntegerField(source="alert_count", read_only=True, help_text="Stored alerts (one per code, case and candidate).")


class ReportSummarySerializer(serializers.Serializer):
    """A run's report in a list: identity, bundle, refresh label, counts and mean overall score."""

    id = serializers.IntegerField(read_only=True)
    run = serializers.IntegerField(source="run_id", read_only=True)
    bundleId = serializers.CharField(source="bundle_id", read_only=True)
    isRefresh = serializers.BooleanField(source="is_refresh", read_only=True)
    isScripted = serializers.BooleanField(source="is_scripted", read_only=True)
    source = serializers.CharField(read_only=True)
    generatedAt = serializers.CharField(source="generated_at", read_only=True)
    scoringVersion = serializers.CharField(source="scoring_version", read_only=True)
    counts = ReportCountsSerializer(source="*", read_only=True)
    meanOverall = serializers.FloatField(source="mean_overall", read_only=True, allow_null=True)
    previous = serializers.IntegerField(source="previous_id", read_only=True, allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)


class AlertSerializer(serializers.Serializer):
    """One alert of a report, stored once per code, case and candidate (``occurrences`` counts the
    repetitions the reference lists one by one). Run-wide alerts have null case and candidate."""

    id = serializers.IntegerField(read_only=True)
    report = serializers.IntegerField(source="report_id", read_only=True)
    run = serializers.IntegerField(source="report.run_id", read_only=True)
    bundleId = serializers.CharField(source="report.bundle_id", read_only=True)
    code = serializers.CharField(read_only=True)
    severity = serializers.ChoiceField(choices=AlertSeverity.choices, read_only=True)
    caseId = serializers.CharField(source="case_key", read_only=True, allow_null=True)
    candidateId = serializers.CharField(source="candidate_key", read_only=True, allow_null=True)
    message = serializers.CharField(read_only=True)
    occurrences = serializers.IntegerField(read_only=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)

    def to_representation(self, alert: Alert) -> dict[str, Any]:
        data = super().to_representation(alert)
        data["caseId"] = alert.case_key or None
        data["candidateId"] = alert.candidate_key or None
        return data


class ReportSerializer(ReportSummarySerializer):
    """One report: the summary plus the reference document, the comparison and the alerts."""

    document = DocumentField(read_only=True)
    comparison = ComparisonField(read_only=True)
    alerts = AlertSerializer(many=True, read_only=True)


class ExportNegotiation(DefaultContentNegotiation):
    """On the export action ``?format=`` names an export, not one of DRF's renderers: its
    errors render with the first renderer (JSON). Elsewhere, DRF's negotiation."""

    def select_renderer(self, request: Request, renderers: list[Any], format_suffix: str | None = None) -> tuple[Any, str]:
        view = (request.parser_context or {}).get("view")
        if getattr(view, "action", None) == "export":
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)


EXPORT_FORMAT_PARAMETER = OpenApiParameter(
    "format",
    OpenApiTypes.STR,
    enum=list(EXPORT_FORMATS),
    default="json",
    description="json ({report, alerts, comparison} as the reference's live-report.json), markdown, junit (JUnit XML) "
    "or github (the CI job summary).",
)


class ReportViewSet(ReadOnlyViewSet):
    """Run reports (``paperclip.runner.workflow-eval-report.v1``), newest first: ``/api/reports/``,
    ``/api/reports/{id}/`` and ``/api/reports/{id}/export/?format=json|markdown|junit|github``.

    Filters: ``run``, ``bundle``, ``refresh``. A refresh (``isRefresh: true``) re-scored a past
    run's observations; it has no comparison and no alerts.
    """

    queryset = Report.objects.order_by("-created_at", "-id")
    filterset_class = ReportFilter
    content_negotiation_class = ExportNegotiation

    def get_queryset(self) -> QuerySet[Report]:
        queryset = super().get_queryset().annotate(alert_count=Count("alerts"))
        if self.action == "list":
            return queryset.defer("document", "comparison", "alert_documents")
        if self.action == "retrieve":
            # The prefetched alerts get this report as theirs (no second load of its document).
            return queryset.prefetch_related(Prefetch("alerts", queryset=Alert.objects.order_by("id")))
        return queryset

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return ReportSerializer if self.action == "retrieve" else ReportSummarySerializer

    @extend_schema(
        parameters=[EXPORT_FORMAT_PARAMETER],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/markdown"): OpenApiTypes.STR,
            (200, "application/xml"): OpenApiTypes.STR,
            400: OpenApiResponse(description='{"format": ["..."]}: an unknown export format.'),
        },
        filters=False,
    )
    @action(detail=True, methods=["get"], filterset_class=None)
    def export(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        """The report exported as the reference nightly script writes it, as a downloadable file."""
        fmt = request.query_params.get("format") or "json"
        if fmt not in EXPORT_FORMATS:
            raise exceptions.ValidationError({"format": [f"Unknown export format. Use one of: {', '.join(EXPORT_FORMATS)}."]})
        content, content_type, filename = export_report(self.get_object(), fmt)
        response = HttpResponse(content, content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response


class AlertViewSet(ReadOnlyViewSet):
    """Alerts across bundles, newest first: ``/api/alerts/`` and ``/api/alerts/{id}/``.
    Filters: ``bundle``, ``code``, ``severity``, ``run``."""

    queryset = (
        Alert.objects.select_related("report")
        .defer("report__document", "report__comparison", "report__alert_documents")
        .order_by("-created_at", "-id")
    )
    serializer_class = AlertSerializer
    filterset_class = AlertFilter


COMPARISON_PARAMS = (
    WholeNumberParam("current", description="Report id of the newer run.", message="Give a report id: 1, 2, ...", required=True),
    WholeNumberParam("previous", description="Report id to compare it with.", message="Give a report id: 1, 2, ...", required=True),
)


class ComparisonView(ApiViewMixin, APIView):
    """``GET /api/comparisons/?current=<report id>&previous=<report id>``: how ``current`` moved since
    ``previous``, as the reference compares reports (``compatible: false`` when the bundles differ,
    else pass-rate and overall deltas). 404 when a report does not exist."""

    @extend_schema(
        operation_id="comparison",
        parameters=[param.openapi for param in COMPARISON_PARAMS],
        responses={
            200: inline_serializer(
                "Comparison",
                {
                    "current": serializers.IntegerField(),
                    "previous": serializers.IntegerField(),
                    "comparison": DocumentField(),
                },
            ),
            400: OpenApiResponse(description='A bad parameter: {"<parameter>": ["..."]}.'),
            404: OpenApiResponse(description="A report does not exist."),
        },
    )
    def get(self, request: Request) -> Response:
        reject_unknown_params(request, tuple(param.name for param in COMPARISON_PARAMS))
        errors: dict[str, Any] = {}
        ids: list[int] = []
        for param in COMPARISON_PARAMS:
            try:
                ids.append(param.parse(request))
            except exceptions.ValidationError as exc:
                errors.update(exc.detail)
        if errors:
            raise exceptions.ValidationError(errors)
        reports = {report.pk: report for report in Report.objects.filter(pk__in=ids).only("id", "document", "is_refresh", "is_scripted")}
        missing = [report_id for report_id in ids if report_id not in reports]
        if missing:
            # Report ids are not run ids (a chaos run has none, so they part): say which is which.
            report_of_run = Report.objects.filter(run_id=missing[0]).values_list("pk", flat=True).first()
            hint = (
                f" (this endpoint takes report ids: run {missing[0]}'s report is {report_of_run}; /compare/ takes run ids)"
                if report_of_run is not None
                else " (this endpoint takes report ids: /api/reports/?run=N gives a run's; /compare/ takes run ids)"
            )
            raise exceptions.NotFound(f"There is no report {missing[0]}{hint}.")
        current, previous = (reports[report_id] for report_id in ids)
        for report in (current, previous):
            if reason := report.not_a_measurement():
                raise exceptions.ValidationError({"detail": f"Report {report.pk} is {reason}; compare measured reports only."})
        return Response(
            {"current": current.pk, "previous": previous.pk, "comparison": compare_reports(current.document, previous.document)}
        )


MAX_SCORE_ITEMS = 500
SCORE_BODY_HELP = (
    'Send a JSON array of {"observation": {...}, "options": {"bundleId": "...", "weights"?: {...}, '
    f'"thresholds"?: {{...}}}}}} objects, at most {MAX_SCORE_ITEMS}, as for manage.py score FILE.'
)


def score_item(index: int, item: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """``(scorecard, [], notes)`` or ``({"error": message}, every problem, [])`` for one ``{observation, options}``.

    The same scoring as ``manage.py score`` (:func:`runs.evaluation.scoring.score_observation_noted`, so the
    message is the reference's error text when the reference rejects the observation too, and ``notes`` say
    what the reference accepts and ignores). The observation is checked first, as the reference does, so
    its message is the error; invalid options still list their problem first among the problems. Messages and notes are redacted: an option name or dimension is echoed back and
    could be secret-shaped.
    """
    if "observation" not in item:
        message = f"item {index} must be an object with observation and options"
        return {"error": message}, [message], []
    observation = item["observation"]
    try:
        scorecard, notes = score_observation_noted(observation, item.get("options", {}))
    except ObservationError as exc:  # checked first, as the reference does: its message is the error
        message, problems = str(exc), exc.problems
    except ValueError as exc:  # invalid options
        message, problems = str(exc), [str(exc), *validate_observation(observation)]
    else:
        return scorecard, [], [redact(note) for note in notes]
    option_problem = options_problem(item.get("options", {}))
    if option_problem is not None and option_problem not in problems:
        problems = [option_problem, *problems]
    return {"error": redact(message)}, [redact(problem) for problem in problems], []


@extend_schema_field(
    {"type": "object", "additionalProperties": {}, "description": "A reference observation (paperclip.runner.workflow-observation.v1)."}
)
class ObservationDocumentField(serializers.JSONField):
    """An observation document, validated by :func:`runs.evaluation.observation_schema.validate_observation`."""


def _dimension_numbers_schema(dimensions: tuple[str, ...], description: str, *, nullable_values: bool) -> dict[str, Any]:
    # Unknown dimensions (and, for weights, the gates) are accepted and ignored with a note, as the
    # reference scorer ignores them (docs/scoring.md): the object stays open.
    number: dict[str, Any] = {"type": "number", "nullable": True} if nullable_values else {"type": "number"}
    return {
        "type": "object",
        "nullable": True,
        "properties": dict.fromkeys(dimensions, number),
        "additionalProperties": {},
        "description": description,
    }


@extend_schema_field(
    _dimension_numbers_schema(
        tuple(dimension for dimension in DIMENSIONS if dimension not in GATE_DIMENSIONS),
        "Weights of non-gate dimensions; defaults for the rest (a negative weight is used as given, with a note). "
        "A weight on a gate dimension (hard_invariants, lifecycle_integrity) is ignored with a note: gates always "
        "weigh 0. Their sum must stay a finite double.",
        nullable_values=False,
    )
)
class WeightsField(serializers.JSONField):
    """Weights by non-gate dimension (documentation only)."""


@extend_schema_field(
    _dimension_numbers_schema(
        DIMENSIONS,
        "Pass thresholds by dimension (a score passes when it is at least its threshold); default 1, also for null.",
        nullable_values=True,
    )
)
class ThresholdsField(serializers.JSONField):
    """Thresholds by dimension (documentation only)."""


class ScoreOptionsSerializer(serializers.Serializer):
    """Scoring options, as ``scoreRunnerWorkflow`` takes them (documentation only). Unknown options are
    accepted and ignored with a note, as the reference ignores them."""

    bundleId = serializers.CharField(allow_blank=True)
    weights = WeightsField(required=False, allow_null=True)
    thresholds = ThresholdsField(required=False, allow_null=True)


class ScoreItemSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """One observation to score (documentation only: the view validates the body itself)."""

    observation = ObservationDocumentField()
    options = ScoreOptionsSerializer()


class ScoreProblemsSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="Position of the invalid item in the request array.")
    problems = serializers.ListField(child=serializers.CharField(), help_text="Every problem with the item.")


class ScoreNotesSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="Position of the scored item in the request array.")
    notes = serializers.ListField(
        child=serializers.CharField(),
        help_text=(
            "What the reference scorer accepts and ignores in this item (a weight on a gate, an unknown option, "
            "a field scoring does not read that breaks the reference schema). The scorecard is unchanged by them."
        ),
    )


SCORE_NOTES_FIELD = ScoreNotesSerializer(many=True, help_text="Items scored with notes, in order; items without notes are left out.")

#: ``?notes=`` values: a 200 is the bare array of scorecards unless notes are asked for.
SCORE_NOTES_FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class ScoreView(ApiViewMixin, APIView):
    """``POST /api/score/``: score a JSON array of ``{observation, options}`` (at most 500) into reference
    scorecards, in order, exactly as ``manage.py score FILE`` does. Nothing is stored. A 200 is the array of
    scorecards; with ``?notes=true`` it is ``{"results": [...], "notes": [{"index", "notes"}]}``, what the
    reference accepts and ignores (docs/scoring.md) said beside the unchanged scorecards. A 400 is
    ``{"errors", "results", "notes"}``.

    Any signed-in user may call it: it is a POST only because the observations travel in the body, it
    writes nothing, so the default ``ReadSignedInWriteStaff`` (which reserves POST for staff) does not
    apply; ``IsAuthenticated`` still refuses anonymous callers (403).
    """

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="score",
        request=ScoreItemSerializer(many=True),
        parameters=[
            OpenApiParameter(
                "notes",
                OpenApiTypes.STR,
                enum=sorted(SCORE_NOTES_FLAGS),
                required=False,
                description="true: answer {results, notes} — what the reference accepts and ignores, beside the scorecards. "
                "Default false: the bare array of scorecards.",
            )
        ],
        responses={
            200: OpenApiResponse(
                # Two shapes by ?notes=: the bare array, or the results beside their notes (ScoreNotes is
                # the 400 body's component too).
                response={
                    "oneOf": [
                        {"type": "array", "items": {"type": "object", "additionalProperties": {}}},
                        {
                            "type": "object",
                            "properties": {
                                "results": {"type": "array", "items": {"type": "object", "additionalProperties": {}}},
                                "notes": {"type": "array", "items": {"$ref": "#/components/schemas/ScoreNotes"}},
                            },
                            "required": ["results", "notes"],
                        },
                    ]
                },
                description=(
                    "Every item scored: the array of scorecards (paperclip.runner.eval-scorecard.v2), one per item, in "
                    'order — or, with ?notes=true, {"results": [scorecard, ...], "notes": [{"index", "notes"}]}. The '
                    "scorecards are the reference's documents, unchanged; what the reference accepts and ignores is said "
                    "in notes, beside them (docs/scoring.md)."
                ),
            ),
            400: OpenApiResponse(
                response=PolymorphicProxySerializer(
                    component_name="ScoreBadRequest",
                    serializers=[
                        inline_serializer(
                            "ScoreErrors",
                            {
                                "errors": ScoreProblemsSerializer(many=True),
                                "results": serializers.ListField(
                                    child=DocumentField(), help_text='Per item, in order: its scorecard or {"error": "<message>"}.'
                                ),
                                "notes": SCORE_NOTES_FIELD,
                            },
                        ),
                        inline_serializer("ScoreBodyError", {"detail": serializers.CharField()}),
                    ],
                    resource_type_field_name=None,
                ),
                description=(
                    'Some observation is invalid: {"errors": [{"index", "problems"}], "results": [...], "notes": [...]}. '
                    "A body that is not an array of objects, or holds more than 500, or a notes parameter that is not "
                    'true or false, gives {"detail": "..."}.'
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        flag = request.query_params.get("notes", "false").strip().lower()
        if flag not in SCORE_NOTES_FLAGS:
            raise exceptions.ValidationError({"detail": f"The notes parameter must be true or false, not {redact(flag)!r}."})
        with_notes = SCORE_NOTES_FLAGS[flag]
        items = request.data
        if not isinstance(items, list):
            raise exceptions.ValidationError({"detail": f"The body must be a JSON array. {SCORE_BODY_HELP}"})
        if len(items) > MAX_SCORE_ITEMS:
            raise exceptions.ValidationError({"detail": f"Too many observations: {len(items)}. {SCORE_BODY_HELP}"})
        not_objects = [index for index, item in enumerate(items) if not isinstance(item, dict)]
        if not_objects:
            raise exceptions.ValidationError({"detail": f"Item {not_objects[0]} is not an object. {SCORE_BODY_HELP}"})
        results: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        notes: list[dict[str, Any]] = []
        for index, item in enumerate(items):
            result, problems, item_notes = score_item(index, item)
            results.append(result)
            if problems:
                errors.append({"index": index, "problems": problems})
            if item_notes:
                notes.append({"index": index, "notes": item_notes})
        # Nothing is stored, but a scorecard echoes the observation's ids: a secret-shaped one is
        # redacted like anything else evalhub shows (a well-formed id is untouched).
        if errors:
            return Response(redact_data({"errors": errors, "results": results, "notes": notes}), status=status.HTTP_400_BAD_REQUEST)
        # The bare array is the contract clients read; the notes come beside it only when asked for.
        return Response(redact_data({"results": results, "notes": notes} if with_notes else results))


class LeaderboardRowSerializer(serializers.Serializer):
    candidateId = serializers.CharField(source="candidate_key")
    model = serializers.CharField(help_text="The catalog's model now.")
    slotId = serializers.CharField(source="slot_key")
    nights = serializers.IntegerField(help_text="Nights (of those covered) on which the candidate played.")
    executions = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="Executions that never reached the runtime.")
    scoreable = serializers.IntegerField()
    passed = serializers.IntegerField()
    passRate = serializers.FloatField(source="pass_rate", allow_null=True, help_text="passed / scoreable; null when nothing was scored.")
    passRateInterval = serializers.ListField(
        source="interval", child=serializers.FloatField(), allow_null=True, help_text="The 95% Wilson interval [low, high]."
    )
    meanScore = serializers.FloatField(source="mean_score", allow_null=True)
    p95LatencyMs = serializers.IntegerField(source="p95_latency_ms", allow_null=True)
    costUsd = UsdField(source="cost_usd", help_text="What the priced executions cost (USD).")
    unpriced = serializers.IntegerField(help_text="Executions whose cost is unknown (no price).")
    costPerPassUsd = UsdField(
        source="cost_per_pass", allow_null=True, help_text="USD per passed execution; null when nothing passed or a cost is unknown."
    )
    costPerPassAtLeastUsd = UsdField(
        source="cost_per_pass_at_least", allow_null=True, help_text="With unknown costs: the priced part's share."
    )
    bestValue = serializers.BooleanField(source="best_value", help_text="The lowest known cost per passed execution.")


#: ``?nights=`` of the leaderboard, parsed without ``int()`` on text it cannot hold (evalhub/api/params.py).
NIGHTS_PARAM = WholeNumberParam(
    "nights",
    description=f"How many of the newest live nights (1..{MAX_LEADERBOARD_NIGHTS}, default {LEADERBOARD_NIGHTS}).",
    message=f"nights must be a whole number from 1 to {MAX_LEADERBOARD_NIGHTS}.",
    maximum=MAX_LEADERBOARD_NIGHTS,
)


class LeaderboardView(ApiViewMixin, APIView):
    """``GET /api/leaderboard/?nights=7&sort=-pass_rate``: each candidate over the nightly live runs
    of the newest ``nights`` nights (1..90, default 7), as the leaderboard page shows it; ``sort``
    is one of candidate, pass_rate, mean_score, p95_latency_ms, cost_per_pass, scoreable, ``-``
    for descending. 400 with field errors for a bad or unknown parameter."""

    @extend_schema(
        operation_id="leaderboard",
        parameters=[
            NIGHTS_PARAM.openapi,
            OpenApiParameter(
                "sort",
                OpenApiTypes.STR,
                enum=[f"{direction}{column}" for column in LEADERBOARD_SORTS for direction in ("", "-")],
                description="A column, - for descending (default -pass_rate).",
            ),
        ],
        responses={
            200: inline_serializer(
                "Leaderboard",
                {
                    "nights": serializers.ListField(child=serializers.DateField()),
                    "sort": serializers.CharField(),
                    "candidates": LeaderboardRowSerializer(many=True),
                },
            ),
            400: OpenApiResponse(description='{"nights": ["..."]} or {"sort": ["..."]}: a bad or unknown parameter.'),
        },
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        errors: dict[str, Any] = unknown_param_errors(request, ("nights", "sort"))
        nights = LEADERBOARD_NIGHTS
        try:
            nights = NIGHTS_PARAM.parse(request) or LEADERBOARD_NIGHTS
        except exceptions.ValidationError as exc:
            errors.update(exc.detail)
        sort = params.get("sort") or "-pass_rate"
        if sort.removeprefix("-") not in LEADERBOARD_SORTS:
            errors["sort"] = [f"sort must be one of {', '.join(LEADERBOARD_SORTS)}, with - for descending."]
        if errors:
            raise exceptions.ValidationError(errors)
        board = leaderboard(nights=nights, sort=sort)
        return Response(
            {
                "nights": [night.isoformat() for night in board.nights],
                "sort": board.sort,
                "candidates": LeaderboardRowSerializer(board.rows, many=True).data,
            }
        )
